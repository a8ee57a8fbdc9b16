using FaaST.Runtime.Workers;

namespace FaaST.Runtime.Scaling;

/// <summary>
/// The compute vote's utilisation for workers that run every function on one event loop (Node): the
/// share of time their loops were busy over the interval between two samples, from the totals the
/// workers report (protos/worker.proto, WorkerLoad).
/// </summary>
/// <remarks>
/// Invocations in flight over slots, the measure for threads (Python's pool), misjudges one loop both
/// ways: a hundred invocations awaiting storage leave it idle, one CPU-bound invocation saturates it.
/// The busy share is what the loop has left. Workers are weighted by the time each reported, so the
/// result is the pool's busy share, not a mean of ratios. A worker seen for the first time (started or
/// restarted since the previous sample) counts from its start, so a new instance's first vote already
/// has a share: a baseline would leave it to slots, the eager measure, right when it starts under load
/// (its start-up work, loading the functions, is busy time too, a few hundred ms). A busy share saturates at 1 where the
/// slot measure keeps growing with the backlog; the vote then asks for instances by the band's ratio
/// (1 / target) at each decision, which the controller's cool-downs pace.
/// Called once per vote (about once a second), so a lock and a small dictionary per call are fine.
/// </remarks>
internal sealed class EventLoopLoad(Func<IReadOnlyList<EventLoopReport>> read, Func<long>? nowMs = null)
{
    private readonly Func<long> _nowMs = nowMs ?? (() => Environment.TickCount64);
    private static readonly EventLoopTotals Zero = new(0, 0);
    private readonly Lock _gate = new();
    private Dictionary<object, EventLoopTotals> _last = new(ReferenceEqualityComparer.Instance);
    private long _lastAt = -1;
    private double? _utilization;

    /// <summary>
    /// The busy share (0..1) of the reporting workers' loops since the previous call; when no report
    /// arrived in between, the previous share; null while no worker reported yet (the caller then uses slots).
    /// </summary>
    /// <remarks>
    /// A stalled worker (<see cref="EventLoopReport.Stalled"/>: one invocation holds its loop, so neither its
    /// report timer nor its next invocation runs) counts as busy for the whole interval. When it reports
    /// again, its difference holds that time once more: the interval after a stall reads busier than it
    /// was, which errs towards capacity.
    /// </remarks>
    public double? TakeSample()
    {
        lock (_gate)
        {
            var now = read();
            var at = _nowMs();
            var elapsed = _lastAt < 0 ? 0 : Math.Max(0, at - _lastAt);
            _lastAt = at;
            if (now.Count == 0)
            {
                _last = new Dictionary<object, EventLoopTotals>(ReferenceEqualityComparer.Instance);
                return _utilization = null;
            }
            double active = 0, total = 0;
            var next = new Dictionary<object, EventLoopTotals>(now.Count, ReferenceEqualityComparer.Instance);
            foreach (var (worker, totals, stalled) in now)
            {
                next[worker] = totals;
                // A worker seen first counts from its start: its totals are since then.
                var before = _last.GetValueOrDefault(worker) ?? Zero;
                var busy = totals.ActiveMs - before.ActiveMs;
                var idle = totals.IdleMs - before.IdleMs;
                if (busy + idle <= 0 && stalled)
                    (busy, idle) = (elapsed, 0);
                active += busy;
                total += busy + idle;
            }
            _last = next;
            if (total > 0)
                _utilization = Math.Clamp(active / total, 0, 1);
            return _utilization;
        }
    }
}
