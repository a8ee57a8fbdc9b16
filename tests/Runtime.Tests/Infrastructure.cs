using System.Collections.Concurrent;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>The integration tests' Azurite (one per run; each test uses its own containers or app).</summary>
[CollectionDefinition("azurite")]
public sealed class AzuriteCollection : ICollectionFixture<AzuriteFixture>;

/// <summary>Collects log lines so tests can check what the host said.</summary>
public sealed class CapturingLoggerProvider : ILoggerProvider
{
    public ConcurrentQueue<string> Lines { get; } = new();

    public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

    public void Dispose()
    {
    }

    public string All => string.Join("\n", Lines);

    private sealed class Logger(CapturingLoggerProvider owner, string category) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
            owner.Lines.Enqueue($"{logLevel} {category}: {formatter(state, exception)}{(exception is null ? "" : "\n" + exception)}");
    }
}

/// <summary>A real runtime host (Kestrel, gRPC, worker processes) on a free loopback port.</summary>
public sealed class HostUnderTest : IAsyncDisposable
{
    private HostUnderTest(RuntimeHost host, CapturingLoggerProvider logs, BlobStore? blobs)
    {
        Host = host;
        Logs = logs;
        Blobs = blobs;
        Http = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(60) };
    }

    public RuntimeHost Host { get; }
    public CapturingLoggerProvider Logs { get; }
    public HttpClient Http { get; }

    /// <summary>A client on the same storage as the host (null if it has none yet).</summary>
    public BlobStore? Blobs { get; }

    public static async Task<HostUnderTest> StartAsync(string appDirectory, string? storage,
        Dictionary<string, string>? environment = null, Func<RuntimeHostOptions, RuntimeHostOptions>? configure = null)
    {
        var env = new System.Collections.Hashtable();
        if (storage is not null)
            env["AzureWebJobsStorage"] = storage;
        foreach (var (k, v) in environment ?? [])
            env[k] = v;
        var logs = new CapturingLoggerProvider();
        var options = new RuntimeHostOptions
        {
            AppDirectory = appDirectory,
            HttpPort = 0,
            HomeDirectory = Repo.Root,
            Environment = env,
            LoggerProvider = logs,
            MinimumLogLevel = LogLevel.Information,
            WorkerRestartDelay = TimeSpan.FromMilliseconds(100),
            // Workers run isolated (the suites run as root) as one shared user, not one user per test app.
            WorkerUser = "faast-tests",
        };
        if (configure is not null)
            options = configure(options);
        var host = await RuntimeHost.StartAsync(options);
        var cs = host.StorageConnectionString;
        return new HostUnderTest(host, logs, cs is null ? null : new BlobStore(cs));
    }

    public async ValueTask DisposeAsync()
    {
        Http.Dispose();
        Blobs?.Dispose();
        await Host.DisposeAsync();
    }
}
