namespace FaaST.Runtime.Invocation;

/// <summary>A binding expression could not be resolved from the invocation's data.</summary>
public sealed class BindingResolutionException(string message) : Exception(message);

/// <summary>The function ran and failed (it threw, or the worker could not load it).</summary>
public sealed class FunctionFailedException(string message, string? stackTrace) : Exception(message)
{
    public string? WorkerStackTrace { get; } = stackTrace;
}

/// <summary>
/// A conditional blob output (<c>"ifMatch"</c>) found its blob changed since the input it names read it (or created,
/// when the input found none): nothing of the invocation was written from that output on. HTTP answers 409.
/// </summary>
public sealed class BlobWriteConflictException(string binding, string blob, string message, Exception? inner = null) : Exception(message, inner)
{
    /// <summary>The output binding that was not written.</summary>
    public string Binding { get; } = binding;

    /// <summary>"container/blob".</summary>
    public string Blob { get; } = blob;
}

/// <summary>The function exists but is disabled or could not be loaded.</summary>
public sealed class FunctionUnavailableException(string message) : Exception(message);
