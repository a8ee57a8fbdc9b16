using System.Globalization;

namespace FaaST.Runtime.Tests;

/// <summary>The host as `./faast start` runs it: its own process, stopped with SIGTERM.</summary>
[Collection("azurite")]
public sealed class ProcessTests(AzuriteFixture azurite)
{
    [Fact]
    public async Task The_host_process_serves_a_sample_and_stops_cleanly_on_sigterm()
    {
        // Under its own name: as root, the workers run as faast-python-app (one user, not one per run).
        using var app = TestApp.CopySample("python-app", keepName: true);
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--azurite-in-memory"]);
        Assert.Equal("Hello, Process!", await host.Http.GetStringAsync("api/Hello?name=Process"));
        var status = await host.Http.GetHostStatusAsync();
        var workers = status.WorkerProcessIds;
        Assert.NotEmpty(workers);
        if (Environment.IsPrivilegedProcess && Isolation.Unreachable is null)
            Assert.Equal("faast-python-app", status.Isolation.User);
        else
            Assert.NotNull(status.Isolation.Reason); // the workers run as the host's user, and the status says why

        await host.StopAsync();
        foreach (var pid in workers)
            Assert.False(File.Exists($"/proc/{pid}/status") && !File.ReadAllText($"/proc/{pid}/status").Contains("zombie", StringComparison.Ordinal),
                $"worker {pid} outlived the host");
        Assert.Empty(Directory.GetDirectories("/dev/shm", $"faast-*-{host.ProcessId}"));
    }

    [RootFact("making a cgroup")]
    public async Task In_a_memory_cgroup_the_cache_keeps_to_the_cgroups_limit()
    {
        using var cgroup = TestCgroup.Create(768L << 20);
        using var app = TestApp.CopySample("python-app", keepName: true);
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "cache": { "memoryLimit": "4GiB" } }""");
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--azurite-in-memory"], cgroup.ProcsFile);

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
}
