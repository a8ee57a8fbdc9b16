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
    private Func<string, string?>? _fallback;

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

    /// <summary>A last resort for expressions, consulted lazily (e.g. properties of a JSON body).</summary>
    public void SetFallback(Func<string, string?> fallback) => _fallback = fallback;

    public string? Lookup(string name)
    {
        if (BindingData.TryGetValue(name, out var v))
            return v;
        return _fallback?.Invoke(name);
    }

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
        return ValueTask.CompletedTask;
    }

    private sealed class Held(IDisposable resource)
    {
        public IDisposable Resource { get; } = resource;

        public Held? Next { get; set; }
    }
}
