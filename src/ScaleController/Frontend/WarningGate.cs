using System.Diagnostics;

namespace FaaST.ScaleController.Frontend;

/// <summary>
/// Lets one warning a second through per app frontend and counts the rest, so a backend that keeps failing
/// every request cannot flood the log (CONTRIBUTING: warnings a request can cause repeatedly are gated).
/// Lock-free: only the caller that moves the next-allowed timestamp with a compare-exchange logs.
/// </summary>
internal sealed class WarningGate
{
    private long _next;
    private long _suppressed;

    /// <summary>Whether a warning may be logged now; if so, <paramref name="suppressed"/> is how many were held back before it.</summary>
    public bool TryPass(out long suppressed)
    {
        var now = Stopwatch.GetTimestamp();
        var next = Volatile.Read(ref _next);
        if (now < next || Interlocked.CompareExchange(ref _next, now + Stopwatch.Frequency, next) != next)
        {
            Interlocked.Increment(ref _suppressed);
            suppressed = 0;
            return false;
        }
        suppressed = Interlocked.Exchange(ref _suppressed, 0);
        return true;
    }
}
