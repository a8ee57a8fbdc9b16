using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;
using Xunit.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>The host's memory after large request bodies, in a host process of its own (as `./faast start` runs it).</summary>
[Collection("azurite")]
public sealed partial class BodyMemoryTests(AzuriteFixture azurite, ITestOutputHelper output)
{
    private const long MiB = 1024 * 1024;

    [Fact]
    public async Task The_hosts_memory_comes_back_after_a_100_MiB_request_body()
    {
        using var app = new TestApp("python").Function("Length", TestApp.HttpFunctionJson,
            ("__init__.py", "def main(req):\n    return str(len(req.get_body()))\n"));
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString);

        // Warm up the request path, then take the baseline.
        var small = new byte[64 * 1024];
        for (var i = 0; i < 3; i++)
            Assert.Equal("65536", await (await host.Http.PostAsync("api/Length", new ByteArrayContent(small))).Content.ReadAsStringAsync());
        var baseline = host.ResidentBytes();

        var body = new byte[100 * MiB];
        Random.Shared.NextBytes(body);
        var response = await host.Http.PostAsync("api/Length", new ByteArrayContent(body));
        Assert.Equal((100 * MiB).ToString(CultureInfo.InvariantCulture), await response.Content.ReadAsStringAsync());
        var right = host.ResidentBytes();

        // What is resident once the request is done (freed memory goes back to the kernel as the
        // runtime trims it; the bound is on memory, the wait only lets the trimming happen).
        var after = right;
        for (var i = 0; i < 100 && after - baseline >= 200 * MiB; i++)
        {
            await Task.Delay(100);
            after = host.ResidentBytes();
        }
        output.WriteLine($"host RSS: baseline {baseline / MiB} MiB, right after the 100 MiB POST {right / MiB} MiB, settled {after / MiB} MiB");
        Assert.True(after - baseline < 200 * MiB,
            $"the host kept {(after - baseline) / MiB} MiB more than before the 100 MiB request (baseline {baseline / MiB} MiB, now {after / MiB} MiB)");
    }

    /// <summary>FaaST.Runtime.dll as its own process on a free port; killed (with its workers) when disposed.</summary>
    private sealed class HostProcess : IAsyncDisposable
    {
        private readonly Process _process;
        private readonly ConcurrentQueue<string> _output = new();

        private HostProcess(Process process) => _process = process;

        public HttpClient Http { get; private set; } = null!;

        /// <summary>VmRSS of the host process.</summary>
        public long ResidentBytes()
        {
            var line = File.ReadLines($"/proc/{_process.Id}/status").First(l => l.StartsWith("VmRSS:", StringComparison.Ordinal));
            return long.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1], CultureInfo.InvariantCulture) * 1024;
        }

        public static async Task<HostProcess> StartAsync(string app, string storage)
        {
            var dll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");
            var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
            foreach (var a in new[] { dll, app, "--port", "0", "--no-peers" })
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
            host.Http = new HttpClient { BaseAddress = new Uri(await address.Task), Timeout = TimeSpan.FromSeconds(120) };
            return host;
        }

        public async ValueTask DisposeAsync()
        {
            if (!_process.HasExited)
            {
                // SIGTERM first: the host stops its workers and removes its /dev/shm segments.
                Process.Start("kill", ["-TERM", _process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
                await Task.WhenAny(_process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(20)));
                if (!_process.HasExited)
                    _process.Kill(entireProcessTree: true);
                await _process.WaitForExitAsync();
            }
            Http?.Dispose();
            _process.Dispose();
        }
    }

    [GeneratedRegex(@"listening on (http://127\.0\.0\.1:\d+/?)")]
    private static partial Regex ListeningOn();
}
