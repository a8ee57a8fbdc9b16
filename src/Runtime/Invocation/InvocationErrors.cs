namespace FaaST.Runtime.Invocation;

/// <summary>A binding expression could not be resolved from the invocation's data.</summary>
public sealed class BindingResolutionException(string message) : Exception(message);

/// <summary>The function ran and failed (it threw, or the worker could not load it).</summary>
public sealed class FunctionFailedException(string message, string? stackTrace) : Exception(message)
{
    public string? WorkerStackTrace { get; } = stackTrace;
}

/// <summary>The function exists but is disabled or could not be loaded.</summary>
public sealed class FunctionUnavailableException(string message) : Exception(message);
