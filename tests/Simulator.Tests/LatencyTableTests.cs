using FaaST.Simulator.Latency;

namespace FaaST.Simulator.Tests;

/// <summary>The latency table: read from a bench result, interpolated between sizes, refused with the key named.</summary>
public sealed class LatencyTableTests : IDisposable
{
    private readonly string _dir = Directory.CreateTempSubdirectory("faast-latency-").FullName;

    public void Dispose() => Directory.Delete(_dir, recursive: true);

    private string File(string json)
    {
        var path = Path.Combine(_dir, "latency.json");
        System.IO.File.WriteAllText(path, json);
        return path;
    }

    private const string Good = """
        { "scenario": "latency", "config": { "network_shaped": true },
          "metrics": { "storage_read_p50_ms_1": 1.0, "storage_read_p50_ms_1000000": 100.0, "storage_read_p99_ms_1": 9.0,
                       "storage_write_p50_ms_1": 2.0, "storage_write_p50_ms_1000000": 40.0,
                       "local_hit_read_p50_ms_1": 0.01, "local_hit_read_p50_ms_1000000": 0.2,
                       "cache_write_p50_ms_1": 0.02, "cache_write_p50_ms_1000000": 0.5 } }
        """;

    [Fact]
    public void Sizes_between_two_measured_ones_are_interpolated_in_log_log_and_the_p99s_are_not_taken_for_p50s()
    {
        var table = LatencyTable.Load(File(Good));

        Assert.Equal(1.0, table.Ms(LatencyKind.StorageRead, 1), 9);
        Assert.Equal(100.0, table.Ms(LatencyKind.StorageRead, 1_000_000), 9);
        // 1 000 is halfway between 1 and 10^6 in log size: halfway between 1 and 100 ms in log latency is 10 ms.
        Assert.Equal(10.0, table.Ms(LatencyKind.StorageRead, 1000), 6);
        Assert.Contains("shaped network", table.Source, StringComparison.Ordinal);
    }

    [Fact]
    public void Below_the_smallest_size_the_latency_is_flat_and_beyond_the_largest_it_grows_by_the_last_segments_bandwidth()
    {
        var table = LatencyTable.Load(File(Good));

        Assert.Equal(0.01, table.Ms(LatencyKind.LocalHitRead, 0), 9);
        // The last segment: 99 ms over 999 999 bytes; 10^6 bytes more cost 99.0001 ms more.
        var perByte = 99.0 / 999_999;
        Assert.Equal(100.0 + 1_000_000 * perByte, table.Ms(LatencyKind.StorageRead, 2_000_000), 6);
    }

    [Fact]
    public void A_table_without_one_of_the_kinds_is_refused_naming_the_file_and_the_missing_kind()
    {
        var path = File("""{ "metrics": { "storage_read_p50_ms_1": 1.0, "storage_write_p50_ms_1": 1.0, "local_hit_read_p50_ms_1": 1.0 } }""");

        var e = Assert.Throws<FormatException>(() => LatencyTable.Load(path));

        Assert.Contains(path, e.Message, StringComparison.Ordinal);
        Assert.Contains("cache_write_p50_ms_", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_key_without_a_size_or_a_value_that_is_not_a_positive_number_is_refused_naming_it()
    {
        var noSize = Assert.Throws<FormatException>(() => LatencyTable.Load(File("""{ "metrics": { "storage_read_p50_ms_big": 1.0 } }""")));
        Assert.Contains("storage_read_p50_ms_big", noSize.Message, StringComparison.Ordinal);

        var negative = Assert.Throws<FormatException>(() => LatencyTable.Load(File(Good.Replace("\"cache_write_p50_ms_1\": 0.02", "\"cache_write_p50_ms_1\": -1", StringComparison.Ordinal))));
        Assert.Contains("cache_write_p50_ms_1", negative.Message, StringComparison.Ordinal);

        var text = Assert.Throws<FormatException>(() => LatencyTable.Load(File(Good.Replace("100.0", "\"fast\"", StringComparison.Ordinal))));
        Assert.Contains("storage_read_p50_ms_1000000", text.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_missing_table_says_how_to_make_one()
    {
        var e = Assert.Throws<FileNotFoundException>(() => LatencyTable.Load(Path.Combine(_dir, "none.json")));

        Assert.Contains("./faast bench latency", e.Message, StringComparison.Ordinal);
    }
}
