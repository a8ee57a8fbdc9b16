using System.Text;
using System.Text.Json;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;

namespace FaaST.Runtime.Bindings;

/// <summary>Something that wants to hear about queue messages the runtime sent (queue triggers, to poll at once).</summary>
public interface IQueueWriteObserver
{
    /// <param name="account">The account the connection reaches (<see cref="StorageAccounts.AccountOf"/>).</param>
    void OnQueueMessagesWritten(string? account, string queue);
}

/// <summary>
/// Queue message text on the wire, as host.json <c>extensions.queues.messageEncoding</c> says: base64 of the UTF-8
/// bytes (the default, as Azure Functions writes and expects), or the text as it is ("none").
/// </summary>
public static class QueueMessageCodec
{
    private static readonly UTF8Encoding StrictUtf8 = new(encoderShouldEmitUTF8Identifier: false, throwOnInvalidBytes: true);

    public static string Encode(string text, bool base64) => base64 ? Convert.ToBase64String(Encoding.UTF8.GetBytes(text)) : text;

    public static string Encode(ReadOnlySpan<byte> bytes, bool base64, string what)
    {
        if (base64)
            return Convert.ToBase64String(bytes);
        try
        {
            return StrictUtf8.GetString(bytes);
        }
        catch (DecoderFallbackException)
        {
            throw new FormatException($"{what}: the value is bytes that are not UTF-8 text, which extensions.queues.messageEncoding \"none\" " +
                "cannot carry (use base64, the default)");
        }
    }

    /// <summary>The message's bytes; <see cref="FormatException"/> naming the message when base64 is expected and it is not base64.</summary>
    public static byte[] Decode(string stored, bool base64, string what)
    {
        if (!base64)
            return Encoding.UTF8.GetBytes(stored);
        try
        {
            return Convert.FromBase64String(stored);
        }
        catch (FormatException)
        {
            throw new FormatException($"{what} is not valid base64, which extensions.queues.messageEncoding \"base64\" (the default) expects " +
                "(a sender that writes plain text needs messageEncoding \"none\" in host.json)");
        }
    }

    /// <summary>The bytes as text, or null when they are not UTF-8.</summary>
    public static string? TryText(byte[] bytes)
    {
        try
        {
            return StrictUtf8.GetString(bytes);
        }
        catch (DecoderFallbackException)
        {
            return null;
        }
    }
}

/// <summary>
/// Writes a function's queue output bindings: a string, bytes or JSON value is one message; a JSON array is one
/// message per element (a list from Python, an array from Node), as in Azure Functions. A queue that does not
/// exist yet is created. After each write the observer hears of it, so this instance's queue trigger takes the
/// message at once (still through the queue: whoever dequeues it first runs it).
/// </summary>
internal sealed class QueueOutput(StorageAccounts accounts, HostConfig host)
{
    private readonly bool _base64 = host.QueueBase64;

    public IQueueWriteObserver? Observer { get; set; }

    public async Task WriteAsync(FunctionDefinition function, BindingMetadata binding, TypedData value, InvocationContext invocation, CancellationToken ct)
    {
        var queue = ResolveQueue(function, binding, invocation);
        var what = $"function {function.Name}: queue output \"{binding.Name}\"";
        var messages = Messages(value, what);
        if (messages.Count == 0)
            return;
        var store = accounts.GetQueues(binding.Connection);
        foreach (var message in messages)
            await SendAsync(store, queue, message, ct);
        Observer?.OnQueueMessagesWritten(accounts.AccountOf(binding.Connection), queue);
    }

    /// <summary>Sends one message, creating the queue on its first use.</summary>
    internal static async Task SendAsync(IQueueStore store, string queue, string text, CancellationToken ct)
    {
        try
        {
            await store.SendAsync(queue, text, ct);
        }
        catch (QueueStorageException e) when (e.Status == 404)
        {
            await store.CreateQueueIfNotExistsAsync(queue, ct);
            await store.SendAsync(queue, text, ct);
        }
    }

    /// <summary>The messages (encoded for the wire) that a binding's value stands for.</summary>
    internal List<string> Messages(TypedData value, string what)
    {
        var messages = new List<string>(1);
        switch (value.DataCase)
        {
            case TypedData.DataOneofCase.None:
                break;
            case TypedData.DataOneofCase.String:
                messages.Add(QueueMessageCodec.Encode(value.String, _base64));
                break;
            case TypedData.DataOneofCase.Bytes:
                messages.Add(QueueMessageCodec.Encode(value.Bytes.Span, _base64, what));
                break;
            case TypedData.DataOneofCase.Blob when value.Blob.ContentCase == BlobData.ContentOneofCase.Bytes:
                messages.Add(QueueMessageCodec.Encode(value.Blob.Bytes.Span, _base64, what));
                break;
            case TypedData.DataOneofCase.Json:
                AddJson(value.Json, messages, what);
                break;
            default:
                throw new FunctionFailedException($"{what} got a {value.DataCase} value; a queue message is a string, bytes or JSON", null);
        }
        return messages;
    }

    private void AddJson(string json, List<string> messages, string what)
    {
        JsonDocument doc;
        try
        {
            doc = JsonDocument.Parse(json);
        }
        catch (JsonException e)
        {
            throw new FunctionFailedException($"{what} got JSON that does not parse: {e.Message}", null);
        }
        using (doc)
        {
            if (doc.RootElement.ValueKind != JsonValueKind.Array)
            {
                messages.Add(QueueMessageCodec.Encode(json, _base64));
                return;
            }
            foreach (var item in doc.RootElement.EnumerateArray())
            {
                // A string element is the message's text; anything else is the message as JSON.
                var text = item.ValueKind == JsonValueKind.String ? item.GetString()! : item.GetRawText();
                messages.Add(QueueMessageCodec.Encode(text, _base64));
            }
        }
    }

    /// <summary>The queue an output binding writes to for this invocation: its name's {expressions} resolved, lower-cased and checked.</summary>
    internal static string ResolveQueue(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation)
    {
        var template = binding.QueueName!;
        if (!template.TryResolve(invocation.Lookup, out var name, out var missing, out var why))
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" queueName \"{template.Pattern}\" needs a value for {{{missing}}}" +
                (why is null ? ", which the trigger did not supply" : ": " + why));
        name = name.ToLowerInvariant();
        if (QueueNames.Problem(name) is { } problem)
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" queueName \"{template.Pattern}\" resolved to an invalid name: {problem}");
        return name;
    }
}
