namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// One storage request as the scheduler and the device model see it: a plain struct so queues hold it inline (no
/// per-request allocation on the hot path). <see cref="Cost"/> is filled in by the scheduler at enqueue time from the
/// cost model; <see cref="ArrivalNs"/> is virtual (or, in the server, monotonic) time in nanoseconds.
/// </summary>
public struct IoRequest
{
    public long Id;
    public int Tenant;
    public int Flow;
    public IoType Type;
    public int SizeBytes;
    public double Cost;
    public long ArrivalNs;

    public IoRequest(long id, int tenant, IoType type, int sizeBytes, long arrivalNs, int flow = 0)
    {
        Id = id;
        Tenant = tenant;
        Flow = flow;
        Type = type;
        SizeBytes = sizeBytes;
        Cost = 0;
        ArrivalNs = arrivalNs;
    }
}

/// <summary>A request the device finished: when it was submitted and when it completed, in virtual nanoseconds.</summary>
public readonly record struct DeviceCompletion(IoRequest Request, long SubmitNs, long CompleteNs)
{
    /// <summary>End-to-end latency as the tenant sees it: from arrival at the scheduler to completion.</summary>
    public long LatencyNs => CompleteNs - Request.ArrivalNs;
}

/// <summary>
/// A small seeded generator (SplitMix64) so the device model's latencies depend on the seed alone — not on the .NET
/// version's System.Random algorithm — and the same seed gives the same run on every machine.
/// </summary>
public struct SeededRng
{
    private ulong _state;

    public SeededRng(ulong seed) => _state = seed;

    public ulong NextULong()
    {
        ulong z = _state += 0x9E3779B97F4A7C15UL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
        return z ^ (z >> 31);
    }

    /// <summary>Uniform in [0, 1).</summary>
    public double NextDouble() => (NextULong() >> 11) * (1.0 / (1UL << 53));

    /// <summary>Standard normal (Box–Muller; one of the pair is discarded to keep the state a single word).</summary>
    public double NextGaussian()
    {
        double u1 = 1.0 - NextDouble();
        double u2 = NextDouble();
        return Math.Sqrt(-2.0 * Math.Log(u1)) * Math.Cos(2.0 * Math.PI * u2);
    }

    /// <summary>Exponential with the given mean.</summary>
    public double NextExponential(double mean) => -mean * Math.Log(1.0 - NextDouble());
}
