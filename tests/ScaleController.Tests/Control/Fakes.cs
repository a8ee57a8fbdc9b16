using System.Collections.Concurrent;
using FaaST.ScaleController.Control;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>The platform side of one app for unit tests of the loop: instances are numbers, actions are recorded.</summary>
internal sealed class FakeTarget(string app, TimeProvider time) : IScaleTarget
{
    public string App => app;

    public int CurrentInstances { get; set; } = 1;

    /// <summary>Of <see cref="CurrentInstances"/>, how many are starting (they are not in <see cref="ReadyInstances"/>).</summary>
    public int StartingInstances { get; set; }

    public IReadOnlyList<VoteEndpoint> ReadyInstances =>
        [.. Enumerable.Range(0, CurrentInstances - StartingInstances).Select(i => new VoteEndpoint("i" + i, new Uri($"http://127.0.0.1:{10000 + i}/")))];

    public FrontendLoad CurrentLoad { get; set; } = FrontendLoad.Idle with { RequestsPerSecond = 5 };

    public FrontendLoad Load() => CurrentLoad;

    public DateTimeOffset? LastInvocationAt { get; set; }

    /// <summary>Traffic up to now unless set.</summary>
    public DateTimeOffset LastInvocation => LastInvocationAt ?? time.GetUtcNow();

    public ConcurrentQueue<string> Actions { get; } = new();

    public Exception? FailNext { get; set; }

    public Task ScaleToAsync(int target, string reason, CancellationToken ct)
    {
        if (FailNext is { } e)
        {
            FailNext = null;
            throw e;
        }
        Actions.Enqueue($"scale to {target}: {reason}");
        CurrentInstances = target;
        return Task.CompletedTask;
    }

    public Task UnloadAsync(string reason, CancellationToken ct)
    {
        Actions.Enqueue($"unload: {reason}");
        CurrentInstances = 0;
        return Task.CompletedTask;
    }
}

/// <summary>Answers each instance with the votes set for it; an instance set to hang never answers (until cancelled).</summary>
internal sealed class FakeVoteClient : IVoteClient
{
    private readonly ConcurrentDictionary<string, Func<VoteEndpoint, InstanceVote>> _answers = new();

    public HashSet<string> Hanging { get; } = [];

    public ConcurrentQueue<VoteQuery> Queries { get; } = new();

    /// <summary>What every instance votes on every policy unless set otherwise.</summary>
    public int DefaultDelta { get; set; }

    public void Answer(string instance, Func<VoteEndpoint, InstanceVote> answer) => _answers[instance] = answer;

    public async Task<InstanceVote> GetVoteAsync(VoteEndpoint instance, VoteQuery query, CancellationToken ct)
    {
        Queries.Enqueue(query);
        if (Hanging.Contains(instance.InstanceId))
            await Task.Delay(Timeout.Infinite, ct);
        return _answers.TryGetValue(instance.InstanceId, out var answer) ? answer(instance) : Votes.All(instance.InstanceId, DefaultDelta);
    }
}
