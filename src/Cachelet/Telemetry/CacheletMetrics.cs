using System.Diagnostics;
using System.Diagnostics.Metrics;

namespace FaaST.Cachelet.Telemetry;

/// <summary>
/// The cachelet's OpenTelemetry instruments (System.Diagnostics.Metrics / ActivitySource: any
/// OpenTelemetry SDK listening to "FaaST.Cachelet" exports them).
/// </summary>
public sealed class CacheletMetrics : IDisposable
{
    public const string Name = "FaaST.Cachelet";

    /// <summary>One span per binding resolution ("cachelet.read", "cachelet.write").</summary>
    public static readonly ActivitySource Activities = new(Name);

    private static readonly KeyValuePair<string, object?>[][] PathTags = Enum.GetValues<ReadPath>()
        .Select(p => new[] { new KeyValuePair<string, object?>("path", PathName(p)) })
        .ToArray();

    private readonly Meter _meter;
    private readonly Counter<long> _reads;
    private readonly Counter<long> _readBytes;
    private readonly Counter<long> _writes;
    private readonly Counter<long> _writeBytes;
    private readonly Func<long> _evictionTotal;

    public CacheletMetrics(string app, Func<long> cachedBytes, Func<long> pinnedBytes, Func<long> objects, Func<long> evictions)
    {
        _evictionTotal = evictions;
        _meter = new Meter(Name, "1.0", [new KeyValuePair<string, object?>("app", app)]);
        _reads = _meter.CreateCounter<long>("faast.cachelet.reads", "{read}", "Blob binding reads by path (local_hit, local_miss, remote_hit, remote_miss, passthrough)");
        _readBytes = _meter.CreateCounter<long>("faast.cachelet.read.bytes", "By", "Bytes handed to functions by path");
        _writes = _meter.CreateCounter<long>("faast.cachelet.writes", "{write}", "Blob binding writes through the cache");
        _writeBytes = _meter.CreateCounter<long>("faast.cachelet.write.bytes", "By", "Bytes written through the cache");
        _meter.CreateObservableCounter("faast.cachelet.evictions", evictions, "{object}", "Objects evicted (by policy, TTL or the memory daemon)");
        _meter.CreateObservableGauge("faast.cachelet.cached.bytes", cachedBytes, "By", "Bytes held in the cache");
        _meter.CreateObservableGauge("faast.cachelet.pinned.bytes", pinnedBytes, "By", "Bytes pinned by running invocations");
        _meter.CreateObservableGauge("faast.cachelet.objects", objects, "{object}", "Objects in the cache");
    }

    // Plain totals beside the instruments, for /admin/cache and tests (no listener needed).
    private readonly long[] _readCounts = new long[Enum.GetValues<ReadPath>().Length];
    private long _writeCount;

    public void Read(ReadPath path, long bytes)
    {
        var tags = PathTags[(int)path];
        _reads.Add(1, tags);
        _readBytes.Add(bytes, tags);
        Interlocked.Increment(ref _readCounts[(int)path]);
    }

    public void Write(long bytes)
    {
        _writes.Add(1);
        _writeBytes.Add(bytes);
        Interlocked.Increment(ref _writeCount);
    }

    public long Reads(ReadPath path) => Interlocked.Read(ref _readCounts[(int)path]);

    public long Writes => Interlocked.Read(ref _writeCount);

    public long Evictions => _evictionTotal();

    public static string PathName(ReadPath path) => path switch
    {
        ReadPath.LocalHit => "local_hit",
        ReadPath.LocalMiss => "local_miss",
        ReadPath.RemoteHit => "remote_hit",
        ReadPath.RemoteMiss => "remote_miss",
        _ => "passthrough",
    };

    public void Dispose() => _meter.Dispose();
}
