using System.Collections.Concurrent;
using Microsoft.Extensions.Logging;

namespace FaaST.Membership;

/// <summary>
/// Runs a membership round (a heartbeat, a listing) every interval of an injected <see cref="TimeProvider"/> until
/// stopped; a failure is logged with its exception and retried after a backoff, never ending the loop.
/// </summary>
internal sealed class Rounds(TimeProvider time, ILogger logger, TimeSpan interval, string reader, string app, Func<int> viewCount)
{
    private const int MaxBackoffIntervals = 2; // short, so that a peer is back before observers' grace runs out

    // Loop name -> when (UTC ticks of the TimeProvider) its pending wait ends; absent while the loop works.
    private readonly ConcurrentDictionary<string, long> _armed = new(StringComparer.Ordinal);

    /// <summary>
    /// True when <paramref name="loops"/> loops are waiting for a round that is still in the future: a test driving a
    /// fake clock advances it only then, so that every loop sees every step.
    /// </summary>
    public bool AllWaiting(int loops)
    {
        var now = time.GetUtcNow().UtcTicks;
        return _armed.Count == loops && _armed.Values.All(due => due > now);
    }

    /// <summary>Test hook: while true the loops skip their rounds, like a stalled process.</summary>
    public bool Frozen { get; set; }

    /// <summary>
    /// Repeats <paramref name="round"/>. With <paramref name="yieldWhenSlow"/>, a round that took longer than the
    /// interval (storage overloaded) is followed by a pause as long, so that listings do not crowd out heartbeats.
    /// </summary>
    public async Task RepeatAsync(string what, Func<CancellationToken, Task> round, bool yieldWhenSlow, CancellationToken ct)
    {
        var failures = 0;
        var spent = TimeSpan.Zero;
        while (true)
        {
            // ±10 % jitter keeps many instances started together from hitting storage in lockstep.
            var delay = failures > 0
                ? interval * Math.Min(1 << (failures - 1), MaxBackoffIntervals)
                : yieldWhenSlow && spent > interval
                    ? spent
                    : (interval * (0.9 + (0.2 * Random.Shared.NextDouble()))) - spent;
            delay = delay > TimeSpan.Zero ? delay : TimeSpan.Zero;
            _armed[what] = (time.GetUtcNow() + delay).UtcTicks;
            try
            {
                await Task.Delay(delay, time, ct).ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
                return;
            }
            finally
            {
                _armed.TryRemove(what, out _);
            }

            if (Frozen)
            {
                continue;
            }

            var started = time.GetTimestamp();
            try
            {
                await round(ct).ConfigureAwait(false);
                if (failures > 0)
                {
                    Log.WorksAgain(logger, what, reader, failures);
                }

                failures = 0;
            }
            catch (OperationCanceledException) when (ct.IsCancellationRequested)
            {
                return;
            }
            catch (Exception ex)
            {
                // Never end the loop: keep the last view and try again later.
                failures++;
                Log.RoundFailed(logger, ex, what, reader, app, failures, viewCount());
            }

            spent = time.GetElapsedTime(started);
        }
    }
}
