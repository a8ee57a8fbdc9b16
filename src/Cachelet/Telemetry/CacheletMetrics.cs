using System.Diagnostics;
using System.Diagnostics.Metrics;

namespace FaaST.Cachelet.Telemetry;

/// <summary>How a read was served (Faa$T's four read paths, plus reads the cache let through).</summary>
public enum ReadPath
{
    LocalHit,
    LocalMiss,
    RemoteHit,
    RemoteMiss,
    Passthrough,
}

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
    private readonly Counter<long> _evictions;
    private readonly Counter<long> _evictedBytes;

    public CacheletMetrics(string app, Func<long> cachedBytes, Func<long> pinnedBytes, Func<long> objects)
    {
        _meter = new Meter(Name, "1.0", [new KeyValuePair<string, object?>("app", app)]);
        _reads = _meter.CreateCounter<long>("faast.cachelet.reads", "{read}", "Blob binding reads by path (local_hit, local_miss, remote_hit, remote_miss, passthrough)");
        _readBytes = _meter.CreateCounter<long>("faast.cachelet.read.bytes", "By", "Bytes handed to functions by path");
        _writes = _meter.CreateCounter<long>("faast.cachelet.writes", "{write}", "Blob binding writes through the cache");
        _writeBytes = _meter.CreateCounter<long>("faast.cachelet.write.bytes", "By", "Bytes written through the cache");
        _evictions = _meter.CreateCounter<long>("faast.cachelet.evictions", "{object}", "Objects evicted");
        _evictedBytes = _meter.CreateCounter<long>("faast.cachelet.evicted.bytes", "By", "Bytes evicted");
        _meter.CreateObservableGauge("faast.cachelet.cached.bytes", cachedBytes, "By", "Bytes held in the cache");
        _meter.CreateObservableGauge("faast.cachelet.pinned.bytes", pinnedBytes, "By", "Bytes pinned by running invocations");
        _meter.CreateObservableGauge("faast.cachelet.objects", objects, "{object}", "Objects in the cache");
    }

    public void Read(ReadPath path, long bytes)
    {
        var tags = PathTags[(int)path];
        _reads.Add(1, tags);
        _readBytes.Add(bytes, tags);
    }

    public void Write(long bytes)
    {
        _writes.Add(1);
        _writeBytes.Add(bytes);
    }

    public void Evicted(int objects, long bytes)
    {
        _evictions.Add(objects);
        _evictedBytes.Add(bytes);
    }

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
