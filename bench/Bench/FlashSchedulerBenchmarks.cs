using BenchmarkDotNet.Attributes;
using FaaST.Bench.Flash;

namespace FaaST.Bench;

/// <summary>
/// The flash tier's scheduling cost (issue 22 item 4: under 1 µs per request at 1,000 tenants): ns per request
/// (enqueue + dispatch + completion, and the driving loop's few ns) for En4S, the ReFlex-style baseline and FCFS, with
/// Fig. 10's 1,000 tenants offering 0.9× (in capacity) and 2× (overloaded) the device's 200K tokens/s on virtual time
/// (see <see cref="SchedulerLoad"/>). One operation = one completed request; an invocation completes
/// <see cref="PerInvoke"/> of them, the scheduler's state carried over, so the overloaded runs measure the steady backlog.
/// </summary>
[MemoryDiagnoser]
public class FlashSchedulerBenchmarks
{
    public const int PerInvoke = 65_536;

    private SchedulerLoad _load = null!;

    [Params("en4s", "reflex", "fcfs")]
    public string Scheduler { get; set; } = "en4s";

    [Params(0.9, 2.0)]
    public double Load { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        _load = new SchedulerLoad(Scheduler, Load);
        _load.RunUntilCompleted(4 * PerInvoke); // past the first admission and the ramp to a steady backlog
    }

    [Benchmark(OperationsPerInvoke = PerInvoke)]
    public long Requests1000Tenants() => _load.RunUntilCompleted(PerInvoke);
}
