using System.Text.RegularExpressions;
using FaaST.Simulator.Trace;

namespace FaaST.Simulator.Tests;

/// <summary>The synthetic trace: deterministic, ordered, exactly as long as asked, readable by the reader, and matching
/// the statistics Faa$T §2.1 publishes of the real trace.</summary>
public sealed class SyntheticTraceTests
{
    /// <summary>A trace at about the paper's density (3,700 rows per app per day; it has 44.3 M over 855 apps and 14
    /// days): 200 apps over 6 hours.</summary>
    private static readonly SyntheticTraceOptions PaperLike = new(Apps: 200, Accesses: 200_000, Duration: TimeSpan.FromHours(6), Seed: 7);

    private static readonly Lazy<TraceStatistics> PaperLikeStatistics = new(() => TraceStatistics.Of(SyntheticTrace.Generate(PaperLike)));

    [Fact]
    public void The_same_options_give_the_same_rows_and_another_seed_other_rows()
    {
        var options = new SyntheticTraceOptions(Apps: 50, Accesses: 5_000, Seed: 3);
        var first = SyntheticTrace.Generate(options).ToList();
        Assert.Equal(first, SyntheticTrace.Generate(options).ToList());
        var other = SyntheticTrace.Generate(options with { Seed = 4 }).ToList();
        Assert.NotEqual(first.Select(a => a.Blob), other.Select(a => a.Blob));
    }

    [Theory]
    [InlineData(1, 1)]
    [InlineData(1, 1_000)]
    [InlineData(30, 12_345)]
    [InlineData(2_000, 50_000)]
    public void The_trace_has_exactly_the_rows_asked_for_in_non_decreasing_time(int apps, long accesses)
    {
        var previous = long.MinValue;
        long rows = 0;
        foreach (var access in SyntheticTrace.Generate(new SyntheticTraceOptions(apps, accesses)))
        {
            Assert.True(access.TimestampMs >= previous, $"row {rows + 1} at {access.TimestampMs} comes after one at {previous}");
            Assert.True(access.Read != access.Write, $"row {rows + 1} must either read or write: {access}");
            previous = access.TimestampMs;
            rows++;
        }
        Assert.Equal(accesses, rows);
    }

    [Fact]
    public void Written_rows_read_back_identically_through_the_reader_in_the_public_schema()
    {
        var options = new SyntheticTraceOptions(Apps: 100, Accesses: 20_000, Seed: 5);
        var text = new StringWriter();
        Assert.Equal(20_000, SyntheticTrace.Write(text, options));
        var lines = text.ToString().Split('\n');
        Assert.Equal(SyntheticTrace.Header, lines[0]);
        var schema = new Regex(@"^\d{13},[0-9a-z]{3},\d+,[0-9a-z]{8},\d+,[0-9a-z]{16},BlockBlob/[a-z/-]*,[0-9a-z]{10},\d+\.0,(True|False),(True|False)$");
        var unlike = lines.Skip(1).SkipLast(1).Select((line, i) => (Line: i + 2, Text: line)).FirstOrDefault(l => !schema.IsMatch(l.Text));
        Assert.True(unlike.Text is null, $"line {unlike.Line} is not shaped like the public trace's rows: {unlike.Text}");
        Assert.Equal("", lines[^1]);

        var problems = new List<TraceProblem>();
        var read = TraceReader.Read(new StringReader(text.ToString()), "synthetic.csv", problems.Add).ToList();
        Assert.Empty(problems);
        Assert.Equal(SyntheticTrace.Generate(options).ToList(), read);
    }

    [Fact]
    public void A_bzip2_file_written_by_WriteFile_reads_back_identically()
    {
        using var dir = new TempDirectory("synthetic-");
        var options = new SyntheticTraceOptions(Apps: 20, Accesses: 3_000, Seed: 9);
        var path = Path.Combine(dir.Path, "trace.csv.bz2");
        Assert.Equal(3_000, SyntheticTrace.WriteFile(path, options));
        Assert.Equal([(byte)'B', (byte)'Z', (byte)'h'], File.ReadAllBytes(path)[..3]);
        Assert.Equal(SyntheticTrace.Generate(options).ToList(), TraceReader.Read(path, p => Assert.Fail(p.ToString())).ToList());
        Assert.Equal(["trace.csv.bz2"], Directory.GetFiles(dir.Path).Select(Path.GetFileName));
    }

    [Theory]
    [InlineData(0, 10, 60, "Apps")]
    [InlineData(10, 0, 60, "Accesses")]
    [InlineData(10, 10, 5, "Duration")]
    public void Options_out_of_range_are_rejected_naming_the_option(int apps, long accesses, int minutes, string option)
    {
        var e = Assert.Throws<ArgumentException>(() => SyntheticTrace.Generate(new SyntheticTraceOptions(apps, accesses, TimeSpan.FromMinutes(minutes))));
        Assert.Contains($"SyntheticTraceOptions.{option}", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Reads_are_77_3_percent_of_accesses()
    {
        var s = PaperLikeStatistics.Value;
        Assert.InRange(s.ReadShare, 0.753, 0.793);
    }

    [Fact]
    public void Blob_sizes_follow_figure_1_with_a_tail_capped_at_1_8_GB()
    {
        var s = PaperLikeStatistics.Value;
        Assert.InRange(s.BlobsUnder600B, 0.22, 0.28);
        Assert.InRange(s.BlobsUnder12KB, 0.77, 0.83);
        Assert.InRange(s.LargestBlob, 4L << 20, SyntheticTrace.MaxBlobBytes);
        Assert.InRange(s.BlobsOver100MB, 0, 0.001);
    }

    [Fact]
    public void About_80_percent_of_apps_are_invoked_less_than_once_a_minute()
    {
        var s = PaperLikeStatistics.Value;
        Assert.InRange(s.AppsUnderOnePerMinute, 0.75, 0.85);
        Assert.True(s.AppsSeen >= 0.95 * PaperLike.Apps, $"only {s.AppsSeen} of {PaperLike.Apps} apps appear");
        Assert.True(s.FastestToSlowestRate > 1e3, $"rates span only {s.FastestToSlowestRate:g3}x");
    }

    [Fact]
    public void Over_30_percent_of_apps_access_the_same_blob_in_several_invocations_and_some_in_over_100()
    {
        var s = PaperLikeStatistics.Value;
        Assert.InRange(s.AppsReusingABlob, 0.30, 0.45);
        Assert.InRange(s.AppsReusingABlobOver100Invocations, 0.04, 0.20);
        // Fig. 2's ratio of invocations to blobs: below 1 for ~11 %, above 1 for > 32 % (an app invoked a few times in
        // the trace, before its shared blobs are outnumbered by its invocations, counts below 1).
        Assert.InRange(s.AppsWithSeveralBlobsPerInvocation, 0.08, 0.25);
        Assert.InRange(s.AppsWithMoreInvocationsThanBlobs, 0.25, 0.45);
    }

    [Fact]
    public void Most_reused_blobs_are_accessed_in_bursts()
    {
        var s = PaperLikeStatistics.Value;
        Assert.True(s.BlobsWithIaT > 50, $"only {s.BlobsWithIaT} blobs have more than 3 accesses");
        Assert.True(s.MedianIaTCoV > 1, $"the median IaT CoV of blobs with more than 3 accesses is {s.MedianIaTCoV:f2}");
    }

    [Fact]
    public void A_rewritten_blob_gets_a_new_ETag_and_reads_see_the_version_last_written()
    {
        var lastWritten = new Dictionary<string, string>();
        var rewrites = 0;
        foreach (var a in SyntheticTrace.Generate(new SyntheticTraceOptions(Apps: 100, Accesses: 50_000, Seed: 11)))
        {
            if (a.Write && lastWritten.TryGetValue(a.Blob, out var before))
            {
                Assert.NotEqual(before, a.ETag);
                rewrites++;
            }
            if (a.Read && lastWritten.TryGetValue(a.Blob, out var current))
            {
                Assert.Equal(current, a.ETag);
            }
            if (a.Write)
            {
                lastWritten[a.Blob] = a.ETag;
            }
        }
        Assert.True(rewrites > 100, $"only {rewrites} blobs were rewritten");
    }
}

/// <summary>The statistics of Faa$T §2.1, measured on a trace the way the paper describes them.</summary>
public sealed record TraceStatistics(
    long Rows, double ReadShare, int Blobs, double BlobsUnder600B, double BlobsUnder12KB, double BlobsOver100MB, long LargestBlob,
    int AppsSeen, double AppsUnderOnePerMinute, double FastestToSlowestRate, double AppsReusingABlob, double AppsReusingABlobOver100Invocations,
    double AppsWithSeveralBlobsPerInvocation, double AppsWithMoreInvocationsThanBlobs, int BlobsWithIaT, double MedianIaTCoV, double SpanHours)
{
    private sealed class BlobState(long bytes)
    {
        public long Bytes { get; } = bytes;
        public string? LastInvocation { get; set; }
        public long LastMs { get; set; }
        public int Invocations { get; set; }
        public double IaTSum { get; set; }
        public double IaTSquares { get; set; }
    }

    private sealed class AppState
    {
        public HashSet<string> Invocations { get; } = [];
        public int Blobs { get; set; }
        public int MostInvocationsOfABlob { get; set; }
    }

    public static TraceStatistics Of(IEnumerable<TraceAccess> trace)
    {
        long rows = 0, reads = 0, first = long.MaxValue, last = long.MinValue;
        var blobs = new Dictionary<(string App, string Blob), BlobState>();
        var apps = new Dictionary<string, AppState>();
        foreach (var a in trace)
        {
            rows++;
            reads += a.Read ? 1 : 0;
            (first, last) = (Math.Min(first, a.TimestampMs), Math.Max(last, a.TimestampMs));
            if (!apps.TryGetValue(a.App, out var app))
            {
                apps[a.App] = app = new AppState();
            }
            app.Invocations.Add(a.Invocation);
            if (!blobs.TryGetValue((a.App, a.Blob), out var blob))
            {
                blobs[(a.App, a.Blob)] = blob = new BlobState(a.Bytes);
                app.Blobs++;
            }
            if (blob.LastInvocation == a.Invocation)
            {
                continue;
            }
            // §2.1 Fig. 3: the IaT of the invocations that accessed the blob.
            if (blob.Invocations > 0)
            {
                var iat = (double)(a.TimestampMs - blob.LastMs);
                blob.IaTSum += iat;
                blob.IaTSquares += iat * iat;
            }
            (blob.LastInvocation, blob.LastMs) = (a.Invocation, a.TimestampMs);
            blob.Invocations++;
            app.MostInvocationsOfABlob = Math.Max(app.MostInvocationsOfABlob, blob.Invocations);
        }
        var spanMinutes = Math.Max(1, last - first) / 60_000.0;
        var rates = apps.Values.Select(a => a.Invocations.Count / spanMinutes).ToList();
        var covs = blobs.Values.Where(b => b.Invocations > 3).Select(b =>
        {
            var n = b.Invocations - 1;
            var mean = b.IaTSum / n;
            var variance = Math.Max(0, b.IaTSquares / n - mean * mean);
            return mean > 0 ? Math.Sqrt(variance) / mean : 0;
        }).Order().ToList();
        double ShareOfBlobs(Func<long, bool> test) => blobs.Values.Count(b => test(b.Bytes)) / (double)blobs.Count;
        double ShareOfApps(Func<AppState, bool> test) => apps.Values.Count(test) / (double)apps.Count;
        return new TraceStatistics(
            rows, reads / (double)rows, blobs.Count, ShareOfBlobs(b => b < 600), ShareOfBlobs(b => b < 12 * 1024),
            ShareOfBlobs(b => b > 100L << 20), blobs.Values.Max(b => b.Bytes),
            apps.Count, rates.Count(r => r < 1) / (double)apps.Count, rates.Max() / rates.Min(),
            ShareOfApps(a => a.MostInvocationsOfABlob > 1), ShareOfApps(a => a.MostInvocationsOfABlob > 100),
            ShareOfApps(a => a.Invocations.Count < a.Blobs), ShareOfApps(a => a.Invocations.Count > a.Blobs),
            covs.Count, covs.Count == 0 ? 0 : covs[covs.Count / 2], (last - first) / 3_600_000.0);
    }
}
