using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;

namespace FaaST.Runtime.Tests;

/// <summary>The host as `./faast start` runs it: its own process, stopped with SIGTERM.</summary>
[Collection("azurite")]
public sealed partial class ProcessTests(AzuriteFixture azurite)
{
    [Fact]
    public async Task The_host_process_serves_a_sample_and_stops_cleanly_on_sigterm()
    {
        // Under its own name: as root, the workers run as faast-python-app (one user, not one per run).
        using var app = TestApp.CopySample("python-app", keepName: true);
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("Hello, Process!", await host.Http.GetStringAsync("api/Hello?name=Process"));
        var status = await host.Http.GetHostStatusAsync();
        var workers = status.WorkerProcessIds;
        Assert.NotEmpty(workers);
        if (Environment.IsPrivilegedProcess)
            Assert.Equal("faast-python-app", status.Isolation.User);

        await host.StopAsync();
        foreach (var pid in workers)
            Assert.False(File.Exists($"/proc/{pid}/status") && !File.ReadAllText($"/proc/{pid}/status").Contains("zombie", StringComparison.Ordinal),
                $"worker {pid} outlived the host");
        Assert.Empty(Directory.GetDirectories("/dev/shm", $"faast-*-{host.ProcessId}"));
    }

    [Fact]
    public async Task In_a_memory_cgroup_the_cache_keeps_to_the_cgroups_limit()
    {
        if (!Environment.IsPrivilegedProcess)
            return; // making a cgroup takes root (CI runs as root)
        using var cgroup = TestCgroup.Create(768L << 20);
        using var app = TestApp.CopySample("python-app", keepName: true);
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "cache": { "memoryLimit": "4GiB" } }""");
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, cgroup.ProcsFile);

        var cache = await host.Http.GetCacheStatusAsync();
        Assert.Equal(768L << 20, cache.MemoryLimit);
        Assert.Equal("cgroup " + cgroup.LimitFile, cache.MemoryLimitSource);
        Assert.Contains(host.Output, line => line.Contains("cache.memoryLimit (4GiB) is more than the memory cgroup allows (768MiB", StringComparison.Ordinal));
        // The workers run in the same group, so its limit covers them and the cache together.
        var status = await host.Http.GetHostStatusAsync();
        foreach (var pid in status.WorkerProcessIds)
            Assert.Contains(pid.ToString(CultureInfo.InvariantCulture), File.ReadAllLines(cgroup.ProcsFile));
        Assert.Equal("Hello, Cgroup!", await host.Http.GetStringAsync("api/Hello?name=Cgroup"));
        await host.StopAsync();
    }

    /// <summary>FaaST.Runtime.dll as its own process, optionally started inside a cgroup.</summary>
    private sealed class HostProcess : IAsyncDisposable
    {
        private readonly Process _process;
        private readonly ConcurrentQueue<string> _output = new();

        private HostProcess(Process process) => _process = process;

        public HttpClient Http { get; private set; } = null!;

        public int ProcessId => _process.Id;

        public IReadOnlyCollection<string> Output => _output;

        public static async Task<HostProcess> StartAsync(string app, string storage, string? cgroupProcs = null)
        {
            var dll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");
            var info = new ProcessStartInfo(cgroupProcs is null ? "dotnet" : "sh") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
            if (cgroupProcs is not null)
            {
                // The shell joins the group, then becomes the host: the host and its workers start inside it.
                foreach (var a in new[] { "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroupProcs, "dotnet" })
                    info.ArgumentList.Add(a);
            }
            foreach (var a in new[] { dll, app, "--port", "0", "--azurite-in-memory" })
                info.ArgumentList.Add(a);
            info.Environment["FAAST_HOME"] = Repo.Root;
            info.Environment["AzureWebJobsStorage"] = storage;
            var host = new HostProcess(Process.Start(info)!);
            var address = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
            host._process.OutputDataReceived += (_, e) =>
            {
                if (e.Data is null)
                    return;
                host._output.Enqueue(e.Data);
                if (ListeningOn().Match(e.Data) is { Success: true } m)
                    address.TrySetResult(m.Groups[1].Value);
            };
            host._process.ErrorDataReceived += (_, e) => { if (e.Data is not null) host._output.Enqueue(e.Data); };
            host._process.BeginOutputReadLine();
            host._process.BeginErrorReadLine();
            var started = await Task.WhenAny(address.Task, host._process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(60)));
            if (started != address.Task)
            {
                await host.DisposeAsync();
                Assert.Fail("the host did not report its address:\n" + string.Join("\n", host._output));
            }
            host.Http = new HttpClient { BaseAddress = new Uri(await address.Task) };
            return host;
        }

        /// <summary>SIGTERM, as `./faast start` gets on Ctrl-C or from a supervisor; asserts a clean exit.</summary>
        public async Task StopAsync()
        {
            Process.Start("kill", ["-TERM", _process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
            await Task.WhenAny(_process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(30)));
            Assert.True(_process.HasExited, "the host did not stop on SIGTERM:\n" + string.Join("\n", _output));
            Assert.Equal(0, _process.ExitCode);
        }

        public async ValueTask DisposeAsync()
        {
            if (!_process.HasExited)
            {
                _process.Kill(entireProcessTree: true);
                await _process.WaitForExitAsync();
            }
            Http?.Dispose();
            _process.Dispose();
        }
    }

    /// <summary>A memory cgroup of its own with a limit: v1 (memory.limit_in_bytes) where the memory
    /// controller is mounted that way, else v2 (memory.max). Removed when disposed.</summary>
    private sealed class TestCgroup : IDisposable
    {
        private readonly string _directory;

        private TestCgroup(string directory, string limitFile)
        {
            _directory = directory;
            LimitFile = limitFile;
        }

        public string LimitFile { get; }

        public string ProcsFile => Path.Combine(_directory, "cgroup.procs");

        public static TestCgroup Create(long limit)
        {
            var name = "faast-test-" + Guid.NewGuid().ToString("N")[..8];
            string directory, file;
            if (File.Exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
                (directory, file) = (Path.Combine("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes");
            else if (File.Exists("/sys/fs/cgroup/cgroup.subtree_control") && File.ReadAllText("/sys/fs/cgroup/cgroup.subtree_control").Split(' ', '\n').Contains("memory"))
                (directory, file) = (Path.Combine("/sys/fs/cgroup", name), "memory.max");
            else
                throw new InvalidOperationException("no writable memory cgroup on this machine: neither /sys/fs/cgroup/memory (v1) nor a v2 root that delegates the memory controller");
            Directory.CreateDirectory(directory);
            var group = new TestCgroup(directory, Path.Combine(directory, file));
            File.WriteAllText(group.LimitFile, limit.ToString(CultureInfo.InvariantCulture));
            return group;
        }

        public void Dispose()
        {
            // rmdir, not a recursive delete: a cgroup's files go with it. Its last processes may take a moment to leave.
            for (var i = 0; i < 50 && Directory.Exists(_directory); i++)
            {
                try
                {
                    Directory.Delete(_directory);
                }
                catch (IOException)
                {
                    Thread.Sleep(100);
                }
            }
        }
    }

    [GeneratedRegex(@"listening on (http://127\.0\.0\.1:\d+/?)")]
    private static partial Regex ListeningOn();
}
