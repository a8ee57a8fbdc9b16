using System.Diagnostics;
using System.Globalization;
using System.IO.Compression;
using System.Net.Sockets;
using System.Text;
using System.Text.RegularExpressions;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// A platform to fuzz: its frontend port, the admin key (null when it has none), whether it still runs, and
/// the errors its log gained since the last call. The bench gives a real platform process; the tests an
/// in-process PlatformHost.
/// </summary>
public sealed record PlatformTarget(int Port, string? AdminKey, Func<bool> Alive, Func<IReadOnlyList<string>> TakeLoggedErrors);

/// <summary>
/// The platform's deploy endpoint (zip bodies: mutated real packages, truncated, huge header fields, bad entry
/// names, random bytes) and its admin API (paths, methods, headers, bodies on /admin/platform/...), each input
/// written byte by byte on its own connection, half with the admin key (the authenticated paths are fuzzed too).
/// Oracle: no 5xx other than 503, the platform never exits, its log gains no unhandled exception; afterwards it
/// still answers its status with the key. The packages the deploy fuzzer mutates are refused only at their last
/// check (faast.json's minInstances above maxInstances), so mutations reach the zip reader, the extraction and
/// the validation without each accepted input starting instances; one input in a thousand is a working package
/// (a redeploy of one app).
/// </summary>
public static partial class PlatformFuzzer
{
    /// <summary>The base packages: a valid app refused only by its faast.json, and the same app valid.</summary>
    public static (byte[] LateRefused, byte[] Valid) Packages()
    {
        static byte[] Build(bool valid)
        {
            using var zip = new MemoryStream();
            using (var a = new ZipArchive(zip, ZipArchiveMode.Create, leaveOpen: true))
            {
                void Add(string name, string text)
                {
                    using var s = new StreamWriter(a.CreateEntry(name).Open());
                    s.Write(text);
                }
                Add("host.json", """{ "version": "2.0" }""");
                Add("local.settings.json", """{ "IsEncrypted": false, "Values": { "FUNCTIONS_WORKER_RUNTIME": "python" } }""");
                Add("Hello/function.json", """
                    { "bindings": [
                      { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"] },
                      { "type": "http", "direction": "out", "name": "$return" } ] }
                    """);
                Add("Hello/__init__.py", "import azure.functions as func\n\n\ndef main(req: func.HttpRequest) -> func.HttpResponse:\n    return func.HttpResponse(\"hello\")\n");
                if (!valid)
                    Add("faast.json", """{ "scale": { "minInstances": 5, "maxInstances": 2 } }""");
            }
            return zip.ToArray();
        }
        return (Build(valid: false), Build(valid: true));
    }

    private sealed record Input(byte[] Bytes, string Kind, bool Malformed);

    // --- the deploy endpoint --------------------------------------------------------------------------------

    public static async Task<TargetResult> RunDeployAsync(PlatformTarget target, int seed, int count, TimeSpan budget, int concurrency = 2)
    {
        var (late, valid) = Packages();
        return await RunAsync("platform-deploy", target, seed, count, budget, concurrency, 0x4450, r => DeployInput(r, target.AdminKey, late, valid));
    }

    /// <summary>Input <paramref name="index"/> of the deploy fuzzer (for a report or a test).</summary>
    public static byte[] DeployInputBytes(int seed, long index, string? key)
    {
        var (late, valid) = Packages();
        return DeployInput(new Random(FuzzRun.Mix(seed, 0x4450, index)), key, late, valid).Bytes;
    }

    private static Input DeployInput(Random r, string? key, byte[] late, byte[] valid)
    {
        var withKey = key is not null && r.Next(2) == 0;
        var workingPackage = r.Next(1000) == 0;
        byte[] body;
        string kind;
        if (workingPackage)
            (body, kind) = (valid, "a working package");
        else
        {
            switch (r.Next(8))
            {
                case 0: (body, kind) = (Flip(r, late), "bytes flipped"); break;
                case 1: (body, kind) = (late[..r.Next(0, late.Length)], "truncated"); break;
                case 2: (body, kind) = (HugeHeaderFields(r, late), "huge header fields"); break;
                case 3: (body, kind) = (BadNames(r), "bad entry names"); break;
                case 4: (body, kind) = (EndOnly(r), "an end record only"); break;
                case 5: (body, kind) = (RandomBytes(r, r.Next(0, 8192)), "random bytes"); break;
                case 6: (body, kind) = (Concat(late, RandomBytes(r, r.Next(1, 2000))), "trailing bytes"); break;
                default: (body, kind) = (late, "the package refused at its last check"); break;
            }
        }
        var name = workingPackage ? "fuzz-ok" : r.Next(20) == 0 ? new[] { "a", "x-y", "..", "%2e%2e", "A", "a%00b", "a.b", "-a", new string('a', 300) }[r.Next(9)] : "fuzz-" + r.Next(4);
        var method = r.Next(10) == 0 ? "POST" : "PUT";
        var head = new StringBuilder();
        head.Append(method).Append(" /admin/platform/apps/").Append(name).Append(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        if (withKey)
            head.Append("Authorization: Bearer ").Append(key).Append("\r\n");
        head.Append("Content-Type: ").Append(r.Next(6) == 0 ? "text/plain" : "application/zip").Append("\r\n");
        var malformed = false;
        if (r.Next(25) == 0)
        {
            head.Append("Transfer-Encoding: chunked\r\n\r\n");
            var bytes = new List<byte>(Encoding.ASCII.GetBytes(head.ToString()));
            for (var at = 0; at < body.Length;)
            {
                var n = Math.Min(body.Length - at, r.Next(1, 4096));
                bytes.AddRange(Encoding.ASCII.GetBytes(n.ToString("x", CultureInfo.InvariantCulture) + "\r\n"));
                bytes.AddRange(body.AsSpan(at, n).ToArray());
                bytes.AddRange("\r\n"u8.ToArray());
                at += n;
            }
            bytes.AddRange("0\r\n\r\n"u8.ToArray());
            return new Input(bytes.ToArray(), kind + ", chunked" + (withKey ? ", admin key" : ""), false);
        }
        var length = body.Length;
        if (r.Next(30) == 0)
        {
            // A Content-Length that promises more than comes: the platform waits, we close our side.
            length += r.Next(1, 5000);
            malformed = true;
        }
        head.Append("Content-Length: ").Append(length.ToString(CultureInfo.InvariantCulture)).Append("\r\n\r\n");
        return new Input([.. Encoding.ASCII.GetBytes(head.ToString()), .. body], kind + (withKey ? ", admin key" : ""), malformed);
    }

    private static byte[] Concat(byte[] a, byte[] b) => [.. a, .. b];

    private static byte[] Flip(Random r, byte[] source)
    {
        var b = (byte[])source.Clone();
        for (var i = r.Next(1, 12); i > 0; i--)
        {
            var at = r.Next(b.Length);
            b[at] = r.Next(3) switch { 0 => (byte)r.Next(256), 1 => 0xFF, _ => 0 };
        }
        return b;
    }

    /// <summary>The package with one local or central header's name length, extra length or sizes set to a huge value.</summary>
    private static byte[] HugeHeaderFields(Random r, byte[] source)
    {
        var b = (byte[])source.Clone();
        var headers = new List<(int At, bool Central)>();
        for (var i = 0; i + 4 <= b.Length; i++)
        {
            if (b[i] == 0x50 && b[i + 1] == 0x4b && b[i + 2] == 0x03 && b[i + 3] == 0x04)
                headers.Add((i, false));
            else if (b[i] == 0x50 && b[i + 1] == 0x4b && b[i + 2] == 0x01 && b[i + 3] == 0x02)
                headers.Add((i, true));
        }
        if (headers.Count == 0)
            return b;
        var (at, central) = headers[r.Next(headers.Count)];
        // Offsets in a local header: sizes 18/22, name length 26, extra length 28; in a central one: sizes 20/24, name 28, extra 30, comment 32, local offset 42.
        int[] fields = central ? [20, 24, 28, 30, 32, 42] : [18, 22, 26, 28];
        var field = fields[r.Next(fields.Length)];
        var wide = field is 18 or 22 || (central && field is 20 or 24 or 42);
        if (at + field + (wide ? 4 : 2) > b.Length)
            return b;
        if (wide)
            BitConverter.TryWriteBytes(b.AsSpan(at + field), r.Next(2) == 0 ? 0xFFFFFFFFu : (uint)r.Next());
        else
            BitConverter.TryWriteBytes(b.AsSpan(at + field), (ushort)0xFFFF);
        return b;
    }

    private static readonly string[] BadEntryNames =
    [
        "../escape.py", "../../etc/cron.d/x", "/etc/passwd", "a/../../b", "C:\\windows\\x", "a\\..\\..\\b", "a\0b", "", "/", "./host.json",
        "host.json", "HOST.JSON", "Hello/../../x", "%2e%2e/x", "a/" + new string('b', 5000), "\u202Eevil", "con", "a//b", "Hello/function.json/",
    ];

    /// <summary>A zip whose entries have bad names, duplicates, or a symbolic link's mode.</summary>
    private static byte[] BadNames(Random r)
    {
        using var zip = new MemoryStream();
        using (var a = new ZipArchive(zip, ZipArchiveMode.Create, leaveOpen: true))
        {
            var e = a.CreateEntry("host.json");
            using (var s = new StreamWriter(e.Open()))
                s.Write("""{ "version": "2.0" }""");
            for (var i = r.Next(1, 4); i > 0; i--)
            {
                var name = BadEntryNames[r.Next(BadEntryNames.Length)];
                ZipArchiveEntry entry;
                try
                {
                    entry = a.CreateEntry(name.Length == 0 ? "x" : name);
                }
                catch (ArgumentException)
                {
                    continue;
                }
                if (r.Next(3) == 0)
                    entry.ExternalAttributes = unchecked((int)(0xA1FFu << 16)); // a symbolic link (Unix mode 0120777)
                using var s = entry.Open();
                s.Write(Encoding.UTF8.GetBytes(r.Next(2) == 0 ? "/etc/shadow" : "print('x')"));
            }
        }
        return zip.ToArray();
    }

    /// <summary>An end-of-central-directory record alone, with counts, sizes and offsets drawn from the extremes.</summary>
    private static byte[] EndOnly(Random r)
    {
        var b = new MemoryStream();
        var w = new BinaryWriter(b);
        if (r.Next(2) == 0)
        {
            w.Write(0x06064b50u);
            w.Write(44UL);
            w.Write((ushort)45); w.Write((ushort)45);
            w.Write(0u); w.Write(0u);
            var entries = r.Next(3) switch { 0 => ulong.MaxValue, 1 => 50_000_000UL, _ => (ulong)r.Next() };
            w.Write(entries); w.Write(entries);
            w.Write(r.Next(2) == 0 ? 1UL << 40 : (ulong)r.Next());
            w.Write(r.Next(2) == 0 ? 0UL : ulong.MaxValue);
            w.Write(0x07064b50u); w.Write(0u); w.Write(0UL); w.Write(1u);
        }
        w.Write(0x06054b50u);
        ushort Count() => (ushort)(r.Next(3) switch { 0 => 0xFFFF, 1 => 0, _ => r.Next(65536) });
        w.Write((ushort)0); w.Write((ushort)0);
        w.Write(Count()); w.Write(Count());
        w.Write(r.Next(2) == 0 ? 0xFFFFFFFFu : (uint)r.Next());
        w.Write(r.Next(2) == 0 ? 0xFFFFFFFFu : (uint)r.Next(0, 100));
        w.Write((ushort)(r.Next(4) == 0 ? 0xFFFF : 0));
        w.Flush();
        return b.ToArray();
    }

    // --- the admin API -------------------------------------------------------------------------------------

    private static readonly string[] AdminPaths =
    [
        "/admin/platform", "/admin/platform/", "/admin/platform/apps", "/admin/platform/apps/", "/admin/platform/apps/{name}",
        "/admin/platform/apps/{name}/", "/admin/platform/apps/{name}/x", "/admin/platform/{seg}", "/admin/platform/apps/{name}?{seg}",
        "/admin/platform/../platform", "/admin/%70latform", "/ADMIN/PLATFORM", "/admin//platform", "/admin/platform%2fapps%2f{name}",
        "/admin/platform/apps/%2e%2e", "/admin/platform/apps/..%2f..%2fkeys", "/admin/platform?{seg}", "/admin/platform/keys", "/admin/platform/apps/{name}/keys",
    ];

    private static readonly string[] Segments =
    [
        "a", "fuzz-0", "x.y", "%00", "%2F", "..", ".", "%ZZ", "%", "%C0%AF", "%E2%80%AE", "😀", "a;b", "a=b", "CON", "{x}", "%0D%0A", "-", "A",
    ];

    private static readonly string[] AdminMethods = ["GET", "GET", "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", "get", "X"];

    public static Task<TargetResult> RunAdminAsync(PlatformTarget target, int seed, int count, TimeSpan budget, int concurrency = 4)
    {
        var (late, _) = Packages();
        return RunAsync("platform-admin", target, seed, count, budget, concurrency, 0x4144, r => AdminInput(r, target.AdminKey, target.Port, late));
    }

    private static Input AdminInput(Random r, string? key, int port, byte[] late)
    {
        string Segment() => r.Next(12) == 0 ? new string('s', r.Next(100, 6000)) : Segments[r.Next(Segments.Length)];
        var path = AdminPaths[r.Next(AdminPaths.Length)].Replace("{name}", r.Next(3) == 0 ? Segment() : "fuzz-" + r.Next(4), StringComparison.Ordinal)
            .Replace("{seg}", Segment(), StringComparison.Ordinal);
        var method = AdminMethods[r.Next(AdminMethods.Length)];
        var malformed = false;
        if (r.Next(25) == 0)
        {
            var bad = new[] { "\r", "\n", "\0", " ", "\u00ff" }[r.Next(5)];
            var at = r.Next(1, path.Length + 1);
            path = path[..at] + bad + path[at..];
            malformed = true;
        }
        var headers = new List<string>();
        headers.Add("Host: " + (r.Next(10) switch
        {
            0 => "evil.example",
            1 => $"evil.example:{port}",
            2 => "localhost",
            3 => "[::1]",
            4 => "",
            _ => $"127.0.0.1:{port}",
        }));
        headers.Add("Connection: close");
        var withKey = key is not null && r.Next(2) == 0;
        if (withKey)
            headers.Add("Authorization: " + (r.Next(10) == 0 ? "bearer " : "Bearer ") + key);
        else
        {
            var auth = r.Next(6) switch
            {
                0 => "Bearer " + Segment(),
                1 => "Bearer",
                2 => "Basic YWRtaW46YWRtaW4=",
                3 => "Bearer " + new string('k', r.Next(1000, 20000)),
                _ => null,
            };
            if (auth is not null)
                headers.Add("Authorization: " + auth);
        }
        if (withKey && r.Next(8) == 0)
            headers.Add("Authorization: Bearer duplicate");
        if (r.Next(5) == 0)
            headers.Add("Origin: " + new[] { "http://evil.example", $"http://127.0.0.1:{port}", "null", "", "http://localhost" }[r.Next(5)]);
        if (r.Next(8) == 0)
            headers.Add("Sec-Fetch-Site: " + new[] { "cross-site", "same-site", "same-origin", "none", "x" }[r.Next(5)]);
        for (var i = r.Next(0, 3); i > 0; i--)
            headers.Add(r.Next(4) switch
            {
                0 => "X-Forwarded-For: " + Segment(),
                1 => "X-Forwarded-Host: evil.example",
                2 => "Accept: " + Segment(),
                _ => "X-Long: " + new string('v', r.Next(100, 30000)),
            });
        byte[] body = [];
        if (method is "PUT" or "POST" or "PATCH" || r.Next(8) == 0)
        {
            body = r.Next(5) switch
            {
                0 => [],
                1 => Encoding.UTF8.GetBytes("{\"app\":\"" + Segment() + "\"}"),
                2 => RandomBytes(r, r.Next(1, 4096)),
                3 => late[..r.Next(late.Length)],
                _ => late,
            };
            headers.Add("Content-Type: " + new[] { "application/zip", "text/plain", "application/json", "multipart/form-data; boundary=x", "" }[r.Next(5)]);
        }
        if (body.Length > 0 || r.Next(3) == 0)
            headers.Add("Content-Length: " + body.Length.ToString(CultureInfo.InvariantCulture));
        var head = new StringBuilder().Append(method).Append(' ').Append(path).Append(" HTTP/1.1\r\n");
        foreach (var h in headers)
            head.Append(h).Append("\r\n");
        head.Append("\r\n");
        return new Input([.. Encoding.UTF8.GetBytes(head.ToString()), .. body], $"{method} {(path.Length > 60 ? path[..60] + "…" : path)}{(withKey ? " (admin key)" : "")}", malformed);
    }

    // --- the loop and the oracle ---------------------------------------------------------------------------

    private static async Task<TargetResult> RunAsync(string name, PlatformTarget target, int seed, int count, TimeSpan budget, int concurrency, int stream, Func<Random, Input> generate)
    {
        var result = new TargetResult(name, seed);
        var clock = Stopwatch.StartNew();
        var gate = new object();
        target.TakeLoggedErrors();
        var next = await FuzzRun.ForEachInputAsync(concurrency, count, clock, budget, async i =>
        {
            if (!target.Alive())
                return false;
            var input = generate(new Random(FuzzRun.Mix(seed, stream, i)));
            var (outcome, counter) = await SendAsync(target.Port, input);
            var errors = target.TakeLoggedErrors();
            lock (gate)
            {
                if (counter is not null)
                    result.Count(counter);
                result.Add(outcome, i, _ => $"[{input.Kind}] " + Printable(input.Bytes));
                foreach (var e in errors)
                {
                    result.Count("platform_logged_errors");
                    // One cause per exception type and message shape; which input was in flight goes in the detail.
                    var m = Regex.Match(e, @"([A-Za-z.]+(?:Exception|Error))(?::\s*([^\r\n]{0,80}))?");
                    var what = m.Success ? m.Groups[1].Value + (m.Groups[2].Success ? ": " + Regex.Replace(m.Groups[2].Value, "[0-9a-f]{8,}|\\d+", "#") : "") : "an error";
                    var detail = $"around input {i} ({input.Kind}): {(e.Length > 2000 ? e[..2000] : e)}";
                    result.Add(Outcome.Crash($"the platform logged {what}", detail), -1);
                }
            }
            return true;
        });
        if (next < count)
            result.Stopped = target.Alive() ? $"time bound of {budget.TotalSeconds:0} s reached after {next} inputs" : $"the platform exited after {next} inputs";
        result.Seconds = clock.Elapsed.TotalSeconds;
        await CheckAfterAsync(target, result);
        return result;
    }

    private static async Task CheckAfterAsync(PlatformTarget target, TargetResult result)
    {
        string? problem = null;
        if (!target.Alive())
            problem = "the platform exited";
        else
        {
            var request = $"GET /admin/platform HTTP/1.1\r\nHost: 127.0.0.1:{target.Port}\r\nConnection: close\r\n"
                + (target.AdminKey is null ? "" : $"Authorization: Bearer {target.AdminKey}\r\n") + "\r\n";
            var (outcome, counter) = await SendAsync(target.Port, new Input(Encoding.ASCII.GetBytes(request), "status", false));
            if (counter != "status_200")
                problem = $"GET /admin/platform with the key answered {counter ?? outcome.Signature}";
        }
        result.Count(problem is null ? "after_run_platform_serves" : "after_run_platform_broken");
        if (problem is not null)
            result.Add(Outcome.Crash("after the run: " + problem, problem), -1);
    }

    private static async Task<(Outcome, string?)> SendAsync(int port, Input input)
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(input.Malformed ? 10 : 120));
        var response = new MemoryStream();
        try
        {
            await socket.ConnectAsync(System.Net.IPAddress.Loopback, port, timeout.Token);
            await socket.SendAsync(input.Bytes, SocketFlags.None, timeout.Token);
            if (input.Malformed)
                socket.Shutdown(SocketShutdown.Send);
            var buffer = new byte[16384];
            while (response.Length < 1 << 20)
            {
                var n = await socket.ReceiveAsync(buffer, SocketFlags.None, timeout.Token);
                if (n == 0)
                    break;
                response.Write(buffer, 0, n);
            }
        }
        catch (SocketException e) when (response.Length == 0)
        {
            // A server may answer early (401, 413) and close while the body is still being sent.
            return (Outcome.Rejected, "connection_" + e.SocketErrorCode.ToString().ToLowerInvariant());
        }
        catch (SocketException)
        {
        }
        catch (OperationCanceledException) when (response.Length == 0)
        {
            return input.Malformed
                ? (Outcome.Rejected, "malformed_no_answer_until_timeout")
                : (Outcome.Crash($"no response within 120 s ({input.Kind})", ""), null);
        }
        catch (OperationCanceledException)
        {
        }
        var text = Encoding.Latin1.GetString(response.GetBuffer(), 0, (int)response.Length);
        if (text.Length == 0)
            return (Outcome.Rejected, "connection_closed");
        var m = StatusLine().Match(text);
        if (!m.Success)
            return (Outcome.Crash("a response that is not HTTP", text[..Math.Min(200, text.Length)]), null);
        var status = int.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture);
        if (status < 500 || status == 503 || (status == 505 && input.Malformed))
            return (status < 400 ? Outcome.Accepted : Outcome.Rejected, $"status_{status}");
        var body = text.IndexOf("\r\n\r\n", StringComparison.Ordinal) is var b and >= 0 ? text[(b + 4)..] : "";
        var shape = Regex.Replace(body, "[0-9a-f]{8,}|\\d+", "#");
        shape = shape.Length > 100 ? shape[..100] : shape;
        var kind = input.Kind.Split(',')[0];
        return (Outcome.Crash($"{status} on {(kind.Length > 40 ? kind[..40] : kind)}: {shape}", body.Length > 600 ? body[..600] : body), $"status_{status}");
    }

    /// <summary>The request for a report: printable ASCII as is, the rest escaped; long inputs cut.</summary>
    public static string Printable(byte[] bytes)
    {
        var s = new StringBuilder();
        foreach (var b in bytes.Length > 1500 ? bytes[..1500] : bytes)
            s.Append(b is >= 0x20 and < 0x7F ? ((char)b).ToString() : b == '\r' ? "\\r" : b == '\n' ? "\\n" : $"\\x{b:x2}");
        if (bytes.Length > 1500)
            s.Append($"... ({bytes.Length} bytes)");
        return s.ToString();
    }

    private static byte[] RandomBytes(Random r, int n)
    {
        var b = new byte[n];
        r.NextBytes(b);
        return b;
    }

    [GeneratedRegex("^HTTP/1\\.[01] (\\d{3})")]
    private static partial Regex StatusLine();
}
