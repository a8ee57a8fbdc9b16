using System.Net;
using System.Text.Json;
using FaaST.Hosting;
using FaaST.Hosting.Status;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>The real host's lifecycle: what a participant sees, how it drains, how it stops its background work.</summary>
[Collection("azurite")]
[System.Runtime.Versioning.SupportedOSPlatform("linux")]
public sealed class HostLifecycleTests(AzuriteFixture azurite)
{
    private static TestApp HelloApp(Dictionary<string, string>? settings = null) => new TestApp("python", settings: settings)
        .Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'hello'\n"));

    private static bool Running(int pid) =>
        File.Exists($"/proc/{pid}/status") && !File.ReadAllText($"/proc/{pid}/status").Contains("zombie", StringComparison.Ordinal);

    /// <summary>A later component, as a scale controller or prewarm would join: it watches states and a stage just above the workers.</summary>
    private sealed class Probe : ILifecycleParticipant
    {
        private readonly List<string> _seen = [];

        public IReadOnlyList<int> Workers { get; set; } = [];

        public IReadOnlyList<string> Seen
        {
            get
            {
                lock (_seen)
                    return _seen.ToArray();
            }
        }

        private void Record(string what)
        {
            var workers = Workers.Count == 0 ? "no workers known" : Workers.All(Running) ? "workers running" : "workers gone";
            lock (_seen)
                _seen.Add($"{what} ({workers})");
        }

        public void Participate(IHostLifecycle lifecycle)
        {
            lifecycle.OnState((state, _) =>
            {
                Record(state.ToString());
                return Task.CompletedTask;
            });
            lifecycle.Subscribe("probe", ServiceLifecycleStage.Workers + 1, new LifecycleObserver(
                _ => Task.CompletedTask,
                _ =>
                {
                    Record("stage above the workers stops");
                    return Task.CompletedTask;
                }));
        }
    }

    [Fact]
    public async Task A_participant_sees_started_draining_unloading_and_stopped_in_order_and_draining_comes_before_the_workers_stop()
    {
        using var app = HelloApp();
        var probe = new Probe();
        var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, configure: o => o with { Participants = [probe] });
        Assert.Equal("hello", await host.Http.GetStringAsync("/api/Hello"));
        probe.Workers = host.Host.WorkerProcessIds;
        Assert.NotEmpty(probe.Workers);

        await host.DisposeAsync();

        Assert.Equal(
        [
            "Started (no workers known)",
            "Draining (workers running)",
            "Unloading (workers running)",
            "stage above the workers stops (workers running)",
            "Stopped (workers gone)",
        ], probe.Seen);
    }

    [Fact]
    public async Task A_draining_host_finishes_the_requests_in_flight_and_answers_new_ones_with_503()
    {
        // The slow function says when it runs and waits for the test's word (files in a folder its user may write).
        var markers = Directory.CreateTempSubdirectory("faast-drain-");
        File.SetUnixFileMode(markers.FullName, (UnixFileMode)0b111_111_111);
        try
        {
            using var app = HelloApp(new() { ["MARKERS"] = markers.FullName }).Function("Slow", TestApp.HttpFunctionJson, ("__init__.py", """
                import os, time
                def main(req):
                    d = os.environ['MARKERS']
                    open(os.path.join(d, 'started'), 'w').close()
                    for _ in range(600):
                        if os.path.exists(os.path.join(d, 'go')):
                            return 'done'
                        time.sleep(0.05)
                    return 'never told to go'
                """));
            await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
            using var other = new HttpClient { BaseAddress = host.Host.BaseAddress };
            var slow = host.Http.GetAsync("/api/Slow");
            await Eventually.TrueAsync(() => Task.FromResult(File.Exists(Path.Combine(markers.FullName, "started"))), "the slow function to start");

            var stopping = host.Host.DisposeAsync().AsTask();
            HttpResponseMessage? refused = null;
            await Eventually.TrueAsync(async () =>
            {
                var response = await other.GetAsync("/api/Hello");
                if (response.StatusCode != HttpStatusCode.ServiceUnavailable)
                    return false;
                refused = response;
                return true;
            }, "a new request to be refused while the host drains");
            Assert.False(slow.IsCompleted, "the request in flight was cut off instead of finishing");
            Assert.Equal("1", refused!.Headers.GetValues("Retry-After").Single());
            Assert.Equal(LifecycleState.Draining, host.Host.Lifecycle.State);

            File.Create(Path.Combine(markers.FullName, "go")).Dispose();
            var finished = await slow;
            Assert.Equal(HttpStatusCode.OK, finished.StatusCode);
            Assert.Equal("done", await finished.Content.ReadAsStringAsync());
            await stopping;
            Assert.Equal(LifecycleState.Stopped, host.Host.Lifecycle.State);
        }
        finally
        {
            markers.Delete(recursive: true);
        }
    }

    [Fact]
    public async Task The_status_endpoints_answer_the_typed_contract_in_camel_case_with_the_lifecycle_by_name()
    {
        using var app = HelloApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        using var raw = JsonDocument.Parse(await host.Http.GetStringAsync("/admin/host/status"));
        Assert.Equal(
            ["state", "lifecycle", "workerRuntime", "readyWorkers", "hostProcessId", "workerProcessIds", "isolation", "instance", "members", "functions", "indexError"],
            raw.RootElement.EnumerateObject().Select(p => p.Name));
        Assert.Equal("Started", raw.RootElement.GetProperty("lifecycle").GetString());

        var status = await host.Http.GetHostStatusAsync();
        Assert.Equal(HostStatus.Running, status.State);
        Assert.Equal(LifecycleState.Started, status.Lifecycle);
        Assert.Equal(Environment.ProcessId, status.HostProcessId);
        Assert.Equal(host.Host.WorkerProcessIds, status.WorkerProcessIds);
        Assert.Equal(new FunctionStatus("Hello", "httpTrigger", false, null, null), Assert.Single(status.Functions));
        // With the cache on and storage up, the instance has joined its (one-member) view.
        Assert.Equal(host.Host.Self!.Id, status.Instance!.Id);
        Assert.Equal(LifecycleState.Started, status.Instance.Lifecycle);
        Assert.Equal(status.Instance.Id, Assert.Single(status.Members).Id);

        var cache = await host.Http.GetCacheStatusAsync();
        Assert.True(cache.Enabled);
        Assert.Equal(host.Host.Cache!.Directory, cache.Directory);
        Assert.Contains("local_hit", cache.Reads.Keys);
    }

    [Fact]
    public async Task A_host_whose_http_port_is_taken_fails_with_the_address_in_use_error_and_stops_what_it_had_started()
    {
        using var taken = new System.Net.Sockets.TcpListener(IPAddress.Loopback, 0);
        taken.Start();
        var port = ((IPEndPoint)taken.LocalEndpoint).Port;
        var name = "portclash-" + Guid.NewGuid().ToString("N")[..8];
        using var app = new TestApp("python", name: name).Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'hello'\n"));
        // The Azurite the host starts (no storage configured) is told apart from others by its data folder.
        var data = Directory.CreateTempSubdirectory("faast-clash-azurite-");
        try
        {
            var e = await Assert.ThrowsAnyAsync<IOException>(() => HostUnderTest.StartAsync(app.Directory, storage: null,
                configure: o => o with { HttpPort = port, AzuriteDataDirectory = data.FullName }));
            // What ./faast start tells apart to print "pass --port".
            Assert.True(e.InnerException is Microsoft.AspNetCore.Connections.AddressInUseException
                || e.Message.Contains("address already in use", StringComparison.OrdinalIgnoreCase), e.ToString());
            // Storage and cache had started: the failed start stopped them.
            Assert.DoesNotContain(CommandLines(), line => line.Contains(data.FullName, StringComparison.Ordinal));
            Assert.Empty(Directory.GetDirectories("/dev/shm", $"*{name}*"));
        }
        finally
        {
            data.Delete(recursive: true);
        }
    }

    // The host makes its loggers before its web host; they still take their levels from the web
    // host's configuration, as the benchmarks' Logging__LogLevel__Default=Warning expects.
    [Theory]
    [InlineData("Information", true)]
    [InlineData("Warning", false)]
    public async Task The_host_process_takes_its_log_levels_from_the_logging_configuration_in_its_environment(string level, bool infoLogged)
    {
        using var app = HelloApp();
        // A folder of this run's own: the group appends to the log files it finds.
        var logs = Directory.CreateTempSubdirectory("faast-loglevel-");
        try
        {
            await using (var group = await InstanceGroup.StartAsync(new InstanceGroupOptions
            {
                AppDirectory = app.Directory,
                Count = 1,
                StorageConnectionString = azurite.ConnectionString,
                Arguments = ["--workers", "1"],
                Environment = new Dictionary<string, string> { ["Logging__LogLevel__Default"] = level },
                LogDirectory = logs.FullName,
            }))
            {
                using var http = new HttpClient();
                Assert.Equal("hello", await http.GetStringAsync(new Uri(group[0].BaseAddress, "api/Hello")));
            }
            // "Cachelet on: ..." is an information line of the cache stage, written before the instance answered.
            Assert.Equal(infoLogged, File.ReadAllText(Path.Combine(logs.FullName, "instance-0.log")).Contains("Cachelet on:", StringComparison.Ordinal));
        }
        finally
        {
            logs.Delete(recursive: true);
        }
    }

    private static List<string> CommandLines()
    {
        var lines = new List<string>();
        foreach (var dir in Directory.GetDirectories("/proc"))
        {
            try
            {
                if (int.TryParse(Path.GetFileName(dir), out _))
                    lines.Add(File.ReadAllText(Path.Combine(dir, "cmdline")).Replace('\0', ' '));
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // the process ended meanwhile
            }
        }
        return lines;
    }

    /// <summary>
    /// Lets every line through but holds the first line of <paramref name="category"/> that contains
    /// <paramref name="text"/> until <see cref="Release"/> (at most a minute): a place where a task of
    /// the host can be caught at a known point of its work.
    /// </summary>
    private sealed class HoldingLoggerProvider(string category, string text) : ILoggerProvider
    {
        private readonly string _category = category;
        private readonly string _text = text;
        private readonly ManualResetEventSlim _release = new();
        private int _held;

        public TaskCompletionSource Reached { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public void Release() => _release.Set();

        public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

        public void Dispose()
        {
        }

        private sealed class Logger(HoldingLoggerProvider owner, string category) : ILogger
        {
            public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => true;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
            {
                if (category != owner._category || !formatter(state, exception).Contains(owner._text, StringComparison.OrdinalIgnoreCase)
                    || Interlocked.Exchange(ref owner._held, 1) == 1)
                    return;
                owner.Reached.TrySetResult();
                owner._release.Wait(TimeSpan.FromMinutes(1));
            }
        }
    }

    [Fact]
    public async Task A_background_join_that_completes_after_the_host_began_stopping_leaves_no_instance_record_and_no_heartbeat()
    {
        using var app = HelloApp();
        // Storage is down at start (nothing listens on the port): the host serves as a cache of its
        // own and keeps trying to join in the background.
        var port = Ports.Free();
        var storage = $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;";
        // The join is caught after it registered, as its membership logs that it joined.
        var joinLog = new HoldingLoggerProvider("FaaST.Membership", "joined");
        var host = await HostUnderTest.StartAsync(app.Directory, storage, configure: o => o with
        {
            LoggerProvider = joinLog,
            InstanceId = "late-joiner",
            StorageOptions = new BlobStoreOptions { MaxRetries = 1, RetryBaseDelay = TimeSpan.FromMilliseconds(10) },
        });
        var appName = host.Host.App.Name;
        Assert.Null(host.Host.Self);
        Task? stopping = null;
        try
        {
            await using var upLater = await AzuriteProcess.StartAsync(Repo.Root, port: port);
            await joinLog.Reached.Task.WaitAsync(TimeSpan.FromSeconds(60));

            // Stop the host while that join is under way, then let the join finish. A host that waits
            // for its join holds its stop until then; one that does not has finished stopping.
            stopping = host.DisposeAsync().AsTask();
            await Task.WhenAny(stopping, Task.Delay(TimeSpan.FromSeconds(2)));
            joinLog.Release();
            await stopping;

            using var blobs = new BlobStore(upLater.ConnectionString);
            Assert.Empty(await InstanceRecordsAsync(blobs, appName));
            // A membership left running would heartbeat (and re-register) every second.
            await Task.Delay(TimeSpan.FromSeconds(3));
            Assert.Empty(await InstanceRecordsAsync(blobs, appName));
        }
        finally
        {
            joinLog.Release();
            await (stopping ?? host.DisposeAsync().AsTask());
        }
    }

    private static async Task<List<string>> InstanceRecordsAsync(BlobStore blobs, string app)
    {
        var names = new List<string>();
        await foreach (var item in blobs.ListAsync("faast-membership", app + "/instances/"))
            names.Add(item.Name);
        return names;
    }
}
