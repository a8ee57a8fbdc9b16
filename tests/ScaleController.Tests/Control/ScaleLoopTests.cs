using FaaST.Policy;
using FaaST.ScaleController.Control;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Time.Testing;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>The loop of one app: asks every ready instance, decides, acts through the platform, records what
/// it saw; a fake clock, a fake vote client and a fake platform.</summary>
public sealed class ScaleLoopTests
{
    private readonly FakeTimeProvider _time = new(Votes.At);
    private readonly FakeVoteClient _votes = new();
    private readonly FakeTarget _target;
    private readonly ListLogger _log = new(LogLevel.Information);
    private readonly ScaleLoop _loop;

    public ScaleLoopTests()
    {
        _target = new FakeTarget("app", _time);
        _loop = new ScaleLoop(_target, ScalePolicy.Default with { ScaleInRounds = 2, ScaleInCooldown = TimeSpan.Zero }, _votes, _time, _log);
    }

    [Fact]
    public async Task A_round_asks_every_ready_instance_with_the_app_and_its_count()
    {
        _target.CurrentInstances = 3;

        await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(3, _votes.Queries.Count);
        Assert.All(_votes.Queries, q => Assert.Equal(new VoteQuery("app", 3, 0), q));
    }

    private sealed class MeasuredTarget(TimeProvider time) : IScaleTarget, FaaST.Scaling.IInstanceLoadTime
    {
        private readonly FakeTarget _inner = new("app", time);
        public string App => _inner.App;
        public int CurrentInstances => _inner.CurrentInstances;
        public int StartingInstances => _inner.StartingInstances;
        public IReadOnlyList<VoteEndpoint> ReadyInstances => _inner.ReadyInstances;
        public FrontendLoad Load() => _inner.Load();
        public DateTimeOffset LastInvocation => _inner.LastInvocation;
        public Task ScaleToAsync(int target, string reason, CancellationToken ct) => _inner.ScaleToAsync(target, reason, ct);
        public Task UnloadAsync(string reason, CancellationToken ct) => _inner.UnloadAsync(reason, ct);
        public TimeSpan? InstanceLoadTime => TimeSpan.FromSeconds(2.5);
    }

    [Fact]
    public async Task A_platform_that_measures_instance_load_time_has_it_sent_with_every_query()
    {
        var loop = new ScaleLoop(new MeasuredTarget(_time), ScalePolicy.Default, _votes, _time, _log);

        await loop.RoundAsync(CancellationToken.None);

        Assert.Equal(new VoteQuery("app", 1, 2.5), Assert.Single(_votes.Queries));
    }

    [Fact]
    public async Task An_out_vote_scales_the_platform_out_and_is_recorded()
    {
        _target.CurrentInstances = 2;
        _votes.Answer("i1", _ => Votes.Instance("i1", (PolicyNames.Compute, 2)));

        var decision = await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(4, _target.CurrentInstances);
        Assert.Equal(["scale to 4: instance i1 compute votes +2: compute 2"], _target.Actions);
        var snapshot = _loop.Snapshot();
        Assert.Equal([decision], snapshot.Decisions);
        Assert.Equal(["i0", "i1"], snapshot.LastVotes.Select(v => v.InstanceId));
        Assert.Equal("compute 2", snapshot.LastVotes[1].Votes[0].Reason);
        Assert.True(_log.Contains("App app: scale Out from 2 to 4 instance(s)"));
    }

    [Fact]
    public async Task All_in_for_the_scale_in_rounds_drains_one_instance()
    {
        _target.CurrentInstances = 3;
        _votes.DefaultDelta = -1;

        var first = await _loop.RoundAsync(CancellationToken.None);
        var second = await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(ScaleDecisionKind.Hold, first.Kind);
        Assert.Equal(ScaleDecisionKind.In, second.Kind);
        Assert.Equal(2, _target.CurrentInstances);
    }

    [Fact]
    public async Task A_hold_is_the_last_round_but_not_a_recorded_decision()
    {
        var decision = await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Equal(decision, _loop.Snapshot().LastRound);
        Assert.Empty(_loop.Snapshot().Decisions);
        Assert.Empty(_target.Actions);
    }

    [Fact]
    public async Task An_instance_that_does_not_answer_within_the_deadline_counts_as_no_answer_and_blocks_an_in()
    {
        _target.CurrentInstances = 2;
        _votes.DefaultDelta = -1;
        _votes.Hanging.Add("i1");

        var round = _loop.RoundAsync(CancellationToken.None);
        Assert.False(round.IsCompleted);
        _time.Advance(ScaleLoopOptions.Default.VoteDeadline);
        var decision = await round;

        Assert.Equal(0, decision.Delta);
        var silent = _loop.Snapshot().LastVotes.Single(v => v.InstanceId == "i1");
        Assert.False(silent.Answered);
        Assert.Equal("no answer: no reply within 500 ms", silent.Error);
        Assert.Contains("instance i1: no answer", decision.Reason);
    }

    [Fact]
    public async Task A_replacement_that_is_still_starting_is_waited_for_by_the_queue_not_doubled()
    {
        // The one instance died; its replacement is starting and invocations queue for it.
        _target.CurrentInstances = 1;
        _target.StartingInstances = 1;
        _target.CurrentLoad = FrontendLoad.Idle with { Queued = 5 };

        var waiting = await _loop.RoundAsync(CancellationToken.None);
        _time.Advance(TimeSpan.FromSeconds(1));
        _target.StartingInstances = 0; // ready: the queue went to it
        _target.CurrentLoad = FrontendLoad.Idle with { RequestsPerSecond = 5 };
        await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(ScaleDecisionKind.Hold, waiting.Kind);
        Assert.Contains("1 instance(s) starting", waiting.Reason);
        Assert.Empty(_target.Actions);
        Assert.Equal(1, _target.CurrentInstances);
    }

    [Fact]
    public async Task No_answer_warnings_pass_at_most_once_a_second_and_count_the_ones_held_back()
    {
        _target.CurrentInstances = 1;
        _votes.Answer("i0", _ => throw new InvalidOperationException("connection refused"));

        for (var i = 0; i < 3; i++)
            await _loop.RoundAsync(CancellationToken.None);
        _time.Advance(TimeSpan.FromSeconds(1));
        await _loop.RoundAsync(CancellationToken.None);

        var warnings = _log.Entries.Where(e => e.EventId == 8101).Select(e => e.Text).ToArray();
        Assert.Equal(2, warnings.Length);
        Assert.Contains("connection refused", warnings[0]);
        Assert.Contains("2 more held back", warnings[1]);
    }

    [Fact]
    public async Task The_keep_alive_unloads_through_the_platform()
    {
        _target.CurrentInstances = 2;
        _target.LastInvocationAt = _time.GetUtcNow();
        _time.Advance(ScalePolicy.Default.KeepAlive);

        var decision = await _loop.RoundAsync(CancellationToken.None);

        Assert.Equal(ScaleDecisionKind.Unload, decision.Kind);
        Assert.Equal(0, _target.CurrentInstances);
        Assert.StartsWith("unload: no invocation for 600 s", Assert.Single(_target.Actions));
    }

    [Fact]
    public async Task An_unrequested_request_scales_out_at_once_and_answers_the_granted_count()
    {
        _target.CurrentInstances = 1;

        var decision = await _loop.RequestImmediateAsync(4, "instance i0 bandwidth: 800 MB", CancellationToken.None);

        Assert.Equal(4, decision.Target);
        Assert.Equal(4, _target.CurrentInstances);
        Assert.Equal([decision], _loop.Snapshot().Decisions);
    }

    [Fact]
    public async Task A_failed_action_is_logged_and_the_next_round_decides_again()
    {
        _target.CurrentInstances = 1;
        _votes.DefaultDelta = 1;
        _target.FailNext = new IOException("no port free");

        await _loop.RoundAsync(CancellationToken.None);
        _time.Advance(ScalePolicy.Default.ScaleOutCooldown);
        await _loop.RoundAsync(CancellationToken.None);

        Assert.Contains(_log.Entries, e => e.EventId == 8102);
        Assert.Equal(2, _target.CurrentInstances);
    }

    [Fact]
    public async Task The_decision_history_keeps_only_the_last_ones()
    {
        var loop = new ScaleLoop(_target, ScalePolicy.Default with { ScaleOutCooldown = TimeSpan.Zero, MaxInstances = 64 }, _votes, _time, _log,
            new ScaleLoopOptions { DecisionHistory = 3 });
        _votes.DefaultDelta = 1;

        for (var i = 0; i < 5; i++)
            await loop.RoundAsync(CancellationToken.None);

        Assert.Equal([4, 5, 6], loop.Snapshot().Decisions.Select(d => d.Target));
    }

    [Fact]
    public async Task Run_asks_once_per_interval_of_the_clock()
    {
        using var stop = new CancellationTokenSource();
        var run = _loop.RunAsync(stop.Token);

        for (var i = 0; i < 3; i++)
        {
            var before = _votes.Queries.Count;
            _time.Advance(ScalePolicy.Default.Interval);
            await Eventually.TrueAsync(() => _votes.Queries.Count == before + 1, $"round {i + 1} asked the instance");
        }
        await stop.CancelAsync();
        await run;

        Assert.Equal(3, _votes.Queries.Count);
    }
}
