
namespace FaaST.Runtime.Workers;

/// <summary>What a scheduler sees of one worker of the pool.</summary>
public interface IWorkerLoad
{
    /// <summary>Specialised, connected and taking invocations.</summary>
    bool IsReady { get; }

    /// <summary>Invocations sent to it and not yet answered.</summary>
    int InFlight { get; }
}

/// <summary>
/// Picks the worker an invocation runs on (the seam where a scale controller or prewarm policy
/// plugs in). Called on every invocation, concurrently: no locks, no allocation.
/// </summary>
public interface IWorkerScheduler
{
    /// <returns>The index in <paramref name="workers"/> of a ready worker, or -1 when none is ready
    /// (the pool then waits for one).</returns>
    int Pick(IReadOnlyList<IWorkerLoad> workers, FunctionDefinition function);
}

/// <summary>
/// The default policy: the ready worker with the fewest invocations in flight. Ties go to the first
/// found from a start that rotates with every pick, so that at low load (everyone at 0) the
/// invocations still spread over all workers instead of piling onto the first.
/// </summary>
public sealed class FewestInFlightScheduler : IWorkerScheduler
{
    private int _next;

    public int Pick(IReadOnlyList<IWorkerLoad> workers, FunctionDefinition function)
    {
        var count = workers.Count;
        if (count == 0)
            return -1;
        var start = (int)((uint)Interlocked.Increment(ref _next) % (uint)count);
        var best = -1;
        var bestLoad = int.MaxValue;
        for (var i = 0; i < count; i++)
        {
            var index = start + i < count ? start + i : start + i - count;
            var worker = workers[index];
            if (worker.IsReady && worker.InFlight < bestLoad)
                (best, bestLoad) = (index, worker.InFlight);
        }
        return best;
    }
}
