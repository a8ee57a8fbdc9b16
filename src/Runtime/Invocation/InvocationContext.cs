using FaaST.Protos.Worker;

namespace FaaST.Runtime.Invocation;

/// <summary>
/// One invocation's identity, its binding data (values for {expressions}) and what must be
/// released when it ends (e.g. cache pins), even if the worker crashed.
/// </summary>
public sealed class InvocationContext : IAsyncDisposable
{
    private List<IDisposable>? _resources;
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

    /// <summary>Holds <paramref name="resource"/> until the invocation ends.</summary>
    public void Hold(IDisposable resource) => (_resources ??= []).Add(resource);

    public ValueTask DisposeAsync()
    {
        if (_resources is { } held)
        {
            _resources = null;
            foreach (var r in held)
                r.Dispose();
        }
        return ValueTask.CompletedTask;
    }
}
