using System.Diagnostics;

namespace FaaST.Bench.Fuzz;

/// <summary>One crash cause, with the smallest input found that shows it.</summary>
public sealed record Finding(string Target, string Signature, long Index, int Count, string Detail, string Input);

/// <summary>What one target got over a run.</summary>
public sealed class TargetResult(string target, int seed)
{
    public string Target { get; } = target;
    public int Seed { get; } = seed;
    public long Inputs { get; set; }
    public long Accepted { get; set; }
    public long Rejected { get; set; }
    public long Crashes { get; set; }
    public double Seconds { get; set; }

    /// <summary>Why the run stopped early (the time bound), if it did.</summary>
    public string? Stopped { get; set; }

    /// <summary>Extra numbers a target reports (e.g. connection resets on malformed HTTP).</summary>
    public SortedDictionary<string, long> Counters { get; } = new(StringComparer.Ordinal);

    /// <summary>One entry per distinct crash cause: the first input that showed it, minimized.</summary>
    public List<Finding> Findings { get; } = [];

    public void Count(string counter, long by = 1) => Counters[counter] = Counters.GetValueOrDefault(counter) + by;

    /// <summary>Counts one input's outcome; <paramref name="index"/> -1 is a check after the run, not an input.</summary>
    public void Add(Outcome outcome, long index, Func<Outcome, string>? input = null)
    {
        if (index >= 0)
            Inputs++;
        switch (outcome.Verdict)
        {
            case Verdict.Accepted: Accepted++; break;
            case Verdict.Rejected: Rejected++; break;
            default:
                Crashes++;
                var i = Findings.FindIndex(f => f.Signature == outcome.Signature);
                if (i >= 0)
                    Findings[i] = Findings[i] with { Count = Findings[i].Count + 1 };
                else
                    Findings.Add(new Finding(Target, outcome.Signature!, index, 1, outcome.Detail ?? "", input?.Invoke(outcome) ?? ""));
                break;
        }
    }
}

public static class FuzzRun
{
    /// <summary>A seed for input <paramref name="index"/> of a run: depends on nothing else, so any one
    /// input can be generated again alone (SplitMix64 of the three).</summary>
    public static int Mix(int seed, int stream, long index)
    {
        var z = unchecked((ulong)seed * 0x9E3779B97F4A7C15UL + (ulong)stream * 0xBF58476D1CE4E5B9UL + (ulong)index * 0x94D049BB133111EBUL);
        z = unchecked((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL);
        z = unchecked((z ^ (z >> 27)) * 0x94D049BB133111EBUL);
        return (int)(z ^ (z >> 31));
    }

    /// <summary>
    /// Runs <paramref name="body"/> for inputs 0, 1, 2, ... on <paramref name="loops"/> loops at once, each taking
    /// the next index, until <paramref name="count"/> inputs were taken or <paramref name="budget"/> (on
    /// <paramref name="clock"/>) ran out; a body that answers false ends its loop (the target went down).
    /// Returns how many inputs were taken.
    /// </summary>
    public static async Task<long> ForEachInputAsync(int loops, long count, Stopwatch clock, TimeSpan budget, Func<long, Task<bool>> body)
    {
        var gate = new object();
        long next = 0;
        async Task Loop()
        {
            while (true)
            {
                long i;
                lock (gate)
                {
                    if (next >= count || clock.Elapsed > budget)
                        return;
                    i = next++;
                }
                if (!await body(i))
                    return;
            }
        }
        await Task.WhenAll(Enumerable.Range(0, loops).Select(_ => Task.Run(Loop)));
        return next;
    }

    /// <summary>Runs <paramref name="count"/> inputs of one config target (or fewer if <paramref name="budget"/> runs out).</summary>
    public static TargetResult Config(ConfigFuzzer fuzzer, string target, int seed, int count, TimeSpan budget, bool minimize = true)
    {
        var result = new TargetResult(target, seed);
        var clock = Stopwatch.StartNew();
        var minimizing = new Stopwatch();
        for (long i = 0; i < count; i++)
        {
            if (clock.Elapsed > budget)
            {
                result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {i} inputs";
                break;
            }
            var input = ConfigFuzzer.Input(target, seed, i);
            var outcome = fuzzer.Run(target, input);
            // Minimizing takes at most a third of the time bound, so the inputs still get their share.
            var shrink = minimize && minimizing.Elapsed < budget / 3;
            result.Add(outcome, i, o =>
            {
                minimizing.Start();
                var shown = ConfigFuzzer.Printable(shrink ? Minimize(input, b => fuzzer.Run(target, b).Signature == o.Signature) : input);
                minimizing.Stop();
                return shown;
            });
        }
        result.Seconds = clock.Elapsed.TotalSeconds;
        return result;
    }

    /// <summary>
    /// Shrinks an input while <paramref name="stillFails"/> holds: drops chunks of halving size, then
    /// single bytes (bounded number of tries, so a minimization never dominates a run).
    /// </summary>
    public static byte[] Minimize(byte[] input, Func<byte[], bool> stillFails, int maxTries = 200)
    {
        var current = input;
        var tries = 0;
        for (var chunk = Math.Max(1, current.Length / 2); chunk >= 1 && tries < maxTries; chunk /= 2)
        {
            for (var start = 0; start < current.Length && tries < maxTries;)
            {
                var candidate = new byte[current.Length - Math.Min(chunk, current.Length - start)];
                current.AsSpan(0, start).CopyTo(candidate);
                current.AsSpan(Math.Min(current.Length, start + chunk)).CopyTo(candidate.AsSpan(start));
                tries++;
                if (stillFails(candidate))
                    current = candidate;
                else
                    start += chunk;
            }
            if (chunk == 1)
                break;
        }
        return current;
    }
}
