using System.Diagnostics;
using System.Net;

namespace FaaST.Bench;

/// <summary>The latency distribution and throughput of one closed-loop run.</summary>
public sealed record LoadResult(int Concurrency, long Requests, long Errors, double Seconds, double P50Ms, double P99Ms, double MeanMs)
{
    public double Rps => Requests / Seconds;
}

/// <summary>
/// A closed-loop load generator: each of N clients sends a request, waits for the answer, and
/// sends the next. Latencies go into preallocated arrays, so measuring costs little.
/// </summary>
public sealed class LoadGenerator : IDisposable
{
    private readonly HttpClient _client;

    public LoadGenerator(int maxConnections = 64)
    {
        _client = new HttpClient(new SocketsHttpHandler
        {
            MaxConnectionsPerServer = maxConnections,
            UseCookies = false,
            AutomaticDecompression = DecompressionMethods.None,
            PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
        })
        { Timeout = TimeSpan.FromSeconds(60) };
    }

    /// <summary>Runs <paramref name="concurrency"/> loops against <paramref name="url"/>: a warm-up, then the measured window.</summary>
    public async Task<LoadResult> RunAsync(Uri url, int concurrency, TimeSpan warmup, TimeSpan duration, Func<HttpResponseMessage, Task<bool>>? check = null)
    {
        await LoopAsync(url, concurrency, warmup, null, check);
        var perClient = new List<long>[concurrency];
        for (var i = 0; i < concurrency; i++)
            perClient[i] = new List<long>(100_000);
        var sw = Stopwatch.StartNew();
        var errors = await LoopAsync(url, concurrency, duration, perClient, check);
        var seconds = sw.Elapsed.TotalSeconds;
        var all = perClient.SelectMany(l => l).ToArray();
        Array.Sort(all);
        if (all.Length == 0)
            throw new InvalidOperationException($"no request to {url} succeeded ({errors} errors)");
        double Ms(long ticks) => ticks * 1000.0 / Stopwatch.Frequency;
        double Percentile(double p) => Ms(all[Math.Min(all.Length - 1, (int)Math.Ceiling(p * all.Length) - 1)]);
        return new LoadResult(concurrency, all.Length, errors, seconds, Percentile(0.50), Percentile(0.99), Ms((long)all.Average()));
    }

    /// <summary>
    /// One client takes turns at <paramref name="operations"/> (A, B, C, A, B, C, ...): a warm-up, then
    /// the measured window. Every operation sees the same moments of a noisy machine, so their
    /// differences are fair even when the absolute numbers drift. Returns each one's median in ms.
    /// </summary>
    public static async Task<double[]> InterleavedP50Async(IReadOnlyList<Func<Task<bool>>> operations, TimeSpan warmup, TimeSpan duration)
    {
        var latencies = operations.Select(_ => new List<long>(100_000)).ToArray();
        foreach (var (span, record) in new[] { (warmup, false), (duration, true) })
        {
            var end = Stopwatch.GetTimestamp() + (long)(span.TotalSeconds * Stopwatch.Frequency);
            while (Stopwatch.GetTimestamp() < end)
                for (var i = 0; i < operations.Count; i++)
                {
                    var start = Stopwatch.GetTimestamp();
                    if (!await operations[i]())
                        throw new InvalidOperationException($"interleaved operation {i} failed");
                    if (record)
                        latencies[i].Add(Stopwatch.GetTimestamp() - start);
                }
        }
        return latencies.Select(l =>
        {
            l.Sort();
            return l[l.Count / 2] * 1000.0 / Stopwatch.Frequency;
        }).ToArray();
    }

    /// <summary>A GET of <paramref name="url"/> as an operation for <see cref="InterleavedP50Async"/>.</summary>
    public Func<Task<bool>> Get(Uri url, Func<HttpResponseMessage, Task<bool>>? check = null) => async () =>
    {
        using var response = await _client.GetAsync(url, HttpCompletionOption.ResponseContentRead);
        return response.IsSuccessStatusCode && (check is null || await check(response));
    };

    private async Task<long> LoopAsync(Uri url, int concurrency, TimeSpan duration, List<long>[]? latencies, Func<HttpResponseMessage, Task<bool>>? check)
    {
        var end = Stopwatch.GetTimestamp() + (long)(duration.TotalSeconds * Stopwatch.Frequency);
        long errors = 0;
        var loops = Enumerable.Range(0, concurrency).Select(i => Task.Run(async () =>
        {
            var mine = latencies?[i];
            while (Stopwatch.GetTimestamp() < end)
            {
                var start = Stopwatch.GetTimestamp();
                try
                {
                    using var response = await _client.GetAsync(url, HttpCompletionOption.ResponseContentRead);
                    var ok = response.IsSuccessStatusCode && (check is null || await check(response));
                    if (!ok)
                    {
                        Interlocked.Increment(ref errors);
                        continue;
                    }
                }
                catch (HttpRequestException)
                {
                    Interlocked.Increment(ref errors);
                    continue;
                }
                mine?.Add(Stopwatch.GetTimestamp() - start);
            }
        })).ToArray();
        await Task.WhenAll(loops);
        return errors;
    }

    public void Dispose() => _client.Dispose();
}
