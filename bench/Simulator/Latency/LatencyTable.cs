using System.Globalization;
using System.Text.Json.Nodes;

namespace FaaST.Simulator.Latency;

/// <summary>The kinds of access whose latency by object size the simulation needs.</summary>
public enum LatencyKind
{
    /// <summary>A whole-blob GET from storage (a miss, and every read of the storage-only baseline).</summary>
    StorageRead,
    /// <summary>A whole-blob PUT to storage.</summary>
    StorageWrite,
    /// <summary>A read of an object the instance's own cachelet holds.</summary>
    LocalHitRead,
    /// <summary>Putting an object into the cachelet.</summary>
    CacheWrite,
}

/// <summary>
/// p50 latencies by object size, as <c>./faast bench latency</c> measured them on this implementation (Faa$T §6.2 did
/// the same for 1 B to 2 GB), interpolated between the measured sizes: linearly in log(size)/log(latency) between two
/// points, flat below the smallest size, and beyond the largest by the bandwidth of the last two points (a large
/// transfer costs its bytes). A version check (storage/sync/storage's read) costs a 1-byte storage read: both are one
/// round trip with no payload.
/// </summary>
public sealed class LatencyTable
{
    private static readonly string[] Prefixes = ["storage_read_p50_ms_", "storage_write_p50_ms_", "local_hit_read_p50_ms_", "cache_write_p50_ms_"];
    private readonly (double[] Sizes, double[] Ms)[] _curves;

    public LatencyTable(IReadOnlyDictionary<LatencyKind, IReadOnlyList<(long Bytes, double Ms)>> points, string source)
    {
        ArgumentNullException.ThrowIfNull(points);
        Source = source;
        _curves = new (double[], double[])[Prefixes.Length];
        foreach (var kind in Enum.GetValues<LatencyKind>())
        {
            if (!points.TryGetValue(kind, out var list) || list.Count == 0)
                throw new FormatException($"{source}: no {Prefixes[(int)kind]}<bytes> measurements");
            var sorted = list.OrderBy(p => p.Bytes).ToArray();
            foreach (var (bytes, ms) in sorted)
            {
                if (bytes <= 0 || !(ms > 0) || double.IsInfinity(ms))
                    throw new FormatException($"{source}: {Prefixes[(int)kind]}{bytes} = {ms} is not a positive latency of a positive size");
            }
            _curves[(int)kind] = (sorted.Select(p => (double)p.Bytes).ToArray(), sorted.Select(p => p.Ms).ToArray());
        }
    }

    /// <summary>Where the measurements came from (a file, and whether the network was shaped).</summary>
    public string Source { get; }

    /// <summary>The latency of one access of <paramref name="kind"/> to an object of <paramref name="bytes"/>.</summary>
    public double Ms(LatencyKind kind, long bytes)
    {
        var (sizes, ms) = _curves[(int)kind];
        double x = Math.Max(bytes, 1);
        if (x <= sizes[0])
            return ms[0];
        var last = sizes.Length - 1;
        if (x >= sizes[last])
        {
            if (last == 0)
                return ms[0];
            // Past the largest measured size the transfer dominates: extend by the last segment's ms per byte.
            var perByte = Math.Max(0, (ms[last] - ms[last - 1]) / (sizes[last] - sizes[last - 1]));
            return ms[last] + (x - sizes[last]) * perByte;
        }
        var i = Array.BinarySearch(sizes, x);
        if (i >= 0)
            return ms[i];
        i = ~i; // sizes[i-1] < x < sizes[i]
        var t = (Math.Log(x) - Math.Log(sizes[i - 1])) / (Math.Log(sizes[i]) - Math.Log(sizes[i - 1]));
        return Math.Exp(Math.Log(ms[i - 1]) + t * (Math.Log(ms[i]) - Math.Log(ms[i - 1])));
    }

    /// <summary>
    /// Reads the <c>metrics</c> of a <c>./faast bench latency</c> result: keys <c>storage_read_p50_ms_BYTES</c>,
    /// <c>storage_write_p50_ms_BYTES</c>, <c>local_hit_read_p50_ms_BYTES</c>, <c>cache_write_p50_ms_BYTES</c>.
    /// </summary>
    public static LatencyTable Load(string path)
    {
        if (!File.Exists(path))
            throw new FileNotFoundException($"{path}: no latency table; run ./faast bench latency first", path);
        JsonNode? doc;
        try
        {
            doc = JsonNode.Parse(File.ReadAllText(path));
        }
        catch (System.Text.Json.JsonException e)
        {
            throw new FormatException($"{path}: not JSON ({e.Message})", e);
        }
        if (doc?["metrics"] is not JsonObject metrics)
            throw new FormatException($"{path}: no \"metrics\" object");
        var points = new Dictionary<LatencyKind, IReadOnlyList<(long, double)>>();
        for (var k = 0; k < Prefixes.Length; k++)
        {
            var list = new List<(long, double)>();
            foreach (var (key, value) in metrics)
            {
                if (!key.StartsWith(Prefixes[k], StringComparison.Ordinal))
                    continue;
                if (!long.TryParse(key.AsSpan(Prefixes[k].Length), NumberStyles.None, CultureInfo.InvariantCulture, out var bytes))
                    throw new FormatException($"{path}: metric \"{key}\" does not end in a size in bytes");
                if (value is not JsonValue v || !v.TryGetValue<double>(out var ms))
                    throw new FormatException($"{path}: metric \"{key}\" is not a number");
                list.Add((bytes, ms));
            }
            points[(LatencyKind)k] = list;
        }
        var shaped = doc["config"]?["network_shaped"] is JsonValue s && s.TryGetValue<bool>(out var b) ? b : (bool?)null;
        return new LatencyTable(points, shaped is null ? path : $"{path} ({(shaped.Value ? "shaped network" : "loopback, unshaped")})");
    }
}
