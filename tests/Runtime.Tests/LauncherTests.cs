using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text.RegularExpressions;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The newcomer's first hour: `./faast` (the bash launcher) and the host it execs, run as real processes. Help runs
/// nothing: the launcher is run with a PATH whose dotnet, npm, node, apt-get and dpkg-query only write their name
/// to a file, so anything it tried to install, build or start shows there.
/// </summary>
public sealed partial class LauncherTests : IDisposable
{
    private static readonly string[] Commands = ["start", "platform", "deploy", "status", "test", "bench", "blob", "setup"];
    private static readonly string[] Shimmed = ["dotnet", "npm", "npx", "node", "apt-get", "dpkg-query", "redis-server"];

    private readonly TempDirectory _shims = new("faast-launcher-shims-");

    public LauncherTests()
    {
        foreach (var name in Shimmed)
        {
            var path = Path.Combine(_shims.Path, name);
            File.WriteAllText(path, $"#!/bin/sh\necho {name} \"$@\" >> '{RanFile}'\nexit 1\n");
            if (!OperatingSystem.IsWindows()) // the launcher is bash: Linux only
                File.SetUnixFileMode(path, (UnixFileMode)0b111_101_101);
        }
    }

    private string RanFile => Path.Combine(_shims.Path, "ran.log");

    private string Ran => File.Exists(RanFile) ? File.ReadAllText(RanFile) : "";

    public void Dispose() => _shims.Dispose();

    public static TheoryData<string, string> HelpCases()
    {
        var data = new TheoryData<string, string>();
        foreach (var command in Commands)
            foreach (var flag in (string[])["--help", "-h"])
                data.Add(command, flag);
        return data;
    }

    [Theory]
    [MemberData(nameof(HelpCases))]
    public async Task Every_launcher_command_answers_help_with_its_usage_and_runs_nothing(string command, string flag)
    {
        // After other arguments too: `./faast bench runtime --help` must not start the benchmark.
        foreach (var args in new[] { new[] { command, flag }, new[] { command, "samples/python-app", flag } })
        {
            var run = await LauncherAsync(args);
            Assert.True(run.ExitCode == 0, $"./faast {string.Join(' ', args)} exited {run.ExitCode}: {run.StandardError}");
            Assert.Contains($"./faast {command}", run.StandardOutput, StringComparison.Ordinal);
            Assert.Equal("", run.StandardError);
            Assert.Equal("", Ran);
        }
    }

    [Fact]
    public async Task The_top_level_usage_lists_every_command_and_every_option_the_host_takes()
    {
        foreach (var args in new[] { Array.Empty<string>(), ["help"], ["--help"], ["-h"] })
        {
            var run = await LauncherAsync(args);
            Assert.Equal(0, run.ExitCode);
            foreach (var command in Commands)
                Assert.Contains($"./faast {command}", run.StandardOutput, StringComparison.Ordinal);
            foreach (var option in new[] { "--quick", "--seed", "--only" })
                Assert.Contains(option, run.StandardOutput, StringComparison.Ordinal);
            Assert.Equal("", Ran);
        }
        // The launcher's start options are exactly the host's.
        var start = (await LauncherAsync(["start", "--help"])).StandardOutput;
        var hostOptions = Options().Matches(Program.Usage).Select(m => m.Value).ToHashSet();
        var launcherOptions = Options().Matches(start).Select(m => m.Value).ToHashSet();
        Assert.Equal(hostOptions.Order(), launcherOptions.Order());
    }

    [Theory]
    [InlineData("unknown command: frobnicate", "frobnicate")]
    [InlineData("test takes no arguments (got: --verbose)", "test", "--verbose")]
    [InlineData("unknown option for bench: --qiuck", "bench", "runtime", "--qiuck")]
    [InlineData("unknown scenario: runtim", "bench", "runtim")]
    [InlineData("--seed is an option of the fuzz scenario only", "bench", "runtime", "--seed", "3")]
    [InlineData("bench needs a scenario", "bench")]
    [InlineData("unknown option for start: --prot", "start", "samples/python-app", "--prot", "8080")]
    [InlineData("--port needs a value", "start", "samples/python-app", "--port")]
    [InlineData("start needs an app directory", "start")]
    [InlineData("unknown blob command: cp (ls, put or get)", "blob", "cp", "samples/python-app", "a/b")]
    [InlineData("setup takes no arguments (got: now)", "setup", "now")]
    public async Task Bad_arguments_get_one_line_naming_them_then_the_usage_and_nothing_runs(string error, params string[] args)
    {
        var run = await LauncherAsync(args);
        Assert.Equal(2, run.ExitCode);
        var lines = run.StandardError.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.Equal("faast: " + error, lines[0]);
        Assert.Contains(lines.Skip(1), l => l.StartsWith("./faast ", StringComparison.Ordinal)); // the usage follows
        Assert.Equal("", run.StandardOutput);
        Assert.Equal("", Ran);
    }

    [Fact]
    public async Task The_host_answers_help_with_its_usage_and_bad_options_with_one_line_and_the_usage()
    {
        var help = await HostAsync(["--help"]);
        Assert.Equal(0, help.ExitCode);
        Assert.Equal(Program.Usage, help.StandardOutput.Trim());

        var bad = await HostAsync([Path.Combine(Repo.Root, "samples", "python-app"), "--prot", "1"]);
        Assert.Equal(2, bad.ExitCode);
        Assert.Equal(["faast: unknown option --prot", Program.Usage], bad.StandardError.Trim().Split('\n'));
    }

    [Fact]
    public async Task A_port_given_with_port_that_is_taken_is_one_line_and_exit_4_before_azurite_starts()
    {
        using var app = TestApp.CopySample("python-app");
        using var taken = Occupy(out var port);
        var run = await HostAsync([app.Directory, "--port", port.ToString(CultureInfo.InvariantCulture)]);
        AssertOneLineAboutTakenPort(run, port, "(HTTP, from --port)");
        AssertNoAzuriteStarted(app.Directory);
    }

    [Fact]
    public async Task A_local_http_port_from_local_settings_that_is_taken_is_one_line_naming_the_setting()
    {
        using var app = TestApp.CopySample("python-app");
        using var taken = Occupy(out var port);
        var settings = Path.Combine(app.Directory, "local.settings.json");
        File.WriteAllText(settings, $$"""
            { "Values": { "FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": "UseDevelopmentStorage=true" },
              "Host": { "LocalHttpPort": {{port}} } }
            """);
        var run = await HostAsync([app.Directory]);
        AssertOneLineAboutTakenPort(run, port, $"(HTTP, from {settings} Host.LocalHttpPort)");
        AssertNoAzuriteStarted(app.Directory);
    }

    [Fact]
    public async Task With_instances_a_taken_port_of_a_later_instance_is_found_before_anything_starts()
    {
        using var app = TestApp.CopySample("python-app");
        // Two free ports in a row: the first stays free, the second is held.
        int first;
        TcpListener taken;
        while (true)
        {
            first = Ports.Free();
            taken = new TcpListener(IPAddress.Loopback, first + 1);
            try
            {
                taken.Start();
                break;
            }
            catch (SocketException)
            {
                taken.Dispose();
            }
        }
        using (taken)
        {
            var run = await HostAsync([app.Directory, "--instances", "2", "--port", first.ToString(CultureInfo.InvariantCulture)]);
            AssertOneLineAboutTakenPort(run, first + 1, "(HTTP of instance 1, from --port + 1)");
            AssertNoAzuriteStarted(app.Directory);
        }
    }

    [Fact]
    public async Task A_peer_port_that_is_taken_is_one_line_naming_peer_port()
    {
        using var app = TestApp.CopySample("python-app");
        using var taken = Occupy(out var port);
        var run = await HostAsync([app.Directory, "--port", "0", "--peer-port", port.ToString(CultureInfo.InvariantCulture)]);
        AssertOneLineAboutTakenPort(run, port, "(peers, from --peer-port)");
        AssertNoAzuriteStarted(app.Directory);
    }

    private static void AssertOneLineAboutTakenPort(ProcessRun run, int port, string purpose)
    {
        Assert.Equal(4, run.ExitCode);
        Assert.Equal("", run.StandardOutput);
        var lines = run.StandardError.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.Single(lines);
        Assert.StartsWith($"faast: port {port} on 127.0.0.1 {purpose} is already in use by another process; ", lines[0], StringComparison.Ordinal);
    }

    /// <summary>The host would start Azurite with its data in APP/.faast/azurite: neither that folder nor a process
    /// naming the app directory may exist.</summary>
    private static void AssertNoAzuriteStarted(string app)
    {
        Assert.False(Directory.Exists(Path.Combine(app, ".faast", "azurite")), "the host got as far as Azurite's data folder");
        foreach (var proc in Directory.EnumerateDirectories("/proc").Where(d => int.TryParse(Path.GetFileName(d), out _)))
        {
            string cmdline;
            try
            {
                cmdline = File.ReadAllText(Path.Combine(proc, "cmdline")).Replace('\0', ' ');
            }
            catch (IOException)
            {
                continue; // ended meanwhile
            }
            catch (UnauthorizedAccessException)
            {
                continue;
            }
            Assert.False(cmdline.Contains(app, StringComparison.Ordinal), $"a process of the app is running: {cmdline}");
        }
    }

    private static TcpListener Occupy(out int port)
    {
        var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        port = ((IPEndPoint)listener.LocalEndpoint).Port;
        return listener;
    }

    private Task<ProcessRun> LauncherAsync(IReadOnlyList<string> args)
    {
        var info = new ProcessStartInfo("bash") { WorkingDirectory = Repo.Root };
        info.ArgumentList.Add(Path.Combine(Repo.Root, "faast"));
        foreach (var a in args)
            info.ArgumentList.Add(a);
        info.Environment["PATH"] = _shims.Path + ":" + Environment.GetEnvironmentVariable("PATH");
        return ProcessRun.RunAsync(info);
    }

    internal static Task<ProcessRun> HostAsync(IReadOnlyList<string> args, IReadOnlyDictionary<string, string>? environment = null, string? standardInput = null)
    {
        var info = new ProcessStartInfo("dotnet");
        info.ArgumentList.Add(Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"));
        foreach (var a in args)
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = Repo.Root;
        info.Environment.Remove("AzureWebJobsStorage");
        foreach (var (k, v) in environment ?? new Dictionary<string, string>())
            info.Environment[k] = v;
        return ProcessRun.RunAsync(info, standardInput);
    }

    [GeneratedRegex(@"--[a-z][a-z-]+")]
    private static partial Regex Options();
}

/// <summary>A finished process: its exit code and everything it wrote.</summary>
internal sealed record ProcessRun(int ExitCode, string StandardOutput, string StandardError)
{
    /// <summary>Runs <paramref name="info"/> to its end (killed, and the test failed, after two minutes: a hang).</summary>
    public static async Task<ProcessRun> RunAsync(ProcessStartInfo info, string? standardInput = null)
    {
        info.RedirectStandardOutput = info.RedirectStandardError = info.RedirectStandardInput = true;
        info.UseShellExecute = false;
        using var process = Process.Start(info)!;
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        if (standardInput is not null)
            await process.StandardInput.WriteAsync(standardInput);
        process.StandardInput.Close();
        using var timeout = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        try
        {
            await process.WaitForExitAsync(timeout.Token);
        }
        catch (OperationCanceledException)
        {
            process.Kill(entireProcessTree: true);
            Assert.Fail($"{info.FileName} {string.Join(' ', info.ArgumentList)} did not end within 2 minutes:\n{await stdout}\n{await stderr}");
        }
        return new ProcessRun(process.ExitCode, await stdout, await stderr);
    }
}
