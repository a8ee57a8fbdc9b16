using System.Collections.Immutable;
using FaaST.Policy;
using FaaST.Peers;

namespace FaaST.ScaleController.Control;

/// <summary>The loop's settings beyond the app's <c>scale</c> policy, with their defaults.</summary>
public sealed record ScaleLoopOptions
{
    public static ScaleLoopOptions Default { get; } = new();

    /// <summary>How long one instance may take to answer a vote query, default 0.5 s (never more than the
    /// policy's interval): a slower instance counts as a 0 vote with reason "no answer".</summary>
    public TimeSpan VoteDeadline { get; init; } = TimeSpan.FromMilliseconds(500);

    /// <summary>How many changing decisions the snapshot keeps, default 32.</summary>
    public int DecisionHistory { get; init; } = 32;

    /// <summary>The app's peer credentials: when set, <see cref="ScaleControlService"/> accepts an
    /// unrequested scale-out only signed with them (as a peer call); null accepts any caller.</summary>
    public PeerAuth? RequestCredentials { get; init; }
}

/// <summary>What the loop of one app saw and did last, for <c>/admin/platform</c> (immutable).</summary>
/// <param name="App">The app.</param>
/// <param name="LastVotes">The last round's vote of each ready instance, with reasons.</param>
/// <param name="LastRound">The last round's decision (a hold too), or null before the first round.</param>
/// <param name="Decisions">The last changing decisions, oldest first.</param>
public sealed record ScaleLoopSnapshot(string App, IReadOnlyList<InstanceVote> LastVotes, ScaleDecision? LastRound, IReadOnlyList<ScaleDecision> Decisions);

/// <summary>
/// One app's controller (Faa$T §4): every <c>scale.interval</c> it asks every ready instance for its vote
/// (in parallel, each within <see cref="ScaleLoopOptions.VoteDeadline"/>), decides with the app's
/// <see cref="ScaleDecider"/>, and acts through the platform's <see cref="IScaleTarget"/>. Rounds and
/// unrequested requests of one app are serialised by the app's own lock (no lock is shared between apps).
/// </summary>
public sealed class ScaleLoop
{
    private readonly IScaleTarget _target;
    private readonly IVoteClient _votes;
    private readonly ScalePolicy _policy;
    private readonly ScaleLoopOptions _options;
    private readonly TimeProvider _time;
    private readonly ILogger _logger;
    private readonly ScaleDecider _decider;
    private readonly SemaphoreSlim _gate = new(1, 1);
    private readonly RateGate _noVoteGate;
    private volatile ScaleLoopSnapshot _snapshot;

    public ScaleLoop(IScaleTarget target, ScalePolicy policy, IVoteClient votes, TimeProvider time, ILogger logger, ScaleLoopOptions? options = null)
    {
        ArgumentNullException.ThrowIfNull(target);
        ArgumentNullException.ThrowIfNull(policy);
        ArgumentNullException.ThrowIfNull(votes);
        ArgumentNullException.ThrowIfNull(time);
        ArgumentNullException.ThrowIfNull(logger);
        _target = target;
        _policy = policy;
        _votes = votes;
        _time = time;
        _logger = logger;
        _options = options ?? ScaleLoopOptions.Default;
        ArgumentOutOfRangeException.ThrowIfLessThan(_options.DecisionHistory, 1);
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(_options.VoteDeadline, TimeSpan.Zero);
        _decider = new ScaleDecider(target.App, policy, time);
        _noVoteGate = new RateGate(time, TimeSpan.FromSeconds(1));
        _snapshot = new ScaleLoopSnapshot(target.App, [], null, []);
    }

    public string App => _target.App;

    public ScalePolicy Policy => _policy;

    /// <summary>The credentials an unrequested request must carry, if any (<see cref="ScaleLoopOptions.RequestCredentials"/>).</summary>
    public PeerAuth? RequestCredentials => _options.RequestCredentials;

    /// <summary>The last votes and decisions.</summary>
    public ScaleLoopSnapshot Snapshot() => _snapshot;

    private TimeSpan Deadline => _options.VoteDeadline < _policy.Interval ? _options.VoteDeadline : _policy.Interval;

    /// <summary>Runs a round every interval until <paramref name="ct"/> is cancelled; a failed round is
    /// logged and the next one runs.</summary>
    public async Task RunAsync(CancellationToken ct)
    {
        Log.Started(_logger, App, _policy.Interval);
        using var timer = new PeriodicTimer(_policy.Interval, _time);
        try
        {
            while (await timer.WaitForNextTickAsync(ct))
            {
                try
                {
                    await RoundAsync(ct);
                }
                catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
                {
                    Log.RoundFailed(_logger, e, App);
                }
            }
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested)
        {
        }
        Log.Stopped(_logger, App);
    }

    /// <summary>One round: ask every ready instance, decide, act. Returns the decision.</summary>
    public async Task<ScaleDecision> RoundAsync(CancellationToken ct)
    {
        var ready = _target.ReadyInstances;
        var current = _target.CurrentInstances;
        // The production client keeps a channel per instance: close those of instances gone since.
        (_votes as GrpcVoteClient)?.RetainOnly(ready);
        var loadSeconds = _target is Scaling.IInstanceLoadTime { InstanceLoadTime: { } load } ? load.TotalSeconds : 0;
        var query = new VoteQuery(App, current, loadSeconds);
        var asks = new Task<InstanceVote>[ready.Count];
        for (var i = 0; i < ready.Count; i++)
            asks[i] = AskAsync(ready[i], query, ct);
        var votes = await Task.WhenAll(asks);

        await _gate.WaitAsync(ct);
        try
        {
            // Read again under the lock: an unrequested scale-out may have changed the count meanwhile.
            current = _target.CurrentInstances;
            var decision = _decider.Decide(current, votes, _target.Load(), _target.LastInvocation, _target.StartingInstances, _target.UnloadAt);
            await ActAsync(decision, current, ct);
            Record(votes, decision);
            return decision;
        }
        finally
        {
            _gate.Release();
        }
    }

    /// <summary>
    /// An unrequested vote (<see cref="ScaleDecider.RequestImmediate"/>): acts at once when the decider says
    /// so. Returns the decision; its <see cref="ScaleDecision.Target"/> is the instance count granted.
    /// </summary>
    public async Task<ScaleDecision> RequestImmediateAsync(int target, string reason, CancellationToken ct)
    {
        await _gate.WaitAsync(ct);
        try
        {
            var current = _target.CurrentInstances;
            var decision = _decider.RequestImmediate(current, target, reason);
            if (decision.Changes)
            {
                await ActAsync(decision, current, ct);
                Record(null, decision);
            }
            return decision;
        }
        finally
        {
            _gate.Release();
        }
    }

    private async Task<InstanceVote> AskAsync(VoteEndpoint instance, VoteQuery query, CancellationToken ct)
    {
        using var deadline = new CancellationTokenSource(Deadline, _time);
        using var linked = CancellationTokenSource.CreateLinkedTokenSource(deadline.Token, ct);
        string why;
        try
        {
            return await _votes.GetVoteAsync(instance, query, linked.Token);
        }
        catch (OperationCanceledException) when (deadline.IsCancellationRequested && !ct.IsCancellationRequested)
        {
            why = string.Create(System.Globalization.CultureInfo.InvariantCulture, $"no reply within {Deadline.TotalMilliseconds:0} ms");
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            why = e.Message;
        }
        if (_noVoteGate.TryPass(out var suppressed))
            Log.NoVote(_logger, App, instance.InstanceId, why, suppressed);
        return InstanceVote.NoAnswer(instance.InstanceId, why, _time.GetUtcNow());
    }

    private async Task ActAsync(ScaleDecision decision, int current, CancellationToken ct)
    {
        if (!decision.Changes)
            return;
        Log.Decided(_logger, App, decision.Kind, current, decision.Target, decision.Reason);
        try
        {
            if (decision.Kind == ScaleDecisionKind.Unload)
                await _target.UnloadAsync(decision.Reason, ct);
            else
                await _target.ScaleToAsync(decision.Target, decision.Reason, ct);
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.ActFailed(_logger, e, App, decision.Kind, decision.Target);
        }
    }

    private void Record(IReadOnlyList<InstanceVote>? votes, ScaleDecision decision)
    {
        var previous = _snapshot;
        var decisions = previous.Decisions;
        if (decision.Changes)
        {
            var list = ImmutableList.CreateRange(decisions).Add(decision);
            if (list.Count > _options.DecisionHistory)
                list = list.RemoveRange(0, list.Count - _options.DecisionHistory);
            decisions = list;
        }
        _snapshot = new ScaleLoopSnapshot(App, votes is null ? previous.LastVotes : ImmutableArray.CreateRange(votes), votes is null ? previous.LastRound : decision, decisions);
    }
}
