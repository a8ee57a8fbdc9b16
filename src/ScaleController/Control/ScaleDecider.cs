using System.Globalization;
using FaaST.Policy;

namespace FaaST.ScaleController.Control;

/// <summary>
/// One app's scaling decisions (Faa$T §4; the band and hysteresis after Pocket §4): pure logic over the
/// round's votes, the frontend's load and a <see cref="TimeProvider"/>. In order:
/// <list type="number">
/// <item>keep-alive: no invocation for <c>scale.keepAlive</c> (and none in flight or queued) unloads the app;</item>
/// <item>bounds: below <c>minInstances</c> (an instance died) the count is restored at once, above
/// <c>maxInstances</c> (a redeploy lowered it) it is cut at once;</item>
/// <item>an unrequested request (<see cref="RequestImmediate"/>) that could not act at once acts now;</item>
/// <item>the conflict rule (<see cref="VoteCombiner"/>): out no sooner than <c>scaleOutCooldown</c> after the
/// previous change; in only after <c>scaleInRounds</c> consecutive all-in rounds and <c>scaleInCooldown</c>
/// after the previous change, by one instance.</item>
/// </list>
/// Not thread-safe: the app's <see cref="ScaleLoop"/> serialises its calls.
/// </summary>
public sealed class ScaleDecider
{
    private readonly ScalePolicy _policy;
    private readonly TimeProvider _time;
    private DateTimeOffset? _lastChange;
    private DateTimeOffset? _lastImmediate;
    private int _allInRounds;
    private int _lastSeen = -1;
    private int _pendingTarget;
    private string? _pendingReason;

    public ScaleDecider(string app, ScalePolicy policy, TimeProvider time)
    {
        ArgumentException.ThrowIfNullOrEmpty(app);
        ArgumentNullException.ThrowIfNull(policy);
        ArgumentNullException.ThrowIfNull(time);
        App = app;
        _policy = policy;
        _time = time;
    }

    public string App { get; }

    /// <summary>Consecutive rounds so far in which every policy of every instance said in.</summary>
    public int AllInRounds => _allInRounds;

    /// <summary>
    /// One round: what to do with <paramref name="current"/> instances given the votes of the ready ones,
    /// the frontend's load and the time of the last invocation; <paramref name="starting"/> of the
    /// <paramref name="current"/> instances are still starting. <paramref name="unloadAt"/>: when the idle app is unloaded
    /// (the reload schedule's keep-alive); null: <c>scale.keepAlive</c> after <paramref name="lastInvocation"/>.
    /// </summary>
    public ScaleDecision Decide(int current, IReadOnlyList<InstanceVote> votes, FrontendLoad load, DateTimeOffset lastInvocation, int starting = 0,
        (DateTimeOffset At, string Why)? unloadAt = null)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(current);
        ArgumentNullException.ThrowIfNull(votes);
        ArgumentNullException.ThrowIfNull(load);
        var now = _time.GetUtcNow();
        // A load from zero (the frontend's cold start) is a change too: its cool-downs start now.
        if (_lastSeen == 0 && current > 0)
            _lastChange = now;
        _lastSeen = current;

        if (current == 0)
        {
            _allInRounds = 0;
            return Hold(0, "unloaded; the next invocation loads the app", ScaleDimension.None, now);
        }
        var idle = now - lastInvocation;
        var (unloadDue, unloadWhy) = unloadAt is { } u ? (now >= u.At, u.Why) : (idle >= _policy.KeepAlive, F($"keepAlive {Seconds(_policy.KeepAlive)}"));
        if (unloadDue && load.InFlight == 0 && load.Queued == 0)
        {
            _allInRounds = 0;
            _pendingTarget = 0;
            _pendingReason = null;
            return Change(0, current, ScaleDecisionKind.Unload,
                F($"no invocation for {Seconds(idle)} ({unloadWhy})"), ScaleDimension.KeepAlive, now);
        }
        if (current < _policy.MinInstances)
        {
            _allInRounds = 0;
            return Change(_policy.MinInstances, current, ScaleDecisionKind.Out,
                F($"{current} instance(s), below minInstances {_policy.MinInstances}"), ScaleDimension.Bounds, now);
        }
        if (current > _policy.MaxInstances)
        {
            _allInRounds = 0;
            return Change(_policy.MaxInstances, current, ScaleDecisionKind.In,
                F($"{current} instance(s), above maxInstances {_policy.MaxInstances}"), ScaleDimension.Bounds, now);
        }
        if (_pendingReason is not null)
        {
            if (_pendingTarget <= current)
            {
                _pendingReason = null;
            }
            else if (!InImmediateCooldown(now))
            {
                var (target, reason) = (_pendingTarget, _pendingReason);
                _pendingReason = null;
                _allInRounds = 0;
                _lastImmediate = now;
                return Change(target, current, ScaleDecisionKind.Out, reason, ScaleDimension.Unrequested, now);
            }
        }

        if (load.Queued > 0 && votes.Count == 0 && starting > 0)
        {
            // The queue's rule adds an instance only when none is on its way: a replacement for an instance that died
            // (or the next of a scale-out) is starting, and the queued invocations go to it as soon as it is ready. Before
            // this rule a replacement on a busy machine came with one instance more, drained again ~35 s later.
            _allInRounds = 0;
            return Hold(current, F($"frontend: {load.Queued} invocation(s) queued with no ready instance; {starting} instance(s) starting, the queue waits for them"),
                ScaleDimension.FrontendQueue, now);
        }
        var combined = VoteCombiner.Combine(votes, _policy.Votes, load);
        if (combined.Delta > 0)
        {
            _allInRounds = 0;
            var target = Math.Min(current + combined.Delta, _policy.MaxInstances);
            if (target == current)
                return Hold(current, F($"at maxInstances {_policy.MaxInstances}; {combined.Reason}"), ScaleDimension.Bounds, now);
            if (_lastChange is { } last && now - last < _policy.ScaleOutCooldown)
            {
                return Hold(current, F($"out by {combined.Delta} wanted, scale-out cool-down for {Seconds(_policy.ScaleOutCooldown - (now - last))} more; {combined.Reason}"), combined.Dimension, now);
            }
            return Change(target, current, ScaleDecisionKind.Out, combined.Reason, combined.Dimension, now);
        }
        if (combined.Delta < 0)
        {
            _allInRounds++;
            if (_allInRounds < _policy.ScaleInRounds)
                return Hold(current, F($"all-in round {_allInRounds} of {_policy.ScaleInRounds}; {combined.Reason}"), combined.Dimension, now);
            if (current <= _policy.MinInstances)
                return Hold(current, F($"at minInstances {_policy.MinInstances}; {combined.Reason}"), ScaleDimension.Bounds, now);
            if (_lastChange is { } last && now - last < _policy.ScaleInCooldown)
            {
                return Hold(current, F($"in wanted, scale-in cool-down for {Seconds(_policy.ScaleInCooldown - (now - last))} more; {combined.Reason}"), combined.Dimension, now);
            }
            _allInRounds = 0;
            return Change(current - 1, current, ScaleDecisionKind.In, combined.Reason, combined.Dimension, now);
        }
        _allInRounds = 0;
        return Hold(current, combined.Reason, combined.Dimension, now);
    }

    /// <summary>
    /// An unrequested vote (an instance needs <paramref name="target"/> instances now, e.g. a bandwidth
    /// scale-out of a large object). The target is cut to <c>maxInstances</c>. It acts at once (an
    /// <see cref="ScaleDecisionKind.Out"/> decision), without waiting for the scale-out cool-down of a
    /// vote-driven change; but two unrequested scale-outs are at least <c>scaleOutCooldown</c> apart: a
    /// storm of requests within it collapses into one decision for the largest target, taken by the first
    /// <see cref="Decide"/> after the cool-down. The answer's <see cref="ScaleDecision.Target"/> is how
    /// many instances the app will have.
    /// </summary>
    public ScaleDecision RequestImmediate(int current, int target, string reason)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(current);
        ArgumentOutOfRangeException.ThrowIfLessThan(target, 1);
        ArgumentNullException.ThrowIfNull(reason);
        var now = _time.GetUtcNow();
        var granted = Math.Clamp(target, _policy.MinInstances, _policy.MaxInstances);
        var cut = granted < target ? F($" (cut from {target} to maxInstances {_policy.MaxInstances})") : "";
        var promised = Math.Max(current, _pendingReason is null ? 0 : _pendingTarget);
        if (granted <= promised)
            return Hold(promised, F($"unrequested {granted}{cut} already met: {promised} instance(s) ({reason})"), ScaleDimension.Unrequested, now);
        if (current == 0)
        {
            // Unloaded: loading is the frontend's cold start; remember the target for the first round after it.
            SetPending(granted, reason, cut);
            return Hold(granted, F($"unloaded; {granted} instance(s) once the app is loaded ({reason})"), ScaleDimension.Unrequested, now);
        }
        if (InImmediateCooldown(now))
        {
            SetPending(granted, reason, cut);
            return Hold(granted, F($"unrequested {granted}{cut} collapsed into the next decision after the scale-out cool-down ({reason})"), ScaleDimension.Unrequested, now);
        }
        _pendingReason = null;
        _allInRounds = 0;
        _lastImmediate = now;
        _lastSeen = current;
        return Change(granted, current, ScaleDecisionKind.Out, F($"unrequested: {reason}{cut}"), ScaleDimension.Unrequested, now);
    }

    private void SetPending(int granted, string reason, string cut)
    {
        if (_pendingReason is null || granted > _pendingTarget)
        {
            _pendingTarget = granted;
            _pendingReason = F($"unrequested: {reason}{cut}");
        }
    }

    private bool InImmediateCooldown(DateTimeOffset now) =>
        _lastImmediate is { } last && now - last < _policy.ScaleOutCooldown;

    private ScaleDecision Change(int target, int current, ScaleDecisionKind kind, string reason, string dimension, DateTimeOffset now)
    {
        _lastChange = now;
        _lastSeen = target;
        return new ScaleDecision(target, target - current, reason, kind, now, dimension);
    }

    private static ScaleDecision Hold(int current, string reason, string dimension, DateTimeOffset now) =>
        new(current, 0, reason, ScaleDecisionKind.Hold, now, dimension);

    private static string Seconds(TimeSpan t) => t.TotalSeconds.ToString("0.###", CultureInfo.InvariantCulture) + " s";

    private static string F(FormattableString s) => s.ToString(CultureInfo.InvariantCulture);
}
