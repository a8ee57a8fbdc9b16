using System.Diagnostics;
using FaaST.Hosting.Status;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Per-app worker users: real hosts as root (as the suites run), real workers, real /dev/shm. The
/// apps have fixed names (isoa, isob, isolocked), so repeated runs reuse their three users.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class IsolationTests(AzuriteFixture azurite)
{
    private const string PyRead = """
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            return func.HttpResponse(str(len(inblob.read())))
        """;

    private const string WriteJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"], "route": "write/{name}" },
          { "type": "blob", "direction": "out", "name": "outblob", "path": "data/{name}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string PyWrite = """
        import azure.functions as func
        def main(req: func.HttpRequest, outblob: func.Out[bytes]) -> func.HttpResponse:
            outblob.set(req.get_body())
            return func.HttpResponse("written")
        """;

    /// <summary>Opens ?path= for reading: "ok", or the errno's name.</summary>
    private const string PyProbe = """
        import errno, os
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            try:
                os.close(os.open(req.params["path"], os.O_RDONLY))
                return func.HttpResponse("ok")
            except OSError as e:
                return func.HttpResponse(errno.errorcode.get(e.errno, str(e.errno)))
        """;

    private static TestApp App(string? name = null) => new TestApp("python", name: name)
        .Function("Read", TestApp.BlobReadJson("data"), ("__init__.py", PyRead))
        .Function("Write", WriteJson, ("__init__.py", PyWrite))
        .Function("Probe", TestApp.HttpFunctionJson, ("__init__.py", PyProbe));

    /// <summary>A host whose workers run as the app's own user (faast-NAME), not the suites' shared one.</summary>
    private Task<HostUnderTest> StartAsync(TestApp app, IsolationMode mode = IsolationMode.Auto) =>
        HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, configure: o => o with { WorkerUser = null, Isolation = mode });

    private static Task<HostStatus> Status(HostUnderTest host) => host.Http.GetHostStatusAsync();

    private static int[] WorkerPids(HostStatus status) => [.. status.WorkerProcessIds];

    /// <summary>The real, effective, saved and file-system ids of a process ("Uid:" or "Gid:" of /proc/PID/status).</summary>
    private static string[] Ids(int pid, string line) =>
        File.ReadLines($"/proc/{pid}/status").First(l => l.StartsWith(line, StringComparison.Ordinal))
            .Split((char[]?)null, StringSplitOptions.RemoveEmptyEntries)[1..];

    /// <summary>"uid:gid mode" of a file, as stat(1) prints it.</summary>
    private static string Stat(string path)
    {
        using var stat = Process.Start(new ProcessStartInfo("stat", ["-c", "%u:%g %a", path]) { RedirectStandardOutput = true })!;
        var output = stat.StandardOutput.ReadToEnd().Trim();
        stat.WaitForExit();
        return output;
    }

    private static async Task Put(HostUnderTest host, string name, int size)
    {
        await host.Blobs!.CreateContainerIfNotExistsAsync("data");
        await host.Blobs.UploadAsync("data", name, new byte[size]);
    }

    private static Task<string> Probe(HostUnderTest host, string path) =>
        host.Http.GetStringAsync("/api/Probe?path=" + Uri.EscapeDataString(path));

    [IsolationFact]
    public async Task Workers_run_as_the_apps_user_which_owns_the_segment_directory_and_its_files()
    {
        using var app = App("isoa");
        await using var host = await StartAsync(app);
        var status = await Status(host);
        var isolation = status.Isolation;
        Assert.Equal("faast-isoa", isolation.User);
        var uid = isolation.Uid!.Value;
        var gid = isolation.Gid!.Value;
        Assert.NotEqual(0, uid);
        Assert.All(WorkerPids(status), pid =>
        {
            Assert.All(Ids(pid, "Uid:"), id => Assert.Equal(uid.ToString(System.Globalization.CultureInfo.InvariantCulture), id));
            Assert.All(Ids(pid, "Gid:"), id => Assert.Equal(gid.ToString(System.Globalization.CultureInfo.InvariantCulture), id));
        });

        // A slab segment (100 KB), a large file (1 MiB) and a worker's adopted output (1 MiB).
        await Put(host, "small", 100_000);
        await Put(host, "large", 1 << 20);
        Assert.Equal("100000", await host.Http.GetStringAsync("/api/read/small"));
        Assert.Equal("1048576", await host.Http.GetStringAsync("/api/read/large"));
        using (var body = new ByteArrayContent(new byte[1 << 20]))
            Assert.Equal("written", await (await host.Http.PostAsync("/api/write/out", body)).Content.ReadAsStringAsync());

        var directory = host.Host.Cache!.Directory;
        Assert.Equal($"{uid}:{gid} 700", Stat(directory));
        var files = Directory.GetFiles(directory);
        // The adopted output now has an arena name (l...) like the large object: the cache owns it.
        Assert.Equal(["l", "l", "s"], files.Select(f => Path.GetFileName(f)[..1]).Order());
        Assert.All(files, f => Assert.Equal($"{uid}:{gid} 600", Stat(f)));
    }

    [IsolationFact]
    public async Task Another_apps_worker_cannot_open_this_apps_segments()
    {
        using var appA = App("isoa");
        using var appB = App("isob");
        await using var hostA = await StartAsync(appA);
        await using var hostB = await StartAsync(appB);
        var userA = (await Status(hostA)).Isolation;
        var userB = (await Status(hostB)).Isolation;
        Assert.Equal("faast-isob", userB.User);
        Assert.NotNull(userA.Uid);
        Assert.NotEqual(userA.Uid, userB.Uid);

        await Put(hostA, "secret", 100_000);
        Assert.Equal("100000", await hostA.Http.GetStringAsync("/api/read/secret"));
        var segment = Directory.GetFiles(hostA.Host.Cache!.Directory).Single();

        Assert.Equal("ok", await Probe(hostA, segment));
        Assert.Equal("EACCES", await Probe(hostB, segment));
    }

    [Fact]
    public async Task With_isolation_off_workers_run_as_the_hosts_user()
    {
        using var app = App();
        await using var host = await StartAsync(app, IsolationMode.Off);
        var status = await Status(host);
        var isolation = status.Isolation;
        Assert.Equal(IsolationStatus.None, isolation.User);
        Assert.Contains("off", isolation.Reason, StringComparison.Ordinal);
        Assert.All(WorkerPids(status), pid => Assert.All(Ids(pid, "Uid:"), id => Assert.Equal("0", id)));
        Assert.Equal("0:0 700", Stat(host.Host.Cache!.Directory));
    }

    [Fact]
    public void The_isolation_flag_takes_auto_required_or_off()
    {
        Assert.Equal(IsolationMode.Auto, Program.ParseArguments(["app"]).Isolation);
        Assert.Equal(IsolationMode.Required, Program.ParseArguments(["app", "--isolation", "required"]).Isolation);
        Assert.Equal(IsolationMode.Off, Program.ParseArguments(["app", "--isolation", "off"]).Isolation);
        var e = Assert.Throws<ArgumentException>(() => Program.ParseArguments(["app", "--isolation", "maybe"]));
        Assert.Contains("auto, required or off", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_app_its_user_cannot_read_runs_without_isolation_in_auto_and_does_not_start_when_required()
    {
        using var app = App("isolocked");
        File.SetUnixFileMode(app.Directory, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);

        await using (var host = await StartAsync(app))
        {
            var status = await Status(host);
            var isolation = status.Isolation;
            Assert.Equal(IsolationStatus.None, isolation.User);
            Assert.Contains(app.Directory, isolation.Reason, StringComparison.Ordinal);
            Assert.Single(host.Logs.Lines, l => l.StartsWith("Warning", StringComparison.Ordinal)
                && l.Contains($"faast-isolocked cannot read {app.Directory}", StringComparison.Ordinal)
                && l.Contains("without isolation", StringComparison.Ordinal));
            Assert.All(WorkerPids(status), pid => Assert.All(Ids(pid, "Uid:"), id => Assert.Equal("0", id)));
            Assert.Equal("ok", await Probe(host, Path.Combine(app.Directory, "host.json")));
        }

        var e = await Assert.ThrowsAsync<AppConfigException>(() => StartAsync(app, IsolationMode.Required));
        Assert.Contains("--isolation required", e.Message, StringComparison.Ordinal);
        Assert.Contains($"cannot read {app.Directory}", e.Message, StringComparison.Ordinal);
    }
}
