namespace FaaST.Simulator.Trace;

public static partial class SyntheticTrace
{
    /// <summary>§2.1: 77.3 % of accesses are reads. Every kind of app below reads this share of its accesses on average,
    /// so the trace's share holds even when a few frequent apps make most rows.</summary>
    private const double ReadShare = 0.773;
    private const double WritesPerRead = (1 - ReadShare) / ReadShare;

    /// <summary>§2.1 (as ATC'20 found): 80 % of apps are invoked less than once a minute on average.</summary>
    private const double RareShare = 0.80;
    private const double MinuteMs = 60_000;

    /// <summary>The rare apps' rates run from once per trace span up to once per 5 minutes; the frequent apps' from
    /// 1.25 a minute (clear of the 1-a-minute line, whose side a bursty app's measured rate could otherwise cross) up
    /// to at least 4 times that, further as the row budget allows: rates span orders of magnitude, as in §2.1.</summary>
    private const double RareFastestPerMs = 1 / (5 * MinuteMs);
    private const double FrequentSlowestPerMs = 1.25 / MinuteMs;
    private const double MinFrequentSpread = 4, MaxFrequentSpread = 1e6;

    /// <summary>Share of apps invoked on a timer (periodic, IaT CoV near 0); the rest arrive in bursts (CoV &gt; 1, §2.1
    /// Fig. 3: accesses to most blobs are bursty).</summary>
    private const double PeriodicShare = 0.25;

    /// <summary>
    /// What an invocation accesses (§2.1, Fig. 2, the ratio of an app's invocations to its distinct blobs): most apps a
    /// single, new blob (<see cref="Single"/>, ratio 1); some several new blobs (<see cref="Multi"/>, ratio &lt; 1); the
    /// apps that reuse blobs across invocations (ratio &gt; 1 for &gt; 32 %) either read shared objects (an ML model and
    /// its labels) plus now and then a new input and output (<see cref="Shared"/>), or access the same blobs every time
    /// (11.8 % of apps: a notebook's state read and rewritten, <see cref="Fixed"/>). The reusing kinds' shares are above
    /// the paper's and Multi's below, since a reusing app invoked only a few times in the trace still has more blobs
    /// than invocations: measured, ~13 % of apps come out below 1 and ~32 % above.
    /// </summary>
    private enum Kind { Single, Multi, Shared, Fixed }

    private static readonly (Kind Kind, double Share)[] Kinds = [(Kind.Single, 0.52), (Kind.Multi, 0.09), (Kind.Shared, 0.20), (Kind.Fixed, 0.19)];

    /// <summary>Shared apps: the chance an invocation reads a new input blob, and that an output is a new blob rather
    /// than a rewrite of the app's result blob.</summary>
    private const double SharedInputChance = 0.3, SharedNewOutputChance = 0.3;

    private static readonly string[] BlobTypes =
    [
        "BlockBlob/application/octet-stream", "BlockBlob/application/json", "BlockBlob/", "BlockBlob/text/plain",
        "BlockBlob/image/jpeg", "BlockBlob/application/zip",
    ];

    /// <summary>A blob an app accesses in many invocations, with its current version.</summary>
    private sealed class SharedBlob(long number, string name, string type, long bytes)
    {
        public long Number { get; } = number;
        public string Name { get; } = name;
        public string Type { get; } = type;
        public long Bytes { get; set; } = bytes;
        public int Version { get; set; }
    }

    private sealed class App
    {
        public required string Region { get; init; }
        public required string User { get; init; }
        public required string Name { get; init; }
        public required string Key { get; init; }
        public required Kind Kind { get; init; }
        public required bool Periodic { get; init; }
        public required string FreshType { get; init; }

        /// <summary>Multi: new blobs per invocation; Shared: outputs written per invocation (expected); Fixed: the
        /// chance the state is rewritten.</summary>
        public double PerInvocation { get; init; }
        public SharedBlob[] Shared { get; init; } = [];
        /// <summary>Fixed: the state read and rewritten; Shared: the result blob some outputs rewrite.</summary>
        public SharedBlob? State { get; init; }

        /// <summary>Mean invocations per millisecond, and per invocation the expected rows.</summary>
        public double Rate { get; set; }
        public double RowsPerInvocation { get; init; }

        /// <summary>Bursty arrivals: mean invocations per burst, and those left in the current burst.</summary>
        public double BurstSize { get; init; }
        public int BurstLeft { get; set; }

        /// <summary>Periodic arrivals: the timer's next nominal tick (ms since the trace's start).</summary>
        public double NextTick { get; set; }
    }

    /// <summary>The blob-size distribution of §2.1, Fig. 1 as quantiles (per blob): 25 % under 600 B, 80 % under 12 KB,
    /// a tail to 1.8 GB with objects over 100 MB about 0.01 % of blobs; log-linear between the points.</summary>
    private static readonly (double P, double Bytes)[] SizeQuantiles =
    [
        (0, 8), (0.25, 600), (0.80, 12 * 1024), (0.95, 256 * 1024), (0.99, 4 << 20), (0.999, 32 << 20), (0.9999, 100 << 20),
        (1, MaxBlobBytes),
    ];

    /// <summary>§2.1: "a few as large as 1.8GB".</summary>
    public const long MaxBlobBytes = 1_800_000_000;

    private static long SampleBytes(Random rng)
    {
        var u = rng.NextDouble();
        var i = 1;
        while (i < SizeQuantiles.Length - 1 && u >= SizeQuantiles[i].P)
        {
            i++;
        }
        var (p0, b0) = SizeQuantiles[i - 1];
        var (p1, b1) = SizeQuantiles[i];
        var bytes = b0 * Math.Pow(b1 / b0, (u - p0) / (p1 - p0));
        return Math.Min((long)Math.Round(bytes), MaxBlobBytes);
    }

    /// <summary>Builds the apps: kinds and arrival shapes stratified (so shares hold for a few hundred apps), users
    /// owning ~1.7 apps each in 28 regions (the paper's 855 apps of 509 users), rates set by <see cref="SetRates"/>.</summary>
    private static (App[] Apps, double SpanMs) BuildApps(SyntheticTraceOptions o, Random rng, Tokens tokens)
    {
        var n = o.Apps;
        var kindRank = Stratified(n, rng);
        var arrivalRank = Stratified(n, rng);
        var rateRank = Stratified(n, rng);
        var users = Math.Max(1, (int)Math.Round(n * 509.0 / 855));
        var apps = new App[n];
        for (var i = 0; i < n; i++)
        {
            var user = rng.Next(users);
            var region = tokens.Region(user % 28);
            var userId = tokens.User(user);
            var name = tokens.AppName(i);
            var kind = PickKind(kindRank[i]);
            var (shared, state, perInvocation, rows) = Shape(kind, rng, tokens);
            apps[i] = new App
            {
                Region = region, User = userId, Name = name, Key = $"{region}/{userId}/{name}", Kind = kind,
                Periodic = arrivalRank[i] < PeriodicShare, FreshType = BlobTypes[rng.Next(BlobTypes.Length)],
                Shared = shared, State = state, PerInvocation = perInvocation, RowsPerInvocation = rows,
                BurstSize = 1.5 * Math.Pow(8, rng.NextDouble()),
            };
        }
        return (apps, SetRates(apps, rateRank, o));
    }

    /// <summary>What one kind of app holds and does per invocation, with its expected rows per invocation.</summary>
    private static (SharedBlob[] Shared, SharedBlob? State, double PerInvocation, double Rows) Shape(Kind kind, Random rng, Tokens tokens)
    {
        switch (kind)
        {
            case Kind.Multi:
                var blobs = rng.Next(2, 5);
                return ([], null, blobs, blobs);
            case Kind.Shared:
                // A model (octet-stream) and, for most, its labels, read by every invocation; half the invocations read
                // a new input (the other half get it in the request), and outputs keep writes at 22.7 % of the app's
                // accesses. Half the outputs are new blobs, half rewrite the app's result blob: fewer new blobs than
                // invocations, so the app's invocations-per-blob ratio is above 1, as Fig. 2 counts reuse.
                var count = rng.NextDouble() < 0.4 ? 1 : 2;
                var shared = Enumerable.Range(0, count).Select(j => tokens.NewShared(rng, j == 0 ? BlobTypes[0] : BlobTypes[3])).ToArray();
                var outputs = (count + SharedInputChance) * WritesPerRead;
                return (shared, tokens.NewShared(rng, BlobTypes[1]), outputs, count + SharedInputChance + outputs);
            case Kind.Fixed:
                // A state blob read and, with this chance, rewritten (a new ETag), plus up to two static blobs.
                var statics = rng.Next(0, 3);
                var fixedShared = Enumerable.Range(0, statics).Select(_ => tokens.NewShared(rng, BlobTypes[0])).ToArray();
                var rewrite = (statics + 1) * WritesPerRead;
                return (fixedShared, tokens.NewShared(rng, BlobTypes[1]), rewrite, statics + 1 + rewrite);
            default:
                return ([], null, 1, 1);
        }
    }

    private static Kind PickKind(double rank)
    {
        foreach (var (kind, share) in Kinds)
        {
            if (rank < share)
            {
                return kind;
            }
            rank -= share;
        }
        return Kinds[^1].Kind;
    }

    /// <summary>
    /// Rates: the rarest 80 % log-uniform from once per span to once per 5 minutes, the rest log-uniform from 1.25 a
    /// minute up to a spread solved so that <see cref="SyntheticTraceOptions.Accesses"/> rows take about the span. A
    /// budget too small for that (fewer than ~3,700 rows per app per day) keeps the spread at its minimum and shortens
    /// the span to what the rows fill, so the rarest apps still appear: the rates, not the span, carry the paper's
    /// statistics. Too few apps to make the rows in the span (no frequent app at all, say) make a longer trace.
    /// Returns the span (ms).
    /// </summary>
    private static double SetRates(App[] apps, double[] rank, SyntheticTraceOptions o)
    {
        var frequent = new List<(App App, double V)>();
        var rare = new List<(App App, double V)>();
        for (var i = 0; i < apps.Length; i++)
        {
            (rank[i] < RareShare ? rare : frequent).Add((apps[i], rank[i] < RareShare ? rank[i] / RareShare : (rank[i] - RareShare) / (1 - RareShare)));
        }
        double FrequentRowsPerMs(double spread) => frequent.Sum(f => FrequentSlowestPerMs * Math.Pow(spread, f.V) * f.App.RowsPerInvocation);
        double RareRowsPerMs(double span)
        {
            var slowest = 1 / span;
            foreach (var (app, v) in rare)
            {
                app.Rate = slowest * Math.Pow(RareFastestPerMs / slowest, v);
            }
            return rare.Sum(r => r.App.Rate * r.App.RowsPerInvocation);
        }
        var span = o.Span.TotalMilliseconds;
        var minSpan = SyntheticTraceOptions.MinDuration.TotalMilliseconds;
        // The rare apps' rates depend on the span and the span on them, a little: a few rounds settle it.
        for (var round = 0; round < 8 && span > minSpan && (RareRowsPerMs(span) + FrequentRowsPerMs(MinFrequentSpread)) * span > o.Accesses; round++)
        {
            span = Math.Max(minSpan, o.Accesses / (RareRowsPerMs(span) + FrequentRowsPerMs(MinFrequentSpread)));
        }
        var budget = o.Accesses / span - RareRowsPerMs(span);
        double lo = Math.Log(MinFrequentSpread), hi = Math.Log(MaxFrequentSpread);
        if (FrequentRowsPerMs(MinFrequentSpread) < budget)
        {
            for (var step = 0; step < 60; step++)
            {
                var mid = (lo + hi) / 2;
                (lo, hi) = FrequentRowsPerMs(Math.Exp(mid)) < budget ? (mid, hi) : (lo, mid);
            }
        }
        foreach (var (app, v) in frequent)
        {
            app.Rate = FrequentSlowestPerMs * Math.Pow(Math.Exp(lo), v);
        }
        return span;
    }

    /// <summary>n values in [0, 1), one per stratum of width 1/n, in a random order.</summary>
    private static double[] Stratified(int n, Random rng)
    {
        var values = new double[n];
        for (var i = 0; i < n; i++)
        {
            values[i] = (i + rng.NextDouble()) / n;
        }
        rng.Shuffle(values);
        return values;
    }

    private static double Exponential(Random rng, double mean) => -mean * Math.Log(1 - rng.NextDouble());
}
