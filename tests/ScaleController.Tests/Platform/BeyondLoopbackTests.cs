using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using FaaST.Bench.Net;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Providers;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// A fact that builds network namespaces (bench/net/cloudnet.sh): skipped with the reason when the tests are not
/// root, iproute2 is missing, or this container does not permit namespaces (as the runtime tests' NamespacesFact).
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class NamespacesFactAttribute : FactAttribute
{
    private static readonly Lazy<CloudNetworkAvailability> Availability =
        new(() => CloudNetwork.AvailableAsync(Repo.Root).GetAwaiter().GetResult());

    public NamespacesFactAttribute()
    {
        if (!Environment.IsPrivilegedProcess)
            Skip = $"needs root (network namespaces); running as {Environment.UserName}";
        else if (!Availability.Value.IsAvailable)
            Skip = $"network namespaces cannot be built here: {Availability.Value.Reason}";
    }
}

/// <summary>
/// Issue 19, defect 8: a platform listening beyond loopback. It set FAAST_ENFORCE_KEYS=1 on its instances, which
/// the runtime took for neither true nor false, so no instance started at all. Here a real platform listens on the
/// benchmarks' namespace network (198.18.x) and a client in a namespace of its own calls it: the instance starts,
/// and keys are enforced for the traffic the frontend forwards from beyond loopback (it reaches the instance from
/// 127.0.0.1, where a host alone would not check keys).
/// </summary>
public sealed class BeyondLoopbackTests : IAsyncLifetime
{
    // Names and a subnet of this test run's own (CloudNetworkTests use 100-199 of the runtime tests' processes).
    private static readonly string Prefix = string.Create(CultureInfo.InvariantCulture, $"fcns{Environment.ProcessId % 10000}");
    private static readonly int Subnet = 200 + Environment.ProcessId % 50;

    private const string FunctionKey = "beyond-loopback-function-key-0123456789";

    private Storage.AzuriteProcess _azurite = null!;
    private readonly TempDirectory _state = new("faast-beyond-state-");
    private readonly TempDirectory _apps = new("faast-beyond-apps-");
    private readonly ConcurrentQueue<string> _output = new();

    public async Task InitializeAsync() => _azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);

    public async Task DisposeAsync()
    {
        await _azurite.DisposeAsync();
        _state.Dispose();
        _apps.Dispose();
    }

    private string Output => string.Join('\n', _output.TakeLast(60));

    /// <summary>samples/python-app with Hello at authLevel function and its keys in app settings (Kubernetes style).</summary>
    private string KeyedApp(string name)
    {
        var dir = Repo.CopySample("python-app", Path.Combine(_apps.Path, name));
        File.WriteAllText(Path.Combine(dir, "Hello", "function.json"), """
            { "scriptFile": "__init__.py", "bindings": [
              { "authLevel": "function", "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["get"] },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """);
        File.WriteAllText(Path.Combine(dir, "local.settings.json"), $$"""
            { "IsEncrypted": false, "Values": {
                "FUNCTIONS_WORKER_RUNTIME": "python",
                "AzureWebJobsStorage": "UseDevelopmentStorage=true",
                "AzureWebJobsSecretStorageType": "kubernetes",
                "host.master": "beyond-loopback-master-key-0123456789",
                "functions.Hello.default": "{{FunctionKey}}" } }
            """);
        return dir;
    }

    [NamespacesFact]
    public async Task A_platform_listening_on_a_network_address_starts_instances_and_a_remote_client_needs_the_function_key()
    {
        await using var network = await CloudNetwork.UpAsync(Repo.Root, 1, new CloudNetworkSettings { Prefix = Prefix, Subnet = Subnet });
        var listen = network.PlatformAddress.ToString();
        var provider = new LocalProcessProvider(new LocalProcessOptions
        {
            RuntimeDll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"),
            Output = (label, line) => _output.Enqueue($"[{label}] {line}"),
        });
        await using var platform = await PlatformHost.StartAsync(new PlatformOptions
        {
            ListenAddress = listen,
            Port = 0,
            StateDirectory = _state.Path,
            StorageConnectionString = _azurite.ConnectionString,
            DevelopmentStorage = true,
            InstanceArguments = ["--isolation", "off"],
            InstanceOutput = (label, line) => _output.Enqueue($"[{label}] {line}"),
        }, provider, logging: l => l.ClearProviders());
        Assert.Equal(listen, platform.Address.Host);

        using (var zip = new MemoryStream())
        {
            Packager.Zip(KeyedApp("keyed"), zip, includeSettings: true);
            zip.Position = 0;
            var deployment = await platform.DeployPackageAsync("keyed", zip, CancellationToken.None);
            Assert.Equal(1, deployment.Version);
        }

        var url = new Uri(platform.Address, "keyed/api/Hello?name=remote");
        var (status, body) = await CurlAsync(network, url, key: null);
        Assert.True(status == 401, $"without a key: {status} {body}\n{Output}");
        Assert.Contains("needs a key", body, StringComparison.Ordinal);
        Assert.Equal(401, (await CurlAsync(network, url, key: "not-the-key")).Status);
        (status, body) = await CurlAsync(network, url, FunctionKey);
        Assert.True(status == 200, $"with the key: {status} {body}\n{Output}");
        Assert.Equal("Hello, remote!", body);
    }

    /// <summary>curl inside the client namespace: the status and the body.</summary>
    private static async Task<(int Status, string Body)> CurlAsync(CloudNetwork network, Uri url, string? key)
    {
        var curl = new ProcessStartInfo("curl") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var arg in (string[])["-sS", "--max-time", "60", "--noproxy", "*", "-w", "\n%{http_code}"])
            curl.ArgumentList.Add(arg);
        if (key is not null)
            curl.ArgumentList.Add("-H");
        if (key is not null)
            curl.ArgumentList.Add("x-functions-key: " + key);
        curl.ArgumentList.Add(url.ToString());
        using var process = Process.Start(network.InNamespace(0, curl))!;
        var output = await process.StandardOutput.ReadToEndAsync();
        var error = await process.StandardError.ReadToEndAsync();
        await process.WaitForExitAsync();
        Assert.True(process.ExitCode == 0, $"curl {url} failed (exit {process.ExitCode}): {error}");
        var newline = output.LastIndexOf('\n');
        return (int.Parse(output[(newline + 1)..], CultureInfo.InvariantCulture), output[..newline]);
    }
}
