using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;

namespace FaaST.Storage;

/// <summary>
/// A real Azurite blob service (node_modules/.bin/azurite-blob of the repository) on a free loopback port,
/// in-memory, for tests and for running FaaST without configured storage; with queues, the whole Azurite
/// (node_modules/.bin/azurite) serves blobs and queues, each on a free loopback port (and its table service on a
/// third, unused). Dispose kills its process tree.
/// </summary>
public sealed class AzuriteProcess : IDisposable, IAsyncDisposable
{
    private const int MaxOutputLines = 200;
    private static readonly ConcurrentDictionary<AzuriteProcess, bool> Live = new();
    private static int s_exitHookInstalled;

    private readonly Process _process;
    private readonly string _workspace;
    private readonly ConcurrentQueue<string> _output;
    private bool _persistent;
    private int _disposed;

    private AzuriteProcess(Process process, int port, string workspace, ConcurrentQueue<string> output, AzuriteAccount? account,
        AzuriteHttps? https, int? queuePort, IPAddress listenAddress, int? tablePort = null)
    {
        _process = process;
        _workspace = workspace;
        _output = output;
        Port = port;
        ListenAddress = listenAddress;
        Account = account;
        Https = https;
        var scheme = https is null ? "http" : "https";
        var name = account?.Name ?? StorageConnectionString.DevelopmentAccountName;
        var key = account?.Key ?? StorageConnectionString.DevelopmentAccountKey;
        BlobEndpoint = new Uri(string.Create(CultureInfo.InvariantCulture, $"{scheme}://{UriHost(listenAddress)}:{port}/{name}"));
        QueuePort = queuePort;
        QueueEndpoint = queuePort is { } q ? new Uri(string.Create(CultureInfo.InvariantCulture, $"{scheme}://{UriHost(listenAddress)}:{q}/{name}")) : null;
        TablePort = tablePort;
        TableEndpoint = tablePort is { } t ? new Uri(string.Create(CultureInfo.InvariantCulture, $"{scheme}://{UriHost(listenAddress)}:{t}/{name}")) : null;
        ConnectionString = string.Create(CultureInfo.InvariantCulture,
            $"DefaultEndpointsProtocol={scheme};AccountName={name};AccountKey={key};BlobEndpoint={BlobEndpoint};") +
            (QueueEndpoint is { } qe ? $"QueueEndpoint={qe};" : "") +
            (TableEndpoint is { } te ? $"TableEndpoint={te};" : "");
    }

    /// <summary>The address every service listens on: 127.0.0.1 unless another was asked for.</summary>
    public IPAddress ListenAddress { get; }

    /// <summary>The loopback port of the queue service; null when only the blob service runs.</summary>
    public int? QueuePort { get; }

    /// <summary>The table service's port (table bindings), or null when only the blob service runs.</summary>
    public int? TablePort { get; }

    /// <summary>http(s)://{ListenAddress}:{TablePort}/{account name} (table bindings), or null when only the blob service runs.</summary>
    public Uri? TableEndpoint { get; }

    /// <summary>http(s)://{ListenAddress}:{QueuePort}/{account name}, or null when only the blob service runs.</summary>
    public Uri? QueueEndpoint { get; }

    /// <summary>The HTTPS (and OAuth) settings this Azurite was started with; null: plain HTTP, SharedKey/SAS only.</summary>
    public AzuriteHttps? Https { get; }

    /// <summary>The account this Azurite serves instead of devstoreaccount1, if it was given one.</summary>
    public AzuriteAccount? Account { get; }

    /// <summary>The loopback port the blob service listens on.</summary>
    public int Port { get; }

    /// <summary>A SharedKey connection string for the account of this instance (its own, or devstoreaccount1).</summary>
    public string ConnectionString { get; }

    /// <summary>http(s)://{ListenAddress}:{Port}/{account name}.</summary>
    public Uri BlobEndpoint { get; }

    /// <summary>The id of the node process.</summary>
    public int ProcessId => _process.Id;

    /// <summary>True once the process has ended (killed, crashed or disposed).</summary>
    public bool HasExited
    {
        get
        {
            try
            {
                return _process.HasExited;
            }
            catch (InvalidOperationException)
            {
                return true;
            }
        }
    }

    /// <summary>The last lines Azurite wrote to stdout/stderr (for diagnostics).</summary>
    public string RecentOutput => string.Join(Environment.NewLine, _output);

    /// <summary>
    /// The repository root: the nearest directory at or above <paramref name="startDirectory"/> (default: the
    /// app's base directory) that holds FaaST.sln or package.json.
    /// </summary>
    public static string FindRepoRoot(string? startDirectory = null)
    {
        var start = startDirectory ?? AppContext.BaseDirectory;
        for (var dir = new DirectoryInfo(start); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "FaaST.sln")) || File.Exists(Path.Combine(dir.FullName, "package.json")))
            {
                return dir.FullName;
            }
        }

        throw new DirectoryNotFoundException($"No directory at or above '{start}' holds FaaST.sln or package.json.");
    }

    /// <summary>The azurite-blob launcher inside <paramref name="repoRoot"/> (with <paramref name="queues"/>: azurite, every service).</summary>
    public static string LauncherPath(string repoRoot, bool queues = false)
    {
        var name = queues ? "azurite" : "azurite-blob";
        return Path.Combine(repoRoot, "node_modules", ".bin", OperatingSystem.IsWindows() ? name + ".cmd" : name);
    }

    /// <summary>
    /// Starts Azurite from <paramref name="repoRoot"/>/node_modules/.bin/azurite-blob and waits until it answers HTTP.
    /// Without <paramref name="port"/> a free port is chosen, and another one if that port was taken meanwhile.
    /// </summary>
    /// <exception cref="FileNotFoundException">Azurite is not installed (run npm ci).</exception>
    /// <exception cref="InvalidOperationException">Azurite exited or did not come up in time (<paramref name="startupTimeout"/>, default 120 s).</exception>
    /// <param name="dataDirectory">Where Azurite keeps blobs across runs (made 0700, its files 0600); null keeps them in memory.</param>
    /// <param name="account">The only account Azurite serves; null: the emulator's public devstoreaccount1.</param>
    /// <param name="https">Serve HTTPS with this certificate (and, if it says so, accept OAuth bearer tokens); null: HTTP.</param>
    /// <param name="queues">Also serve queues (on a free loopback port; <see cref="QueueEndpoint"/>, and QueueEndpoint in the connection string).</param>
    /// <param name="listenAddress">The address to listen on instead of 127.0.0.1 (the storage address of the benchmarks'
    /// shaped network, bench/net/cloudnet.sh); the endpoints and the connection string name it.</param>
    public static async Task<AzuriteProcess> StartAsync(string repoRoot, int? port = null, TimeSpan? startupTimeout = null,
        CancellationToken ct = default, string? dataDirectory = null, AzuriteAccount? account = null, AzuriteHttps? https = null,
        bool queues = false, IPAddress? listenAddress = null)
    {
        var address = listenAddress ?? IPAddress.Loopback;
        ArgumentException.ThrowIfNullOrWhiteSpace(repoRoot);
        var launcher = LauncherPath(repoRoot, queues);
        if (!File.Exists(launcher))
        {
            throw new FileNotFoundException(
                $"Azurite is not installed: '{launcher}' is missing. Run `npm ci` in {repoRoot}.", launcher);
        }

        // 120 s by default: Azurite is a Node process, and on a busy 2-core machine (CI beside a CPU hog, load ~25) it was
        // seen to take over 30 s to answer its first request. Its exit is seen at once, so the wait is long only for an
        // Azurite that is alive but slow, never for one that failed.
        var timeout = startupTimeout ?? TimeSpan.FromSeconds(120);
        const int maxPortTries = 5;
        for (var tryNo = 1; ; tryNo++)
        {
            var chosen = port ?? FreePort(address);
            var (instance, _) = await TryStartAsync(launcher, chosen, timeout, dataDirectory, account, https, queues, address, ct).ConfigureAwait(false);
            if (instance is not null)
            {
                return instance;
            }

            // Only a port taken between our probe and Azurite's bind gets here: pick another one.
            if (port is not null || tryNo >= maxPortTries)
            {
                throw new InvalidOperationException(string.Create(CultureInfo.InvariantCulture,
                    $"Azurite could not listen on {UriHost(address)}:{chosen}{(queues ? " (and free ports for its queue and table services)" : "")}: the port is in use (try {tryNo})."));
            }
        }
    }

    /// <summary>Kills the Azurite process tree and removes its workspace.</summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }

        Live.TryRemove(this, out _);
        // Azurite saves its metadata on a timer: a persistent one must stop gracefully or lose recent writes.
        if (_persistent)
            Terminate(_process);
        Kill(_process);
        _process.Dispose();
        TryDeleteDirectory(_workspace);
    }

    /// <inheritdoc cref="Dispose"/>
    public ValueTask DisposeAsync()
    {
        Dispose();
        return ValueTask.CompletedTask;
    }

    /// <summary>Kills the process without disposing this object (to simulate storage going down).</summary>
    public void Kill() => Kill(_process);

    private static async Task<(AzuriteProcess? Instance, bool PortInUse)> TryStartAsync(string launcher, int port,
        TimeSpan timeout, string? dataDirectory, AzuriteAccount? account, AzuriteHttps? https, bool queues, IPAddress address, CancellationToken ct)
    {
        var host = address.ToString();
        // In-memory persistence keeps data out of it, but Azurite may still write small files to its working directory.
        var workspace = PrivateFiles.CreateDirectory(Path.Combine(Path.GetTempPath(), "faast-azurite-" + Guid.NewGuid().ToString("N")));
        var guard = Path.Combine(workspace, "faast-guard.cjs");
        File.WriteAllText(guard, GuardScript);
        var psi = new ProcessStartInfo
        {
            FileName = launcher,
            WorkingDirectory = workspace,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            // The guard's lifeline: the write end is ours alone, so its end means this process is gone.
            RedirectStandardInput = true,
            UseShellExecute = false,
            CreateNoWindow = true,
        };
        foreach (var arg in (string[])["--blobHost", host, "--blobPort", port.ToString(CultureInfo.InvariantCulture),
                     "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"])
        {
            psi.ArgumentList.Add(arg);
        }

        int? queuePort = null, tablePort = null;
        if (queues)
        {
            // The whole Azurite also starts a table service (table bindings): on a free loopback port too, never its default 10002.
            queuePort = FreePort(address);
            tablePort = FreePort(address);
            foreach (var arg in (string[])["--queueHost", host, "--queuePort", queuePort.Value.ToString(CultureInfo.InvariantCulture),
                         "--tableHost", host, "--tablePort", tablePort.Value.ToString(CultureInfo.InvariantCulture)])
                psi.ArgumentList.Add(arg);
        }

        if (https is not null)
        {
            psi.ArgumentList.Add("--cert");
            psi.ArgumentList.Add(Path.GetFullPath(https.CertificatePemPath));
            psi.ArgumentList.Add("--key");
            psi.ArgumentList.Add(Path.GetFullPath(https.KeyPemPath));
            if (https.OAuth)
            {
                // Bearer tokens are decoded and their issuer, audience and lifetime checked (no signature check).
                psi.ArgumentList.Add("--oauth");
                psi.ArgumentList.Add("basic");
            }
        }

        if (dataDirectory is null)
        {
            psi.ArgumentList.Add("--inMemoryPersistence");
        }
        else
        {
            PrivateFiles.CreateDirectory(dataDirectory);
            PrivateFiles.Restrict(dataDirectory); // data an older version left 755/644
            psi.ArgumentList.Add("--location");
            psi.ArgumentList.Add(Path.GetFullPath(dataDirectory));
        }

        if (account is null)
            psi.Environment.Remove("AZURITE_ACCOUNTS"); // the connection string assumes the default account
        else
            psi.Environment["AZURITE_ACCOUNTS"] = account.AccountsVariable; // this account only: devstoreaccount1 is refused
        // Loaded before Azurite: files 0600, and an exit when this process dies (even by SIGKILL).
        var nodeOptions = psi.Environment.TryGetValue("NODE_OPTIONS", out var existing) && !string.IsNullOrWhiteSpace(existing) ? existing + " " : "";
        psi.Environment["NODE_OPTIONS"] = nodeOptions + "--require " + QuoteNodeOption(guard);

        var output = new ConcurrentQueue<string>();
        var process = new Process { StartInfo = psi, EnableRaisingEvents = true };
        process.OutputDataReceived += (_, e) => Collect(output, e.Data);
        process.ErrorDataReceived += (_, e) => Collect(output, e.Data);
        try
        {
            if (!process.Start())
            {
                throw new InvalidOperationException($"Could not start '{launcher}'.");
            }
        }
        catch (Exception ex) when (ex is System.ComponentModel.Win32Exception)
        {
            process.Dispose();
            TryDeleteDirectory(workspace);
            throw new InvalidOperationException(
                $"Could not start '{launcher}' (is node on the PATH?): {ex.Message}", ex);
        }

        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        var instance = new AzuriteProcess(process, port, workspace, output, account, https, queuePort, address, tablePort) { _persistent = dataDirectory is not null };
        Live[instance] = true;
        InstallExitHook();

        try
        {
            if (await WaitUntilServingAsync(instance, timeout, ct).ConfigureAwait(false))
            {
                return (instance, false);
            }

            var exited = instance.HasExited;
            var text = instance.RecentOutput;
            var inUse = text.Contains("EADDRINUSE", StringComparison.Ordinal);
            instance.Dispose();
            if (inUse)
            {
                return (null, true);
            }

            var what = exited
                ? "exited before it answered"
                : string.Create(CultureInfo.InvariantCulture, $"did not answer within {timeout.TotalSeconds:0} s");
            throw new InvalidOperationException(string.Create(CultureInfo.InvariantCulture,
                $"Azurite ('{launcher}') on {UriHost(address)}:{port} {what}. Output:{Environment.NewLine}{text}"));
        }
        catch
        {
            instance.Dispose();
            throw;
        }
    }

    /// <summary>True once the port answers HTTP with Azurite's Server header; false when the process exits or time runs out.</summary>
    private static async Task<bool> WaitUntilServingAsync(AzuriteProcess instance, TimeSpan timeout, CancellationToken ct)
    {
        // Probes give up as soon as the process exits (e.g. EADDRINUSE), even if something else holds the port.
        using var exited = CancellationTokenSource.CreateLinkedTokenSource(ct);
        instance._process.Exited += (_, _) => CancelQuietly(exited);
        if (instance.HasExited)
        {
            CancelQuietly(exited);
        }

        var handler = new SocketsHttpHandler { UseProxy = false, ConnectTimeout = TimeSpan.FromSeconds(1) };
        if (instance.Https is { } https)
        {
            // The probe talks to the child this process just started, which shows exactly this certificate.
            using var served = System.Security.Cryptography.X509Certificates.X509Certificate2.CreateFromPem(File.ReadAllText(https.CertificatePemPath));
            var expected = served.RawData;
            handler.SslOptions.RemoteCertificateValidationCallback = (_, certificate, _, _) =>
                certificate is not null && certificate.GetRawCertData().AsSpan().SequenceEqual(expected);
        }

        using var http = new HttpClient(handler) { Timeout = TimeSpan.FromSeconds(2) };
        var deadline = Stopwatch.StartNew();
        var probe = new Uri(string.Create(CultureInfo.InvariantCulture, $"{instance.BlobEndpoint.Scheme}://{UriHost(instance.ListenAddress)}:{instance.Port}/"));
        // With queues, the queue service must answer too (the services of one Azurite start one after the other).
        Uri? queueProbe = instance.QueuePort is { } qp
            ? new Uri(string.Create(CultureInfo.InvariantCulture, $"{instance.BlobEndpoint.Scheme}://{UriHost(instance.ListenAddress)}:{qp}/"))
            : null;
        // ...and so must the table service, which starts after the queues (a table binding in the first invocation
        // would otherwise meet a refused connection).
        Uri? tableProbe = instance.TablePort is { } tp
            ? new Uri(string.Create(CultureInfo.InvariantCulture, $"{instance.BlobEndpoint.Scheme}://{UriHost(instance.ListenAddress)}:{tp}/"))
            : null;
        while (deadline.Elapsed < timeout)
        {
            ct.ThrowIfCancellationRequested();
            if (instance.HasExited)
            {
                instance._process.WaitForExit(); // flushes the redirected output, so the reason can be read
                return false;
            }

            try
            {
                using var response = await http.GetAsync(probe, exited.Token).ConfigureAwait(false);
                // The service's own name, not just "Azurite": two Azurites starting side by side (./faast test's lanes)
                // can be handed the same free port, one for its blobs and one for its queues, and the blob probe was
                // once answered by the other's queue service ("Azurite-Queue", CI 2026-11-28: a suite's every container
                // create then failed with 404), while this one's blob service could not bind.
                var server = response.Headers.Server.ToString();
                if (server.Contains("Azurite-Blob", StringComparison.OrdinalIgnoreCase) && !instance.HasExited)
                {
                    if (queueProbe is null)
                        return true;
                    using var queueResponse = await http.GetAsync(queueProbe, exited.Token).ConfigureAwait(false);
                    if (queueResponse.Headers.Server.ToString().Contains("Azurite-Queue", StringComparison.OrdinalIgnoreCase) && !instance.HasExited)
                    {
                        if (tableProbe is null)
                            return true;
                        using var tableResponse = await http.GetAsync(tableProbe, exited.Token).ConfigureAwait(false);
                        if (tableResponse.Headers.Server.ToString().Contains("Azurite-Table", StringComparison.OrdinalIgnoreCase) && !instance.HasExited)
                            return true;
                    }
                }
            }
            catch (Exception ex) when (ex is HttpRequestException or OperationCanceledException && !ct.IsCancellationRequested)
            {
                // not listening yet, or the process just exited: the loop checks
            }

            try
            {
                await Task.Delay(50, exited.Token).ConfigureAwait(false);
            }
            catch (OperationCanceledException) when (!ct.IsCancellationRequested)
            {
            }
        }

        return false;
    }

    /// <summary>
    /// Loaded into Azurite's node with --require. A host killed with SIGKILL runs no cleanup of its own,
    /// and its children are reparented, not ended: but the kernel closes the write end of the child's
    /// stdin pipe, which only this process held, so the guard sees end-of-file and stops Azurite (SIGTERM:
    /// it flushes its metadata; SIGKILL if that takes over 10 s). The umask makes everything Azurite
    /// creates 0600/0700.
    /// </summary>
    private const string GuardScript = """
        'use strict';
        process.umask(0o077);
        let ending = false;
        const end = () => {
          if (ending) return;
          ending = true;
          setTimeout(() => process.kill(process.pid, 'SIGKILL'), 10000).unref();
          process.kill(process.pid, 'SIGTERM');
        };
        process.stdin.on('end', end);
        process.stdin.on('close', end);
        process.stdin.on('error', end);
        process.stdin.resume();
        // Azurite stops its servers on SIGTERM and exits when nothing is left to wait for; the lifeline read above
        // would keep it waiting (10 s, until Terminate kills it): let go of it.
        process.on('SIGTERM', () => { ending = true; process.stdin.destroy(); });
        """;

    /// <summary>A path as one NODE_OPTIONS word (double quotes, backslash escapes).</summary>
    private static string QuoteNodeOption(string path) => "\"" + path.Replace("\\", "\\\\", StringComparison.Ordinal).Replace("\"", "\\\"", StringComparison.Ordinal) + "\"";

    private static void CancelQuietly(CancellationTokenSource cts)
    {
        try
        {
            cts.Cancel();
        }
        catch (ObjectDisposedException)
        {
        }
    }

    /// <summary>An address as the host part of a URI (IPv6 in brackets).</summary>
    private static string UriHost(IPAddress address) =>
        address.AddressFamily == AddressFamily.InterNetworkV6 ? $"[{address}]" : address.ToString();

    private static int FreePort(IPAddress address)
    {
        using var listener = new TcpListener(address, 0);
        listener.Start();
        var port = ((IPEndPoint)listener.LocalEndpoint).Port;
        listener.Stop();
        return port;
    }

    private static void Collect(ConcurrentQueue<string> output, string? line)
    {
        if (line is null)
        {
            return;
        }

        output.Enqueue(line);
        while (output.Count > MaxOutputLines && output.TryDequeue(out _))
        {
        }
    }

    private static void Kill(Process process)
    {
        try
        {
            if (!process.HasExited)
            {
                process.Kill(entireProcessTree: true);
            }

            process.WaitForExit(5000);
        }
        catch (Exception ex) when (ex is InvalidOperationException or System.ComponentModel.Win32Exception or NotSupportedException)
        {
            // already gone
        }
    }

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "kill", SetLastError = true)]
    private static extern int SendSignal(int pid, int signal);

    /// <summary>SIGTERM, then up to 10 s for Azurite to flush and exit.</summary>
    private static void Terminate(Process process)
    {
        try
        {
            if (!process.HasExited && !OperatingSystem.IsWindows() && SendSignal(process.Id, 15) == 0)
                process.WaitForExit(10_000);
        }
        catch (InvalidOperationException)
        {
            // already gone
        }
    }

    private static void TryDeleteDirectory(string path)
    {
        try
        {
            Directory.Delete(path, recursive: true);
        }
        catch (Exception ex) when (ex is IOException or UnauthorizedAccessException)
        {
            // best effort
        }
    }

    private static void InstallExitHook()
    {
        if (Interlocked.Exchange(ref s_exitHookInstalled, 1) == 0)
        {
            // A test host or runtime that exits without disposing must not leave emulators behind.
            AppDomain.CurrentDomain.ProcessExit += (_, _) =>
            {
                foreach (var instance in Live.Keys)
                {
                    instance.Dispose();
                }
            };
        }
    }
}

/// <summary>
/// HTTPS for an <see cref="AzuriteProcess"/>: a PEM certificate and its private key, and whether Azurite also
/// accepts OAuth bearer tokens (<c>--oauth basic</c>: it decodes the token and checks its issuer, audience and
/// lifetime, not its signature), as a managed identity sends them.
/// </summary>
public sealed record AzuriteHttps(string CertificatePemPath, string KeyPemPath, bool OAuth = false);
