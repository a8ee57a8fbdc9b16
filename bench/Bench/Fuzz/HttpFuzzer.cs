using System.Diagnostics;
using System.Net.Sockets;
using System.Text;
using System.Text.RegularExpressions;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// HTTP requests to a real host serving bench/apps/fuzz-app, written byte by byte on their own
/// connections: methods, paths with percent-encoding, CR, LF and NUL, route parameters, query
/// strings, headers, bodies (JSON, invalid UTF-8, chunked, wrong lengths). Oracle: a well-formed
/// request gets a response with a status below 500, or 503/504 (documented); a deliberately
/// malformed one gets a 4xx or its connection closed, never a 5xx; afterwards the host still serves
/// its status page and the functions answer correctly.
/// </summary>
public static partial class HttpFuzzer
{
    private sealed record Request(byte[] Bytes, bool Malformed, string Route, bool HalfClose);

    private static readonly string[] Methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "get", "TRACE", "PROPFIND", "X-CUSTOM"];
    private static readonly string[] Routes = ["echo", "store", "read", "lookup", "files", "admin", "other"];

    private static readonly string[] Segments =
    [
        "a", "abc", "x.txt", "%20", "%00", "%2F", "%2f..%2f", "%ZZ", "%", "%C0%AF", "%FF", "%E2%80%AE", "%F0%9F%98%80", "%ED%A0%80", "..", ".",
        "a%3Fb", "a%23b", "%7B%7D", "{x}", "%25", "~", "-", "$", "%24return", "CON", "a;b", "a=b", "1", "-1", "99999999999999999999", "0x10",
        "a+b", "%2B", "%5C", "%0D%0A", "%09", "é", "%C3%A9", "ü", "😀", "AB", "%41%42", "a:b", "@", "'", "%22",
    ];

    private static readonly string[] ContentTypes =
    [
        "application/json", "application/json; charset=utf-8", "text/plain", "application/octet-stream", "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x", "application/grpc", "JSON", "text/json;;;", "application/json; charset=utf-16", "",
    ];

    public static async Task<TargetResult> RunAsync(FuzzHost host, int seed, int count, TimeSpan budget, int concurrency = 4)
    {
        var result = new TargetResult("http", seed);
        var clock = Stopwatch.StartNew();
        var gate = new object();
        var next = await FuzzRun.ForEachInputAsync(concurrency, count, clock, budget, async i =>
        {
            var request = Generate(new Random(FuzzRun.Mix(seed, 0x4854, i)));
            var (outcome, counter) = await SendAsync(host, request);
            lock (gate)
            {
                if (counter is not null)
                    result.Count(counter);
                result.Add(outcome, i, _ => Printable(request.Bytes));
            }
            return true;
        });
        if (next < count)
            result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {next} requests";
        result.Seconds = clock.Elapsed.TotalSeconds;
        await CheckAfterAsync(host, result);
        return result;
    }

    /// <summary>After the run: still up, status page and every function correct.</summary>
    public static async Task CheckAfterAsync(FuzzHost host, TargetResult result)
    {
        var problems = new List<string>();
        if (host.Process.HasExited)
            problems.Add($"the host exited with {host.Process.ExitCode}");
        else
        {
            using var client = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(30) };
            async Task Expect(string what, Func<Task<HttpResponseMessage>> call, int status, string? body)
            {
                try
                {
                    using var r = await call();
                    var text = await r.Content.ReadAsStringAsync();
                    if ((int)r.StatusCode != status || (body is not null && !text.Contains(body, StringComparison.Ordinal)))
                        problems.Add($"{what}: {(int)r.StatusCode} {text[..Math.Min(200, text.Length)]}");
                }
                catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                {
                    problems.Add($"{what}: {e.Message}");
                }
            }
            await Expect("GET /admin/host/status", () => client.GetAsync("/admin/host/status"), 200, "\"functions\"");
            await Expect("GET /api/echo/hello", () => client.GetAsync("/api/echo/hello"), 200, "\"name\": \"hello\"");
            await Expect("POST /api/store/fuzzcheck", () => client.PostAsync("/api/store/fuzzcheck", new StringContent("hello")), 200, "5");
            await Expect("GET /api/read/fuzzcheck", () => client.GetAsync("/api/read/fuzzcheck"), 200, "5");
            await Expect("POST /api/lookup/1 {key}", () => client.PostAsync("/api/lookup/1", new StringContent("{\"key\": \"fuzzcheck\"}", Encoding.UTF8, "application/json")), 200, "5");
            await Expect("GET /api/files/a/b/c", () => client.GetAsync("/api/files/a/b/c"), 200, "a/b/c");
        }
        if (host.UnhandledException() is { } unhandled)
            problems.Add("unhandled exception in the host's output: " + unhandled);
        result.Count(problems.Count == 0 ? "after_run_host_serves_correctly" : "after_run_host_broken");
        foreach (var p in problems)
            result.Add(Outcome.Crash("after the run: " + Regex.Replace(p, "[0-9a-f]{8,}", "…")[..Math.Min(120, p.Length)], p), -1);
    }

    private static async Task<(Outcome, string?)> SendAsync(FuzzHost host, Request request)
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(request.Malformed ? 10 : 40));
        var response = new MemoryStream();
        try
        {
            await socket.ConnectAsync(System.Net.IPAddress.Loopback, host.Port, timeout.Token);
            await socket.SendAsync(request.Bytes, SocketFlags.None, timeout.Token);
            if (request.HalfClose)
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
            return request.Malformed
                ? (Outcome.Rejected, "malformed_connection_reset")
                : (Outcome.Crash($"connection {e.SocketErrorCode} on a well-formed request to {request.Route}", e.Message), null);
        }
        catch (SocketException)
        {
            // A reset after the response (e.g. the body was not read): the response counts.
        }
        catch (OperationCanceledException) when (response.Length == 0)
        {
            return request.Malformed
                ? (Outcome.Rejected, "malformed_no_answer_until_timeout")
                : (Outcome.Crash($"no response within 40 s to a well-formed request to {request.Route}", ""), null);
        }
        catch (OperationCanceledException)
        {
            // Got a response, the connection just stayed open.
        }
        var text = Encoding.Latin1.GetString(response.GetBuffer(), 0, (int)response.Length);
        if (text.Length == 0)
            return request.Malformed
                ? (Outcome.Rejected, "malformed_connection_closed")
                : (Outcome.Crash($"connection closed without a response to a well-formed request to {request.Route}", ""), null);
        var m = StatusLine().Match(text);
        if (!m.Success)
            return (Outcome.Crash("a response that is not HTTP", text[..Math.Min(200, text.Length)]), null);
        var status = int.Parse(m.Groups[1].Value, System.Globalization.CultureInfo.InvariantCulture);
        // 505 is the right answer to a request line with a version that is not HTTP/1.x.
        if (status < 500 || status is 503 or 504 || (status == 505 && request.Malformed))
            return (status < 400 ? Outcome.Accepted : Outcome.Rejected, $"status_{status}");
        var body = text.IndexOf("\r\n\r\n", StringComparison.Ordinal) is var b and >= 0 ? text[(b + 4)..] : "";
        var error = ErrorField().Match(body) is { Success: true } em ? em.Groups[1].Value : body;
        // One cause per status, route and message shape (ids and numbers masked).
        var shape = Regex.Replace(error, "[0-9a-f]{8,}|\\d+", "#");
        shape = shape.Length > 90 ? shape[..90] : shape;
        return (Outcome.Crash($"{status} from {request.Route}{(request.Malformed ? " (malformed request)" : "")}: {shape}", Latin(body, 600)), $"status_{status}");
    }

    private static string Latin(string s, int max) => s.Length > max ? s[..max] + "..." : s;

    [GeneratedRegex("^HTTP/1\\.[01] (\\d{3})")]
    private static partial Regex StatusLine();

    [GeneratedRegex("\"error\":\"((?:[^\"\\\\]|\\\\.)*)\"")]
    private static partial Regex ErrorField();

    /// <summary>One request: mostly well-formed with odd content, about a fifth deliberately malformed.</summary>
    private static Request Generate(Random r)
    {
        var malformed = false;
        var halfClose = false;
        var route = Routes[r.Next(Routes.Length)];
        var method = r.Next(8) == 0 ? Methods[r.Next(Methods.Length)] : route switch
        {
            "store" => r.Next(2) == 0 ? "POST" : "PUT",
            "lookup" => "POST",
            _ => r.Next(4) == 0 ? "POST" : "GET",
        };
        string Segment()
        {
            return r.Next(10) switch
            {
                0 => new string('a', r.Next(200, 9000)),
                1 => Segments[r.Next(Segments.Length)] + Segments[r.Next(Segments.Length)],
                _ => Segments[r.Next(Segments.Length)],
            };
        }
        var path = route switch
        {
            "echo" => "/api/echo/" + Segment(),
            "store" => "/api/store/" + Segment(),
            "read" => "/api/read/" + Segment(),
            "lookup" => "/api/lookup/" + (r.Next(3) == 0 ? Segment() : r.Next(-5, 100000).ToString(System.Globalization.CultureInfo.InvariantCulture)),
            "files" => "/api/files/" + string.Join("/", Enumerable.Range(0, r.Next(0, 6)).Select(_ => Segment())),
            "admin" => r.Next(3) switch { 0 => "/admin/host/status", 1 => "/admin/cache", _ => "/admin/" + Segment() },
            _ => r.Next(3) switch { 0 => "/", 1 => "/api/", _ => "/" + Segment() + "/" + Segment() },
        };
        if (r.Next(3) == 0)
        {
            var pairs = Enumerable.Range(0, r.Next(1, 5)).Select(_ => (r.Next(3) == 0 ? "key" : Segment()) + (r.Next(5) == 0 ? "" : "=" + Segment()));
            path += "?" + string.Join("&", pairs);
        }
        // Deliberately malformed request lines: raw CR, LF, NUL, spaces, bytes above 0x7F, no path.
        if (r.Next(12) == 0)
        {
            malformed = true;
            var bad = new[] { "\r", "\n", "\0", " ", "\t", "\u00ff", "\r\n", "%" }[r.Next(8)];
            var at = r.Next(1, path.Length + 1);
            path = path[..at] + bad + path[at..];
            if (bad == "%")
                malformed = false; // a lone % is only a bad escape, not bad HTTP
        }
        var version = "HTTP/1.1";
        if (r.Next(40) == 0)
        {
            version = new[] { "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "http/1.1", "HTTP/1.1x", "" }[r.Next(6)];
            malformed |= version is not "HTTP/1.0";
        }
        if (r.Next(60) == 0)
        {
            method = new[] { "G ET", "", "GET\0", new string('G', 5000) }[r.Next(4)];
            malformed = true;
        }
        var headers = new List<string>();
        if (version != "HTTP/1.0" || r.Next(2) == 0)
            headers.Add("Host: " + (r.Next(30) == 0 ? new[] { "", "a b", "ünï", "127.0.0.1:99999", new string('h', 3000) }[r.Next(5)] : "127.0.0.1"));
        headers.Add("Connection: close");
        byte[] body = [];
        if (method is "POST" or "PUT" or "PATCH" || r.Next(6) == 0)
        {
            body = r.Next(6) switch
            {
                0 => [],
                1 => Encoding.UTF8.GetBytes("{\"key\": \"" + Segment() + "\", \"n\": " + r.Next() + "}"),
                2 => InvalidUtf8Json(r),
                3 => RandomBytes(r, r.Next(1, 4096)),
                4 => Encoding.UTF8.GetBytes(new string('x', r.Next(0, 2) == 0 ? r.Next(1, 100) : r.Next(100_000, 1_200_000))),
                _ => Encoding.UTF8.GetBytes(r.Next(2) == 0 ? "[1,2,3]" : "{\"key\": {\"nested\": [null, true, 1e999]}, \"key\": \"dup\"}"),
            };
            headers.Add("Content-Type: " + ContentTypes[r.Next(ContentTypes.Length)]);
        }
        var chunked = body.Length > 0 && r.Next(5) == 0;
        if (chunked)
            headers.Add("Transfer-Encoding: chunked");
        else if (body.Length > 0 || r.Next(3) == 0)
        {
            var length = body.Length;
            if (r.Next(15) == 0)
            {
                // A Content-Length that does not match: too big leaves the server waiting for bytes
                // that never come (we close our side), negative or not a number is bad HTTP.
                (length, malformed) = (r.Next(3) switch { 0 => length + r.Next(1, 1000), 1 => -1, _ => length }, true);
                if (length == body.Length)
                    headers.Add("Content-Length: " + new[] { "abc", "1e3", "99999999999999999999999", "1, 2" }[r.Next(4)]);
                halfClose = true;
            }
            if (!headers.Any(h => h.StartsWith("Content-Length", StringComparison.Ordinal)))
                headers.Add("Content-Length: " + length.ToString(System.Globalization.CultureInfo.InvariantCulture));
        }
        for (var i = r.Next(0, 4); i > 0; i--)
        {
            var (name, value) = r.Next(8) switch
            {
                0 => ("X-" + Segment().Replace("%", "", StringComparison.Ordinal), Segment()),
                1 => ("Accept", "*/*"),
                2 => ("X-Long", new string('v', r.Next(1000, 40000))),
                3 => ("Cookie", string.Join("; ", Enumerable.Range(0, r.Next(1, 50)).Select(k => $"c{k}={Segment()}"))),
                4 => ("x-faast-invocation-id", Segment()),
                5 => ("Expect", "100-continue"),
                6 => ("Content-Encoding", "gzip"),
                _ => ("Authorization", "FaaST-Peer " + Segment()),
            };
            if (name.Any(c => c <= ' ' || c >= 0x7F || "()<>@,;:\\\"/[]?={}".Contains(c, StringComparison.Ordinal)))
                malformed = true;
            headers.Add($"{name}: {value}");
        }
        if (r.Next(40) == 0)
        {
            // Bad header lines: no colon, a bare LF, NUL, a leading space (obsolete folding), a duplicate Content-Length.
            headers.Add(new[] { "NoColon", "Bad\nHeader: x", "X-Nul: a\0b", " folded", "Content-Length: 0" }[r.Next(5)]);
            malformed = true;
            halfClose = true;
        }
        var head = new StringBuilder();
        head.Append(method).Append(' ').Append(path).Append(' ').Append(version).Append("\r\n");
        foreach (var h in headers)
            head.Append(h).Append("\r\n");
        head.Append("\r\n");
        var bytes = new List<byte>(Encoding.UTF8.GetBytes(head.ToString()));
        if (chunked)
        {
            var at = 0;
            while (at < body.Length)
            {
                var n = Math.Min(body.Length - at, r.Next(1, 70_000));
                bytes.AddRange(Encoding.ASCII.GetBytes(n.ToString("x", System.Globalization.CultureInfo.InvariantCulture) + "\r\n"));
                bytes.AddRange(body.AsSpan(at, n).ToArray());
                bytes.AddRange("\r\n"u8.ToArray());
                at += n;
            }
            if (r.Next(10) == 0)
            {
                bytes.AddRange("zz\r\n"u8.ToArray()); // a chunk size that is not hex
                malformed = true;
                halfClose = true;
            }
            else
                bytes.AddRange("0\r\n\r\n"u8.ToArray());
        }
        else
            bytes.AddRange(body);
        return new Request(bytes.ToArray(), malformed, route, halfClose);
    }

    private static byte[] InvalidUtf8Json(Random r)
    {
        var bad = new byte[][] { [0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0x80], [0xF4, 0x90, 0x80, 0x80] }[r.Next(5)];
        return [.. "{\"key\": \"a"u8.ToArray(), .. bad, .. "b\", \"x\": 1}"u8.ToArray()];
    }

    private static byte[] RandomBytes(Random r, int n)
    {
        var b = new byte[n];
        r.NextBytes(b);
        return b;
    }

    /// <summary>The request for a report: printable ASCII as is, the rest escaped; long runs cut.</summary>
    public static string Printable(byte[] bytes)
    {
        var s = new StringBuilder();
        foreach (var b in bytes.Length > 1500 ? bytes[..1500] : bytes)
            s.Append(b is >= 0x20 and < 0x7F ? ((char)b).ToString() : b == '\r' ? "\\r" : b == '\n' ? "\\n" : $"\\x{b:x2}");
        if (bytes.Length > 1500)
            s.Append($"... ({bytes.Length} bytes)");
        return s.ToString();
    }
}
