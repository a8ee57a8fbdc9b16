using System.Collections.Concurrent;
using FaaST.Bench.Fuzz;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform fuzzers of <c>./faast bench fuzz</c> (bench/Bench/Fuzz/PlatformFuzzer.cs: the deploy endpoint
/// and the admin API), a few hundred inputs each with a fixed seed against a real platform on a loopback port
/// (real Azurite, real instances for the rare working package): a change that answers one of them with a 5xx
/// other than 503, logs an unhandled exception or stops the platform fails here with the input.
/// </summary>
public sealed class PlatformFuzzTests : IAsyncLifetime
{
    private const int Seed = 20261127;
    private const int Inputs = 300;

    private PlatformTestBed _bed = null!;
    private readonly ExceptionLog _log = new();

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("platform-fuzz");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private async Task<PlatformTarget> StartAsync()
    {
        var platform = await _bed.StartPlatformAsync(_bed.Options() with { DrainDeadline = TimeSpan.FromSeconds(5) }, l =>
        {
            l.ClearProviders();
            l.AddProvider(_log);
        });
        // The admin key file of issue 19's contract (STATE/keys/admin); a platform without one is fuzzed without a key.
        var keyFile = Path.Combine(_bed.StatePath, "keys", "admin");
        var key = File.Exists(keyFile) ? File.ReadAllText(keyFile).Trim() : null;
        return new PlatformTarget(platform.Address.Port, key, () => true, _log.Take);
    }

    private static string Describe(TargetResult result) =>
        $"{result.Crashes} of {result.Inputs} inputs crashed {result.Target} (seed {Seed}):\n" +
        string.Join("\n", result.Findings.Select(f => $"x{f.Count} {f.Signature}\n  input {f.Index}: {f.Input[..Math.Min(600, f.Input.Length)]}\n  {f.Detail.Split('\n')[0]}"));

    [Fact]
    public async Task Every_fuzzed_deploy_is_answered_without_a_server_error_and_the_platform_keeps_serving()
    {
        var target = await StartAsync();
        var result = await PlatformFuzzer.RunDeployAsync(target, Seed, Inputs, TimeSpan.MaxValue);
        Assert.True(result.Crashes == 0, Describe(result));
        Assert.Equal(Inputs, result.Inputs);
        Assert.True(result.Rejected > 0, "no input was refused");
        Assert.Equal(1, result.Counters.GetValueOrDefault("after_run_platform_serves"));
    }

    [Fact]
    public async Task Every_fuzzed_admin_request_is_answered_without_a_server_error_and_the_platform_keeps_serving()
    {
        var target = await StartAsync();
        var result = await PlatformFuzzer.RunAdminAsync(target, Seed, Inputs, TimeSpan.MaxValue);
        Assert.True(result.Crashes == 0, Describe(result));
        Assert.Equal(Inputs, result.Inputs);
        Assert.True(result.Rejected > 0, "no input was refused");
        Assert.Equal(1, result.Counters.GetValueOrDefault("after_run_platform_serves"));
    }

    [Fact]
    public void A_deploy_input_depends_only_on_the_seed_its_index_and_the_key()
    {
        Assert.Equal(PlatformFuzzer.DeployInputBytes(5, 17, "k"), PlatformFuzzer.DeployInputBytes(5, 17, "k"));
        Assert.NotEqual(PlatformFuzzer.DeployInputBytes(5, 17, "k"), PlatformFuzzer.DeployInputBytes(6, 17, "k"));
    }

    /// <summary>Errors logged with an exception (an unhandled one in a request, a crashed background task): the fuzzers' third oracle.</summary>
    private sealed class ExceptionLog : ILoggerProvider, ILogger
    {
        private readonly ConcurrentQueue<string> _errors = new();

        public IReadOnlyList<string> Take()
        {
            var taken = new List<string>();
            while (_errors.TryDequeue(out var e))
                taken.Add(e);
            return taken;
        }

        public ILogger CreateLogger(string categoryName) => this;

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Error;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            if (logLevel >= LogLevel.Error && exception is not null)
                _errors.Enqueue($"{formatter(state, exception)}: {exception}");
        }

        public void Dispose()
        {
        }
    }
}
