using FaaST.Peers;
using FaaST.Policy;
using FaaST.Runtime.Hosting;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>One record per concern, resolved and checked in one place before anything starts.</summary>
public sealed class HostOptionsTests
{
    private static HostOptions Resolve(TestApp app, Func<RuntimeHostOptions, RuntimeHostOptions>? configure = null)
    {
        var options = new RuntimeHostOptions
        {
            AppDirectory = app.Directory,
            HomeDirectory = Repo.Root,
            Isolation = IsolationMode.Off,
            Environment = new System.Collections.Hashtable(),
        };
        options = configure?.Invoke(options) ?? options;
        return HostOptions.Resolve(options, FunctionApp.Load(app.Directory, options.Environment), NullLogger.Instance);
    }

    private static TestApp App() => new TestApp("python").Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'hi'\n"));

    [Fact]
    public void The_peer_timeouts_the_peers_component_reads_are_faast_jsons_and_its_defaults_are_the_transports()
    {
        using var app = App();
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "cache": { "peerTimeout": "00:00:00.750", "peerFetchTimeout": "00:20:00" } }""");
        var set = Resolve(app).Peers;
        Assert.Equal(TimeSpan.FromMilliseconds(750), set.Timeout);
        Assert.Equal(TimeSpan.FromMinutes(20), set.FetchTimeout);

        File.Delete(Path.Combine(app.Directory, "faast.json"));
        var defaults = Resolve(app).Peers;
        Assert.Equal(CachePolicy.DefaultPeerTimeout, defaults.Timeout);
        Assert.Equal(CachePolicy.DefaultPeerFetchTimeout, defaults.FetchTimeout);
        var transport = new PeerOptions { Credentials = new PeerAuth("secret"u8, "app") };
        Assert.Equal(defaults.Timeout, transport.Timeout);
        Assert.Equal(defaults.FetchTimeout, transport.FetchTimeout);
    }

    [Fact]
    public void Each_concern_gets_the_command_lines_values_and_the_documented_defaults()
    {
        using var app = App();
        var defaults = Resolve(app);
        Assert.Equal(ServingOptions.DefaultHttpPort, defaults.Serving.HttpPort);
        Assert.Equal(ServingOptions.DefaultDrainTimeout, defaults.Serving.DrainTimeout);
        Assert.Equal(System.Net.IPAddress.Loopback, defaults.Serving.ListenAddress);
        Assert.Equal(1, defaults.Workers.ProcessCount);
        Assert.True(defaults.Cache.Policy.Enabled);
        Assert.True(defaults.Peers.Enabled);
        Assert.Equal(defaults.Serving.ListenAddress, defaults.Peers.ListenAddress);

        var set = Resolve(app, o => o with { HttpPort = 0, WorkerProcessCount = 3, DrainTimeout = TimeSpan.FromSeconds(30), PeerListenAddress = "127.0.0.2", PeerPort = 7100 });
        Assert.Equal(0, set.Serving.HttpPort);
        Assert.Equal(3, set.Workers.ProcessCount);
        Assert.Equal(TimeSpan.FromSeconds(30), set.Serving.DrainTimeout);
        Assert.Equal(System.Net.IPAddress.Parse("127.0.0.2"), set.Peers.ListenAddress);
        Assert.Equal(7100, set.Peers.Port);
    }

    [Fact]
    public void Without_the_cache_there_are_no_peers()
    {
        using var app = App();
        var options = Resolve(app, o => o with { CacheEnabled = false });
        Assert.False(options.Cache.Policy.Enabled);
        Assert.False(options.Peers.Enabled);
    }

    [Theory]
    [InlineData("HttpPort", "70000")]
    [InlineData("PeerPort", "-1")]
    [InlineData("ListenAddress", "localhost")]
    [InlineData("PeerListenAddress", "10.0.0.300")]
    [InlineData("DrainTimeout", "00:00:00")]
    [InlineData("WorkerProcessCount", "65")]
    public void A_bad_option_is_an_error_naming_the_option_and_the_value(string option, string value)
    {
        using var app = App();
        var e = Assert.Throws<ArgumentException>(() => Resolve(app, o => option switch
        {
            "HttpPort" => o with { HttpPort = int.Parse(value, System.Globalization.CultureInfo.InvariantCulture) },
            "PeerPort" => o with { PeerPort = int.Parse(value, System.Globalization.CultureInfo.InvariantCulture) },
            "ListenAddress" => o with { ListenAddress = value },
            "PeerListenAddress" => o with { PeerListenAddress = value },
            "DrainTimeout" => o with { DrainTimeout = TimeSpan.Parse(value, System.Globalization.CultureInfo.InvariantCulture) },
            _ => o with { WorkerProcessCount = int.Parse(value, System.Globalization.CultureInfo.InvariantCulture) },
        }));
        Assert.Contains("RuntimeHostOptions." + option, e.Message, StringComparison.Ordinal);
        Assert.Contains(value, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_bad_faast_json_is_an_app_error_naming_the_file()
    {
        using var app = App();
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "cache": { "peerTimeout": "soon" } }""");
        var e = Assert.Throws<AppConfigException>(() => Resolve(app));
        Assert.Contains("faast.json", e.Message, StringComparison.Ordinal);
        Assert.Contains("peerTimeout", e.Message, StringComparison.Ordinal);
    }
}
