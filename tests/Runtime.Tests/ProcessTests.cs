using System.Diagnostics;
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
        var app = TestApp.CopySample("python-app", keepName: true);
        var dll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { dll, app, "--port", "0", "--azurite-in-memory" })
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = Repo.Root;
        info.Environment["AzureWebJobsStorage"] = azurite.ConnectionString;
        using var host = Process.Start(info)!;
        var address = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        var output = new System.Collections.Concurrent.ConcurrentQueue<string>();
        host.OutputDataReceived += (_, e) =>
        {
            if (e.Data is null)
                return;
            output.Enqueue(e.Data);
            if (ListeningOn().Match(e.Data) is { Success: true } m)
                address.TrySetResult(m.Groups[1].Value);
        };
        host.ErrorDataReceived += (_, e) => { if (e.Data is not null) output.Enqueue(e.Data); };
        host.BeginOutputReadLine();
        host.BeginErrorReadLine();
        try
        {
            var started = await Task.WhenAny(address.Task, host.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(60)));
            Assert.True(started == address.Task, "the host did not report its address:\n" + string.Join("\n", output));
            using var http = new HttpClient { BaseAddress = new Uri(await address.Task) };
            Assert.Equal("Hello, Process!", await http.GetStringAsync("api/Hello?name=Process"));
            using var status = System.Text.Json.JsonDocument.Parse(await http.GetStringAsync("admin/host/status"));
            var workers = status.RootElement.GetProperty("workerProcessIds").EnumerateArray().Select(p => p.GetInt32()).ToArray();
            Assert.NotEmpty(workers);
            var isolation = status.RootElement.GetProperty("isolation");
            if (Environment.IsPrivilegedProcess)
                Assert.Equal("faast-python-app", isolation.GetProperty("user").GetString());

            Process.Start("kill", ["-TERM", host.Id.ToString(System.Globalization.CultureInfo.InvariantCulture)])!.WaitForExit();
            await Task.WhenAny(host.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(30)));
            Assert.True(host.HasExited, "the host did not stop on SIGTERM:\n" + string.Join("\n", output));
            Assert.Equal(0, host.ExitCode);
            foreach (var pid in workers)
                Assert.False(File.Exists($"/proc/{pid}/status") && !File.ReadAllText($"/proc/{pid}/status").Contains("zombie", StringComparison.Ordinal),
                    $"worker {pid} outlived the host");
            Assert.Empty(Directory.GetDirectories("/dev/shm", $"faast-*-{host.Id}"));
        }
        finally
        {
            if (!host.HasExited)
                host.Kill(entireProcessTree: true);
            Directory.Delete(Path.GetDirectoryName(app)!, recursive: true);
        }
    }

    [GeneratedRegex(@"listening on (http://127\.0\.0\.1:\d+/?)")]
    private static partial Regex ListeningOn();
}
