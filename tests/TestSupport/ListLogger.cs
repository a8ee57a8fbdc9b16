using System.Collections.Concurrent;
using Microsoft.Extensions.Logging;

namespace FaaST.TestSupport;

/// <summary>
/// Keeps what was logged (every category alike), to assert on it and to explain failures: as lines
/// "Level: text", and as entries with the level and event id.
/// </summary>
/// <param name="minimum">The lowest level kept (and reported enabled).</param>
public sealed class ListLogger(LogLevel minimum = LogLevel.Trace) : ILogger, ILoggerProvider
{
    private readonly ConcurrentQueue<(LogLevel Level, int EventId, string Text)> _entries = new();

    public ConcurrentQueue<string> Lines { get; } = new();

    /// <summary>What was logged, in order, with its level and event id.</summary>
    public IReadOnlyList<(LogLevel Level, int EventId, string Text)> Entries => [.. _entries];

    public string All => string.Join("\n", Lines);

    public bool Contains(string text) => Lines.Any(l => l.Contains(text, StringComparison.Ordinal));

    public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

    public bool IsEnabled(LogLevel logLevel) => logLevel >= minimum && logLevel != LogLevel.None;

    public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
    {
        if (!IsEnabled(logLevel))
            return;
        var text = formatter(state, exception);
        _entries.Enqueue((logLevel, eventId.Id, text));
        Lines.Enqueue($"{logLevel}: {text}");
    }

    public ILogger CreateLogger(string categoryName) => this;

    public void Dispose()
    {
    }
}
