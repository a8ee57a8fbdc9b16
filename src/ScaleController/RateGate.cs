namespace FaaST.ScaleController;

/// <summary>
/// A line of a kind passes at most once per interval of the loop's clock; the ones held back are counted
/// and reported with the next that passes: the cachelet's <see cref="LogGate"/>, read on a
/// <see cref="TimeProvider"/> so a fake clock drives it in tests. The platform's one gate: an instance that
/// stops answering a vote query, a backend failing every forwarded request, a KEDA client sending bad
/// metadata would otherwise flood the log (CONTRIBUTING: warnings a request can cause repeatedly are gated).
/// </summary>
internal sealed class RateGate(TimeProvider time, TimeSpan interval)
{
    private readonly LogGate _gate = new(Math.Max(1, (long)(interval.TotalSeconds * time.TimestampFrequency)));

    public bool TryPass(out long suppressed) => _gate.TryPass(time.GetTimestamp(), out suppressed);
}
