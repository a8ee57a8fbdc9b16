namespace FaaST.ScaleController;

/// <summary>
/// A line of a kind passes at most once per interval of the loop's clock; the ones held back are counted
/// and reported with the next that passes (like the cachelet's LogGate, on a <see cref="TimeProvider"/> so a
/// fake clock drives it in tests). The platform's one gate: an instance that stops answering a vote query, a
/// backend failing every forwarded request, a KEDA client sending bad metadata would otherwise flood the log
/// (CONTRIBUTING: warnings a request can cause repeatedly are gated). Lock-free: only the caller that moves the
/// next-allowed time with a compare-exchange logs.
/// </summary>
internal sealed class RateGate(TimeProvider time, TimeSpan interval)
{
    private long _next = long.MinValue;
    private long _suppressed;

    public bool TryPass(out long suppressed)
    {
        var now = time.GetUtcNow().UtcTicks;
        var next = Volatile.Read(ref _next);
        if (now < next || Interlocked.CompareExchange(ref _next, now + interval.Ticks, next) != next)
        {
            Interlocked.Increment(ref _suppressed);
            suppressed = 0;
            return false;
        }
        suppressed = Interlocked.Exchange(ref _suppressed, 0);
        return true;
    }
}
