using System.Diagnostics;

namespace FaaST.Common;

/// <summary>
/// Lets at most one log line of a kind through per interval and counts the ones it holds back, so that a
/// warning logged per read (a peer fallback, a read served without caching) cannot flood the log while an
/// owner is down. Lock-free: one compare-exchange on the next allowed timestamp, which only the line that
/// passes wins; the others just count themselves.
/// </summary>
public sealed class LogGate
{
    private readonly long _interval;
    private long _next;
    private long _suppressed;

    /// <param name="interval">Stopwatch ticks between two lines that pass.</param>
    public LogGate(long interval)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(interval);
        _interval = interval;
    }

    /// <summary>One line a second (Stopwatch ticks).</summary>
    public static LogGate PerSecond() => new(Stopwatch.Frequency);

    /// <summary>Whether a line may be logged now (Stopwatch.GetTimestamp()).</summary>
    public bool TryPass(out long suppressed) => TryPass(Stopwatch.GetTimestamp(), out suppressed);

    /// <summary>
    /// Whether a line may be logged at timestamp <paramref name="now"/>; if so, <paramref name="suppressed"/> is
    /// the number of lines held back since the previous one passed (for the caller to log with it).
    /// </summary>
    public bool TryPass(long now, out long suppressed)
    {
        var next = Volatile.Read(ref _next);
        if (now < next || Interlocked.CompareExchange(ref _next, now + _interval, next) != next)
        {
            Interlocked.Increment(ref _suppressed);
            suppressed = 0;
            return false;
        }
        suppressed = Interlocked.Exchange(ref _suppressed, 0);
        return true;
    }
}
