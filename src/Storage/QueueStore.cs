using Azure;
using Azure.Core;
using Azure.Storage.Queues;
using Microsoft.Extensions.Logging;

namespace FaaST.Storage;

/// <summary>A message taken from a queue: its text as stored (encoded as the sender chose) and its metadata.</summary>
public sealed record ReceivedQueueMessage(
    string Id,
    string PopReceipt,
    string Text,
    long DequeueCount,
    DateTimeOffset? InsertionTime,
    DateTimeOffset? ExpirationTime,
    DateTimeOffset? NextVisibleTime);

/// <summary>
/// Azure Storage Queues, as queue triggers and queue output bindings use them. Message text is passed through
/// as given: the caller encodes (base64 or not, host.json <c>extensions.queues.messageEncoding</c>), so a
/// message that is not what the encoding expects reaches the caller intact and fails there with a clear error.
/// </summary>
public interface IQueueStore
{
    /// <summary>The queue service endpoint, e.g. http://127.0.0.1:10001/devstoreaccount1.</summary>
    Uri Endpoint { get; }

    Task CreateQueueIfNotExistsAsync(string queue, CancellationToken ct = default);

    /// <summary>Adds a message; <see cref="QueueStorageException"/> with status 404 when the queue does not exist.</summary>
    Task SendAsync(string queue, string text, CancellationToken ct = default);

    /// <summary>Takes up to <paramref name="max"/> (1 to 32) messages, invisible to others for <paramref name="visibility"/>.</summary>
    Task<IReadOnlyList<ReceivedQueueMessage>> ReceiveAsync(string queue, int max, TimeSpan visibility, CancellationToken ct = default);

    /// <summary>Reads up to <paramref name="max"/> messages without taking them (for tests and tools).</summary>
    Task<IReadOnlyList<string>> PeekAsync(string queue, int max, CancellationToken ct = default);

    Task DeleteAsync(string queue, string id, string popReceipt, CancellationToken ct = default);

    /// <summary>Makes a taken message visible again after <paramref name="visibility"/>; returns its new pop receipt.</summary>
    Task<string> UpdateVisibilityAsync(string queue, string id, string popReceipt, TimeSpan visibility, CancellationToken ct = default);
}

/// <summary>A queue service answered with an error (status and error code), naming the operation and queue.</summary>
public sealed class QueueStorageException(int status, string? errorCode, string message, Exception? inner = null) : Exception(message, inner)
{
    public int Status { get; } = status;

    public string? ErrorCode { get; } = errorCode;
}

/// <summary>
/// <see cref="IQueueStore"/> on Azure.Storage.Queues: one <see cref="QueueServiceClient"/> per connection over the
/// process's shared transport (<see cref="StorageTransport"/>: pooled connections, link-local addresses refused),
/// the same retry promise as <see cref="BlobStore"/>, no SDK diagnostics. Thread-safe.
/// </summary>
public sealed class QueueStore : IQueueStore
{
    private readonly QueueServiceClient _service;
    private readonly System.Collections.Concurrent.ConcurrentDictionary<string, QueueClient> _queues = new(StringComparer.Ordinal);

    /// <summary>Creates a store from a storage connection string that reaches a queue service.</summary>
    /// <exception cref="ArgumentException">The connection string is not usable for queues (the message says why, never a secret).</exception>
    public QueueStore(string connectionString, BlobStoreOptions? options = null, ILogger? logger = null)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(connectionString);
        var parsed = StorageConnectionString.Parse(connectionString);
        if (StorageConnectionString.Explain(connectionString) is { } explained)
            throw new ArgumentException($"The storage connection string is not usable: {explained}.", nameof(connectionString));
        if (!HasQueueService(connectionString))
            throw new ArgumentException("The storage connection string names no queue service: it has BlobEndpoint but no QueueEndpoint " +
                "(add QueueEndpoint=..., or use AccountName with DefaultEndpointsProtocol)", nameof(connectionString));
        _ = parsed;
        try
        {
            _service = new QueueServiceClient(connectionString, ClientOptions(Validated(options), logger));
        }
        catch (Exception e) when (e is not OutOfMemoryException)
        {
            throw new ArgumentException($"The storage connection string is not usable for queues: {FirstLine(e.Message)}", nameof(connectionString), e);
        }
        Endpoint = new Uri(_service.Uri.GetLeftPart(UriPartial.Path).TrimEnd('/'), UriKind.Absolute);
    }

    /// <summary>Creates a store for a queue service URI with a token credential (a managed identity); https only.</summary>
    public QueueStore(Uri serviceUri, TokenCredential credential, BlobStoreOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(serviceUri);
        ArgumentNullException.ThrowIfNull(credential);
        if (!serviceUri.IsAbsoluteUri || serviceUri.Scheme != Uri.UriSchemeHttps)
            throw new ArgumentException($"The queue service URI {serviceUri} is not an absolute https URI (a token is only ever sent over TLS).",
                nameof(serviceUri));
        _service = new QueueServiceClient(serviceUri, credential, ClientOptions(Validated(options), logger));
        Endpoint = new Uri(_service.Uri.GetLeftPart(UriPartial.Path).TrimEnd('/'), UriKind.Absolute);
    }

    /// <summary>
    /// True when a connection string reaches a queue service: it names QueueEndpoint, is development storage, or
    /// lets the SDK derive one (an account name without explicit service endpoints).
    /// </summary>
    public static bool HasQueueService(string connectionString) => StorageConnectionString.ReachesService(connectionString, "QueueEndpoint");

    /// <inheritdoc />
    public Uri Endpoint { get; }

    /// <inheritdoc />
    public async Task CreateQueueIfNotExistsAsync(string queue, CancellationToken ct = default)
    {
        QueueNames.Validate(queue);
        await Call("CreateQueue", queue, () => Queue(queue).CreateIfNotExistsAsync(cancellationToken: ct)).ConfigureAwait(false);
    }

    /// <inheritdoc />
    public Task SendAsync(string queue, string text, CancellationToken ct = default) =>
        Call("PutMessage", queue, () => Queue(queue).SendMessageAsync(text, ct));

    /// <inheritdoc />
    public async Task<IReadOnlyList<ReceivedQueueMessage>> ReceiveAsync(string queue, int max, TimeSpan visibility, CancellationToken ct = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(max, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(max, 32);
        var response = await Call("GetMessages", queue, () => Queue(queue).ReceiveMessagesAsync(max, visibility, ct)).ConfigureAwait(false);
        var messages = response.Value;
        if (messages.Length == 0)
            return [];
        var result = new ReceivedQueueMessage[messages.Length];
        for (var i = 0; i < messages.Length; i++)
        {
            var m = messages[i];
            result[i] = new ReceivedQueueMessage(m.MessageId, m.PopReceipt, m.MessageText, m.DequeueCount, m.InsertedOn, m.ExpiresOn, m.NextVisibleOn);
        }
        return result;
    }

    /// <inheritdoc />
    public async Task<IReadOnlyList<string>> PeekAsync(string queue, int max, CancellationToken ct = default)
    {
        var response = await Call("PeekMessages", queue, () => Queue(queue).PeekMessagesAsync(max, ct)).ConfigureAwait(false);
        return response.Value.Select(m => m.MessageText).ToArray();
    }

    /// <inheritdoc />
    public Task DeleteAsync(string queue, string id, string popReceipt, CancellationToken ct = default) =>
        Call("DeleteMessage", queue, () => Queue(queue).DeleteMessageAsync(id, popReceipt, ct));

    /// <inheritdoc />
    public async Task<string> UpdateVisibilityAsync(string queue, string id, string popReceipt, TimeSpan visibility, CancellationToken ct = default)
    {
        var response = await Call("UpdateMessage", queue,
            () => Queue(queue).UpdateMessageAsync(id, popReceipt, (string?)null, visibility, ct)).ConfigureAwait(false);
        return response.Value.PopReceipt;
    }

    private QueueClient Queue(string queue) => _queues.GetOrAdd(queue, static (q, s) => s.GetQueueClient(q), _service);

    /// <summary>One SDK call, its errors turned into the project's: the status and code, naming the operation and queue.</summary>
    private static async Task<T> Call<T>(string operation, string queue, Func<Task<T>> call)
    {
        try
        {
            return await call().ConfigureAwait(false);
        }
        catch (RequestFailedException e) when (e.Status != 0)
        {
            throw new QueueStorageException(e.Status, e.ErrorCode, $"{operation} on queue {queue} failed: {e.Status} {e.ErrorCode}", e);
        }
        catch (Exception e) when (e is RequestFailedException or HttpRequestException or IOException or AggregateException ||
                                  e is OperationCanceledException && e.InnerException is TimeoutException)
        {
            throw new StorageUnavailableException($"{operation} on queue {queue}: the queue service is unreachable ({FirstLine(e.Message)})", e);
        }
    }

    private static async Task Call(string operation, string queue, Func<Task> call) =>
        await Call<bool>(operation, queue, async () =>
        {
            await call().ConfigureAwait(false);
            return true;
        }).ConfigureAwait(false);

    private static BlobStoreOptions Validated(BlobStoreOptions? options)
    {
        var copy = options?.Clone() ?? new BlobStoreOptions();
        copy.Validate();
        return copy;
    }

    /// <summary>The SDK's options: the shared transport, the project's retry promise, no diagnostics, no encoding of its own.</summary>
    private static QueueClientOptions ClientOptions(BlobStoreOptions options, ILogger? logger) =>
        StorageTransport.Configure(new QueueClientOptions { Transport = StorageTransport.For(options), MessageEncoding = QueueMessageEncoding.None },
            options, logger);

    private static string FirstLine(string text)
    {
        var nl = text.AsSpan().IndexOfAny('\r', '\n');
        return (nl >= 0 ? text[..nl] : text).Trim();
    }
}

/// <summary>Azure's rules for queue names.</summary>
public static class QueueNames
{
    /// <summary>3 to 63 characters: lowercase letters, digits and single dashes, starting and ending with a letter or digit.</summary>
    public static string? Problem(string name)
    {
        if (name.Length is < 3 or > 63)
            return $"queue name \"{name}\" must be 3 to 63 characters long";
        foreach (var c in name)
            if (!(char.IsAsciiLetterLower(c) || char.IsAsciiDigit(c) || c == '-'))
                return $"queue name \"{name}\" may hold only lowercase letters, digits and dashes";
        if (name[0] == '-' || name[^1] == '-' || name.Contains("--", StringComparison.Ordinal))
            return $"queue name \"{name}\" must start and end with a letter or digit and have no two dashes in a row";
        return null;
    }

    public static void Validate(string name)
    {
        if (Problem(name) is { } problem)
            throw new ArgumentException(problem, nameof(name));
    }
}
