using System.Text.Json;
using FaaST.Policy;

namespace FaaST.Runtime.Tests.Flash;

/// <summary>faast.json's <c>flash</c> section: defaults, ranges, the SLO's both-or-neither rule, the address's form, and
/// errors that name the file and the key.</summary>
public sealed class FlashPolicyFileTests
{
    private const string File = "app/faast.json";

    private static FlashPolicy ParseFlash(string members) =>
        CachePolicyFile.Parse("{ \"flash\": { " + members + " } }", File).Flash;

    private static void Fails(string members, string keyPath, params string[] reasonContains)
    {
        var e = Assert.Throws<PolicyFileException>(() => ParseFlash(members));
        Assert.Equal(File, e.FileName);
        Assert.Equal(keyPath, e.KeyPath);
        Assert.StartsWith($"{File}: {keyPath}: ", e.Message);
        foreach (var fragment in reasonContains)
            Assert.Contains(fragment, e.Reason);
    }

    [Fact]
    public void An_app_without_the_section_has_flash_off_with_the_documented_defaults()
    {
        var p = CachePolicyFile.Parse("{ \"cache\": { \"enabled\": true } }", File).Flash;

        Assert.Same(FlashPolicy.Default, p);
        Assert.False(p.Enabled);
        Assert.Null(p.Address);
        Assert.Null(p.IopsSlo);
        Assert.Null(p.P95LatencyUs);
        Assert.Null(p.ReadRatio);
        Assert.False(p.LatencyCritical);
        Assert.Equal(TimeSpan.FromMilliseconds(250), p.Timeout);
        Assert.Equal(TimeSpan.FromSeconds(5), p.RetryAfter);
        Assert.True(p.Demote);
        Assert.Equal(1024, p.MinDemoteBytes);
    }

    [Fact]
    public void A_full_section_is_read_key_by_key()
    {
        var p = ParseFlash("""
            "enabled": true, "address": "http://127.0.0.1:7300", "iopsSlo": 20000, "p95LatencyUs": 500, "readRatio": 0.9,
            "timeoutMs": 250, "retryAfterSeconds": 2, "demote": false, "minDemoteBytes": "64KiB"
            """);

        Assert.Equal(new FlashPolicy
        {
            Enabled = true,
            Address = new Uri("http://127.0.0.1:7300"),
            IopsSlo = 20000,
            P95LatencyUs = 500,
            ReadRatio = 0.9,
            Timeout = TimeSpan.FromMilliseconds(250),
            RetryAfter = TimeSpan.FromSeconds(2),
            Demote = false,
            MinDemoteBytes = 64 * 1024,
        }, p);
        Assert.True(p.LatencyCritical);
    }

    [Fact]
    public void A_section_that_sets_some_keys_keeps_the_rest_at_their_defaults()
    {
        var p = ParseFlash("\"enabled\": true");

        Assert.Equal(FlashPolicy.Default with { Enabled = true }, p);
    }

    [Theory]
    [InlineData("\"iopsSlo\": 1000", "flash.iopsSlo", "without flash.p95LatencyUs")]
    [InlineData("\"p95LatencyUs\": 200", "flash.p95LatencyUs", "without flash.iopsSlo")]
    public void An_slo_with_only_one_half_is_refused_naming_the_missing_one(string members, string key, string reason) =>
        Fails(members, key, reason, "both");

    [Theory]
    [InlineData("\"iopsSlo\": 0, \"p95LatencyUs\": 200", "flash.iopsSlo", "greater than 0")]
    [InlineData("\"iopsSlo\": 1000, \"p95LatencyUs\": 0", "flash.p95LatencyUs", "from 1 to 10000000")]
    [InlineData("\"readRatio\": 1.5", "flash.readRatio", "at most 1")]
    [InlineData("\"readRatio\": -0.1", "flash.readRatio", "at least 0")]
    [InlineData("\"timeoutMs\": 0", "flash.timeoutMs", "from 1 to 60000")]
    [InlineData("\"timeoutMs\": 2.5", "flash.timeoutMs", "not a whole number")]
    [InlineData("\"retryAfterSeconds\": 0", "flash.retryAfterSeconds", "from 1 to 3600")]
    [InlineData("\"minDemoteBytes\": \"2GiB\"", "flash.minDemoteBytes", "out of range")]
    [InlineData("\"enabled\": \"yes\"", "flash.enabled", "must be true or false")]
    [InlineData("\"demote\": 1", "flash.demote", "must be true or false")]
    [InlineData("\"adress\": \"http://127.0.0.1:1\"", "flash.adress", "unknown key", "Did you mean \"address\"?")]
    public void Out_of_range_and_mistyped_values_are_refused_naming_file_and_key(string members, string key, params string[] reason) =>
        Fails(members, key, reason);

    [Theory]
    [InlineData("127.0.0.1:7300")]
    [InlineData("tcp://127.0.0.1:7300")]
    [InlineData("http://127.0.0.1:7300/flash")]
    [InlineData("http://user:pw@127.0.0.1:7300")]
    [InlineData("")]
    public void An_address_that_is_not_a_bare_http_uri_is_refused(string address) =>
        Fails($"\"address\": {JsonSerializer.Serialize(address)}", "flash.address", "not a flash server address", "http://127.0.0.1:7300");

    [Fact]
    public void The_section_itself_must_be_an_object() =>
        Assert.Equal("flash", Assert.Throws<PolicyFileException>(() => CachePolicyFile.Parse("{ \"flash\": true }", File)).KeyPath);
}
