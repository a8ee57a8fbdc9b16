using System.Text;
using ICSharpCode.SharpZipLib.BZip2;

namespace FaaST.Simulator.Trace;

/// <summary>
/// A deterministic blob-access trace in the schema of the Azure Functions Blob Access Trace 2020, generated to match the
/// statistics Faa$T §2.1 publishes of the real one, so the simulator can be tested and benchmarked without it: 77.3 %
/// reads; blob sizes of Fig. 1 (80 % under 12 KB, 25 % under 600 B, a tail to 1.8 GB); the reuse of Fig. 2 (most apps a
/// new blob per invocation, ~11 % several, &gt; 32 % the same blob in several invocations: ML-like apps reading a model
/// and labels plus a new input and output, stateful apps reading and rewriting their state); bursty arrivals (Fig. 3:
/// IaT CoV &gt; 1 for most blobs) beside timer-driven ones; 80 % of apps invoked less than once a minute, rates spanning
/// orders of magnitude.
/// </summary>
/// <remarks>
/// Rows stream in non-decreasing timestamp order from a priority queue of each app's next invocation and the pending
/// accesses of invocations under way, so memory depends on the apps, not on the rows. Timestamps start at the public
/// trace's first day, 2020-11-23 00:00 UTC. What it does not model: sharing across apps (§2.1: almost none), reads
/// being larger than writes, diurnal patterns.
/// </remarks>
public static partial class SyntheticTrace
{
    /// <summary>The public trace's header, in its column order.</summary>
    public const string Header = "Timestamp,AnonRegion,AnonUserId,AnonAppName,AnonFunctionInvocationId,AnonBlobName,BlobType,AnonBlobETag,BlobBytes,Read,Write";

    /// <summary>The public trace's first day.</summary>
    public static DateTimeOffset Start { get; } = new(2020, 11, 23, 0, 0, 0, TimeSpan.Zero);

    private static readonly long StartMs = Start.ToUnixTimeMilliseconds();

    /// <summary>How often an invocation of an ML-like app finds its model replaced (a write, a new ETag): rare, so
    /// prewarm's version check has something to catch.</summary>
    private const double ModelUpdateChance = 0.001;

    /// <summary>Time between an invocation's accesses: a short think time plus the transfer at 50 MB/s (bytes per ms).</summary>
    private const double ThinkMs = 20, BytesPerMs = 50_000;

    /// <summary>A row, and for a blob accessed in many invocations the blob: its version (ETag) and size are settled
    /// when the row is emitted, since an overlapping invocation may rewrite it in between.</summary>
    private readonly record struct Row(TraceAccess Access, App App, string BlobType, SharedBlob? Existing = null, long NewBytes = 0);

    private readonly record struct Event(Row Row, App? Arrival, double Time);

    /// <summary>The trace's rows, streamed.</summary>
    /// <exception cref="ArgumentException">An option out of its range (thrown at once).</exception>
    public static IEnumerable<TraceAccess> Generate(SyntheticTraceOptions o)
    {
        ArgumentNullException.ThrowIfNull(o);
        o.Validate();
        return Rows(o).Select(r => r.Access);
    }

    /// <summary>Writes the header and the rows as the public trace prints them; returns the rows written.</summary>
    public static long Write(TextWriter w, SyntheticTraceOptions o)
    {
        ArgumentNullException.ThrowIfNull(w);
        ArgumentNullException.ThrowIfNull(o);
        o.Validate();
        w.Write(Header);
        w.Write('\n');
        var line = new char[1024];
        long rows = 0;
        foreach (var row in Rows(o))
        {
            w.Write(line, 0, Format(row, line));
            rows++;
        }
        return rows;
    }

    /// <summary>Writes the trace to a file, bzip2-compressed when its name ends in <c>.bz2</c> (as the public trace is
    /// published), through a temporary file so a failure never leaves half a trace under the name.</summary>
    public static long WriteFile(string path, SyntheticTraceOptions o)
    {
        ArgumentException.ThrowIfNullOrEmpty(path);
        ArgumentNullException.ThrowIfNull(o);
        o.Validate();
        var temporary = path + ".partial";
        try
        {
            long rows;
            using (var file = File.Create(temporary))
            using (var stream = TraceReader.IsBzip2(path) ? new BZip2OutputStream(file) : (Stream)file)
            using (var writer = new StreamWriter(stream, new UTF8Encoding(encoderShouldEmitUTF8Identifier: false), 1 << 16))
            {
                rows = Write(writer, o);
            }
            File.Move(temporary, path, overwrite: true);
            return rows;
        }
        finally
        {
            File.Delete(temporary);
        }
    }

    private static IEnumerable<Row> Rows(SyntheticTraceOptions o)
    {
        var rng = new Random(o.Seed);
        var tokens = new Tokens(rng.NextInt64());
        var (apps, span) = BuildApps(o, rng, tokens);
        var queue = new PriorityQueue<Event, (long, long)>(apps.Length * 2);
        long sequence = 0;
        foreach (var app in apps)
        {
            var first = FirstArrival(app, span, rng);
            queue.Enqueue(new Event(default, app, first), (StartMs + (long)first, sequence++));
        }
        var pending = new List<Row>(16);
        long emitted = 0;
        while (emitted < o.Accesses && queue.TryDequeue(out var next, out _))
        {
            if (next.Arrival is not { } app)
            {
                emitted++;
                yield return next.Row.Existing is null ? next.Row : Settle(next.Row, tokens);
                continue;
            }
            Invoke(app, next.Time, rng, tokens, pending);
            foreach (var row in pending)
            {
                queue.Enqueue(new Event(row, null, 0), (row.Access.TimestampMs, sequence++));
            }
            pending.Clear();
            var after = NextArrival(app, next.Time, rng);
            queue.Enqueue(new Event(default, app, after), (StartMs + (long)after, sequence++));
        }
    }

    private static Row Settle(Row row, Tokens tokens)
    {
        var blob = row.Existing!;
        if (row.Access.Write)
        {
            blob.Version++;
            blob.Bytes = row.NewBytes;
        }
        return row with { Access = row.Access with { ETag = tokens.ETag(blob.Number, blob.Version), Bytes = blob.Bytes } };
    }

    /// <summary>The first invocation; an app whose first would fall past the span is placed in it uniformly, so every
    /// app appears in a trace that lasts its span (a rare app would otherwise often be absent).</summary>
    private static double FirstArrival(App app, double span, Random rng)
    {
        if (app.Periodic)
        {
            app.NextTick = rng.NextDouble() * Math.Min(1 / app.Rate, span);
            return app.NextTick;
        }
        app.BurstLeft = BurstSize(app, rng) - 1;
        var first = Exponential(rng, app.BurstSize / app.Rate);
        return first <= span ? first : rng.NextDouble() * span;
    }

    /// <summary>
    /// Timer apps tick at their period with a 1 % jitter. Bursty apps (§2.1 Fig. 3) start bursts at rate/burst-size,
    /// each of a geometric number of invocations a hundredth of the mean burst gap apart (at most 2 s): the mixture of
    /// short and long gaps gives an IaT CoV above 1.
    /// </summary>
    private static double NextArrival(App app, double now, Random rng)
    {
        if (app.Periodic)
        {
            var period = 1 / app.Rate;
            app.NextTick += period;
            var jitter = (rng.NextDouble() * 2 - 1) * Math.Min(0.01 * period, 2000);
            return Math.Max(now, app.NextTick + jitter);
        }
        var burstGap = app.BurstSize / app.Rate;
        if (app.BurstLeft > 0)
        {
            app.BurstLeft--;
            return now + Exponential(rng, Math.Min(burstGap / 100, 2000));
        }
        app.BurstLeft = BurstSize(app, rng) - 1;
        return now + Exponential(rng, burstGap);
    }

    private static int BurstSize(App app, Random rng) =>
        1 + (int)Math.Min(1000, Math.Floor(Math.Log(1 - rng.NextDouble()) / Math.Log(1 - 1 / app.BurstSize)));

    /// <summary>One invocation's accesses, in the order the app makes them (see <see cref="Kind"/>).</summary>
    private static void Invoke(App app, double time, Random rng, Tokens tokens, List<Row> output)
    {
        var invocation = tokens.Invocation();
        var clock = time;
        void Fresh(bool read)
        {
            var (number, name) = tokens.NewBlob();
            Emit(output, app, invocation, ref clock, name, app.FreshType, tokens.ETag(number, read ? 0 : 1), SampleBytes(rng), read, rng);
        }
        void Existing(SharedBlob blob, bool write, long newBytes = 0)
        {
            Emit(output, app, invocation, ref clock, blob.Name, blob.Type, "", write ? newBytes : blob.Bytes, !write, rng, blob);
        }
        switch (app.Kind)
        {
            case Kind.Single:
                Fresh(rng.NextDouble() < ReadShare);
                break;
            case Kind.Multi:
                var count = (int)app.PerInvocation;
                var reads = 0;
                for (var i = 0; i < count; i++)
                {
                    reads += rng.NextDouble() < ReadShare ? 1 : 0;
                }
                for (var i = 0; i < count; i++)
                {
                    Fresh(i < reads);
                }
                break;
            case Kind.Shared:
                foreach (var blob in app.Shared)
                {
                    Existing(blob, rng.NextDouble() < ModelUpdateChance, blob.Bytes);
                }
                if (rng.NextDouble() < SharedInputChance)
                {
                    Fresh(read: true);
                }
                for (var outputs = Draw(app.PerInvocation, rng); outputs > 0; outputs--)
                {
                    if (rng.NextDouble() < SharedNewOutputChance)
                    {
                        Fresh(read: false);
                    }
                    else
                    {
                        Existing(app.State!, write: true, Math.Max(1, (long)(app.State!.Bytes * (0.9 + 0.2 * rng.NextDouble()))));
                    }
                }
                break;
            case Kind.Fixed:
                foreach (var blob in app.Shared)
                {
                    Existing(blob, write: false);
                }
                var state = app.State!;
                Existing(state, write: false);
                if (rng.NextDouble() < app.PerInvocation)
                {
                    // A rewritten state keeps about its size.
                    Existing(state, write: true, Math.Max(1, (long)(state.Bytes * (0.9 + 0.2 * rng.NextDouble()))));
                }
                break;
        }
    }

    /// <summary>An integer with the given mean: its floor, plus one with the chance of its fraction.</summary>
    private static int Draw(double mean, Random rng) => (int)mean + (rng.NextDouble() < mean - Math.Floor(mean) ? 1 : 0);

    private static void Emit(List<Row> output, App app, string invocation, ref double clock, string blob, string type, string etag,
        long bytes, bool read, Random rng, SharedBlob? existing = null)
    {
        output.Add(new Row(new TraceAccess(StartMs + (long)clock, app.Key, invocation, blob, etag, bytes, read, !read), app, type, existing, bytes));
        clock += 1 + Exponential(rng, ThinkMs) + bytes / BytesPerMs;
    }

    /// <summary>A row as the public trace prints it (BlobBytes a float, Read/Write True/False); returns its length.</summary>
    private static int Format(in Row row, char[] line)
    {
        var a = row.Access;
        var span = line.AsSpan();
        var n = 0;
        a.TimestampMs.TryFormat(span, out var written, provider: System.Globalization.CultureInfo.InvariantCulture);
        n += written;
        Field(span, ref n, row.App.Region);
        Field(span, ref n, row.App.User);
        Field(span, ref n, row.App.Name);
        Field(span, ref n, a.Invocation);
        Field(span, ref n, a.Blob);
        Field(span, ref n, row.BlobType);
        Field(span, ref n, a.ETag);
        span[n++] = ',';
        a.Bytes.TryFormat(span[n..], out written, provider: System.Globalization.CultureInfo.InvariantCulture);
        n += written;
        Field(span, ref n, ".0", comma: false);
        Field(span, ref n, a.Read ? "True" : "False");
        Field(span, ref n, a.Write ? "True" : "False");
        span[n++] = '\n';
        return n;
    }

    private static void Field(Span<char> line, ref int n, string value, bool comma = true)
    {
        if (comma)
        {
            line[n++] = ',';
        }
        value.CopyTo(line[n..]);
        n += value.Length;
    }
}
