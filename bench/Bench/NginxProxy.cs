using System.Diagnostics;
using System.Globalization;

namespace FaaST.Bench;

/// <summary>
/// nginx (Debian's nginx-light) as a reference reverse proxy in front of one instance: one worker process, HTTP/1.1
/// keep-alive connections to the upstream, no access log. It is what a hop costs in a mature C proxy on this machine,
/// measured in the same run as the frontend's hop (the floor the frontend's goal is judged against; bench scaling).
/// Its configuration, pid and logs live in a temporary folder removed on dispose.
/// </summary>
internal sealed class NginxProxy : IDisposable
{
    private readonly Process _process;
    private readonly DirectoryInfo _dir;

    private NginxProxy(Process process, DirectoryInfo dir, Uri address)
    {
        _process = process;
        _dir = dir;
        Address = address;
    }

    /// <summary>The proxy's address (loopback, a free port).</summary>
    public Uri Address { get; }

    /// <summary>Starts nginx in front of <paramref name="upstream"/>; null (with the reason) when nginx is not installed.</summary>
    public static async Task<(NginxProxy? Proxy, string? Missing)> StartAsync(Uri upstream)
    {
        var binary = new[] { "/usr/sbin/nginx", "/usr/bin/nginx" }.FirstOrDefault(File.Exists);
        if (binary is null)
            return (null, "nginx is not installed (apt-get install nginx-light; ./faast bench installs it)");
        var dir = Directory.CreateTempSubdirectory("faast-bench-nginx-");
        var port = PlatformProcess.FreePort();
        var config = Path.Combine(dir.FullName, "nginx.conf");
        File.WriteAllText(config, string.Create(CultureInfo.InvariantCulture, $$"""
            worker_processes 1;
            daemon off;
            pid {{dir.FullName}}/nginx.pid;
            error_log {{dir.FullName}}/error.log;
            events { worker_connections 1024; }
            http {
                access_log off;
                client_body_temp_path {{dir.FullName}}/body;
                proxy_temp_path {{dir.FullName}}/proxy;
                upstream instance { server {{upstream.Host}}:{{upstream.Port}}; keepalive 64; }
                server {
                    listen 127.0.0.1:{{port}};
                    location / { proxy_pass http://instance; proxy_http_version 1.1; proxy_set_header Connection ""; }
                }
            }
            """));
        var info = new ProcessStartInfo(binary) { UseShellExecute = false, RedirectStandardError = true, RedirectStandardOutput = true };
        foreach (var a in (string[])["-c", config, "-p", dir.FullName])
            info.ArgumentList.Add(a);
        var process = Process.Start(info)!;
        var address = new Uri($"http://127.0.0.1:{port}/");
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(5) };
        for (var waited = Stopwatch.StartNew(); waited.Elapsed < TimeSpan.FromSeconds(20); await Task.Delay(100))
        {
            if (process.HasExited)
                break;
            try
            {
                using var _ = await http.GetAsync(address);
                return (new NginxProxy(process, dir, address), null);
            }
            catch (HttpRequestException)
            {
                // not listening yet
            }
        }
        var error = File.Exists(Path.Combine(dir.FullName, "error.log")) ? File.ReadAllText(Path.Combine(dir.FullName, "error.log")) : "";
        if (!process.HasExited)
            process.Kill(entireProcessTree: true);
        process.Dispose();
        dir.Delete(recursive: true);
        throw new InvalidOperationException($"nginx ({binary} -c {config}) did not answer at {address} within 20 s: {error}");
    }

    public void Dispose()
    {
        if (!_process.HasExited)
            _process.Kill(entireProcessTree: true);
        _process.WaitForExit(5000);
        _process.Dispose();
        _dir.Delete(recursive: true);
    }
}
