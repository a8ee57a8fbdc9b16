using System.Collections.Concurrent;

namespace FaaST.Cachelet.Sources;

/// <summary>
/// One fetch per key at a time: the first reader of a key starts the fetch, later ones join it.
/// The fetch runs under the owner's lifetime token (never a reader's: a reader that gives up must
/// not fail the others); each reader stops waiting on its own token. A result whose starter left
/// is handed to <c>release</c> when it arrives.
/// </summary>
internal sealed class SingleFlight<TKey, TValue>(CancellationToken lifetime, Action<TKey, TValue> release, Action<TKey, Exception> releaseFailed)
    where TKey : notnull
{
    private readonly ConcurrentDictionary<TKey, Lazy<Task<TValue>>> _flights = new();

    /// <summary>Fetches in flight (tests, diagnostics).</summary>
    public int Count => _flights.Count;

    /// <summary>
    /// Starts <paramref name="fetch"/> (with the lifetime token) or joins the one running for
    /// <paramref name="key"/>. Returns the result, the flight (to <see cref="Forget"/> it if its
    /// result cannot be used) and whether this caller started it.
    /// </summary>
    public async Task<(TValue Result, Lazy<Task<TValue>> Flight, bool Mine)> JoinAsync(TKey key, Func<CancellationToken, Task<TValue>> fetch, CancellationToken ct)
    {
        var mine = new Lazy<Task<TValue>>(() => fetch(lifetime));
        var flight = _flights.GetOrAdd(key, mine);
        var ours = ReferenceEquals(flight, mine);
        TValue result;
        try
        {
            result = await flight.Value.WaitAsync(ct);
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested && ours)
        {
            _ = ReleaseAbandonedAsync(key, mine);
            throw;
        }
        catch (Exception) when (ours)
        {
            Forget(key, flight);
            throw;
        }
        if (ours)
            Forget(key, flight);
        return (result, flight, ours);
    }

    /// <summary>Drops a finished flight from the table (the next reader of the key starts a new one).</summary>
    public void Forget(TKey key, Lazy<Task<TValue>> flight) => _flights.TryRemove(new KeyValuePair<TKey, Lazy<Task<TValue>>>(key, flight));

    private async Task ReleaseAbandonedAsync(TKey key, Lazy<Task<TValue>> flight)
    {
        try
        {
            release(key, await flight.Value);
        }
        catch (Exception e)
        {
            releaseFailed(key, e);
        }
        finally
        {
            Forget(key, flight);
        }
    }
}
