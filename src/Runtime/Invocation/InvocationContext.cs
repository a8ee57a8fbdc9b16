using System.Text.Json;
using FaaST.Protos.Worker;

namespace FaaST.Runtime.Invocation;

/// <summary>
/// One invocation's identity, its binding data (values for {expressions}) and what must be
/// released when it ends (e.g. cache pins), even if the worker crashed.
/// </summary>
public sealed class InvocationContext : IAsyncDisposable
{
    // What is held, as a lock-free stack: input reads run in parallel and each holds its pin, and a
    // read can finish after the invocation ended (a sibling read failed and the invocation was
    // disposed without waiting for it). Disposing swaps in Ended; a Hold that finds it releases at once.
    private static readonly Held Ended = new(null!);
    private Held? _held;

    // A JSON payload whose properties are binding data, parsed on the first expression that needs
    // it and then kept for the invocation's other expressions (one parse per invocation, none when
    // every expression resolves from the route, the query or the blob name).
    private ReadOnlyMemory<byte> _payload;
    private string? _payloadSource;
    private JsonPayload? _parsed;

    public InvocationContext(string functionName)
    {
        FunctionName = functionName;
        InvocationId = Guid.NewGuid().ToString();
    }

    public string InvocationId { get; }

    public string FunctionName { get; }

    /// <summary>Values {expressions} resolve from: route and query values, blob-trigger path values.</summary>
    public Dictionary<string, string> BindingData { get; } = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>Extra values sent to the worker as trigger metadata (JSON objects and the like).</summary>
    public Dictionary<string, TypedData> TriggerMetadata { get; } = new(StringComparer.Ordinal);

    /// <summary>
    /// A JSON document (an HTTP request's JSON body, a queue message) whose properties are binding
    /// data after <see cref="BindingData"/>, also along property paths ({location.country}).
    /// <paramref name="json"/> must stay unchanged until the invocation ends; it is parsed only if
    /// an expression needs it. <paramref name="source"/> names it in errors ("the JSON body").
    /// </summary>
    public void SetJsonPayload(ReadOnlyMemory<byte> json, string source)
    {
        _payload = json;
        _payloadSource = source;
    }

    /// <summary>
    /// The value of <paramref name="expression"/>: from <see cref="BindingData"/>, else from the JSON
    /// payload (case-insensitive names, as in Azure Functions). Null when there is none, with why
    /// (null when the trigger supplied nothing under the expression's first name).
    /// </summary>
    public string? Lookup(BindingExpression expression, out string? why)
    {
        // A query parameter may itself be named "a.b"; that name, as written, comes first.
        if (expression.IsPath && BindingData.TryGetValue(expression.Text, out var whole))
        {
            why = null;
            return whole;
        }
        if (BindingData.TryGetValue(expression.Name, out var text))
        {
            why = expression.IsPath ? $"\"{expression.Name}\" is \"{text}\", a text value with no properties" : null;
            return expression.IsPath ? null : text;
        }
        if (_payloadSource is null)
        {
            why = null;
            return null;
        }
        var payload = Payload();
        if (payload.Error is { } error)
        {
            why = $"{_payloadSource} is not valid JSON{error}";
            return null;
        }
        var root = payload.Document!.RootElement;
        if (root.ValueKind == JsonValueKind.Object && !BindingExpression.TryGetProperty(root, expression.Name, out _))
        {
            why = null;
            return null;
        }
        return expression.Walk(root, 0, _payloadSource, out why);
    }

    /// <summary>
    /// Whether <paramref name="expression"/> names a JSON <c>null</c> in the payload (and no route, query or trigger
    /// value): FaaST binds a blob input whose path holds one to nothing, and does not write such an output. Asked only
    /// after <see cref="Lookup"/> found no value, so the common case pays nothing.
    /// </summary>
    public bool IsJsonNull(BindingExpression expression)
    {
        if (expression.IsBuiltIn || _payloadSource is null || BindingData.ContainsKey(expression.Name) ||
            expression.IsPath && BindingData.ContainsKey(expression.Text))
            return false;
        return Payload().Document is { } document && expression.WalksToNull(document.RootElement);
    }

    /// <summary>The payload, parsed once. Expressions resolve one after another today; should two race, one parse wins and the other is disposed.</summary>
    private JsonPayload Payload()
    {
        if (Volatile.Read(ref _parsed) is { } parsed)
            return parsed;
        JsonPayload made;
        try
        {
            made = new JsonPayload(JsonDocument.Parse(_payload), null);
        }
        catch (JsonException e)
        {
            made = new JsonPayload(null, JsonSyntaxError.Describe(e, _payload.Span));
        }
        var seen = Interlocked.CompareExchange(ref _parsed, made, null);
        if (seen is null)
            return made;
        made.Document?.Dispose();
        return seen;
    }

    private sealed record JsonPayload(JsonDocument? Document, string? Error);

    /// <summary>
    /// Holds <paramref name="resource"/> until the invocation ends; safe from parallel reads. If it
    /// has ended already, the resource is released at once (else a pin would be held forever).
    /// </summary>
    public void Hold(IDisposable resource)
    {
        ArgumentNullException.ThrowIfNull(resource);
        var node = new Held(resource);
        var head = Volatile.Read(ref _held);
        while (true)
        {
            if (ReferenceEquals(head, Ended))
            {
                resource.Dispose();
                return;
            }
            node.Next = head;
            var seen = Interlocked.CompareExchange(ref _held, node, head);
            if (ReferenceEquals(seen, head))
                return;
            head = seen;
        }
    }

    public ValueTask DisposeAsync()
    {
        for (var held = Interlocked.Exchange(ref _held, Ended); held is not null && !ReferenceEquals(held, Ended); held = held.Next)
            held.Resource.Dispose();
        // The document rents its index from a pool; giving it back is what Dispose does.
        Interlocked.Exchange(ref _parsed, null)?.Document?.Dispose();
        return ValueTask.CompletedTask;
    }

    private sealed class Held(IDisposable resource)
    {
        public IDisposable Resource { get; } = resource;

        public Held? Next { get; set; }
    }
}
