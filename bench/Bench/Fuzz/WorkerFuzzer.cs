using System.Buffers.Binary;
using System.Diagnostics;
using System.Net;
using System.Net.Http.Headers;
using System.Text;
using FaaST.Protos.Worker;
using Google.Protobuf;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// The worker channel, from a fake worker. The host is started with a FAAST_HOME whose
/// workers/python/worker.py only writes down the port and worker id the host gave it and then
/// sleeps; the fuzzer dials in with that id, as a worker would, answers init, the environment
/// reload and function loads, and then sends odd messages (responses to unknown invocations, logs
/// of every level and size, replies to nothing, host-bound messages, unknown fields), odd answers to real invocations (bad
/// HTTP status codes and header names, wrong types, shared-memory references to anything), and in a
/// few sessions malformed protobuf and framing. Besides, calls that never were a worker: unknown
/// ids, no StartStream, random bytes. Oracle: the host stays up, a call it refuses or a stream it
/// ends gets a gRPC status, a well-formed odd message never costs the worker its channel, and a
/// well-behaved invocation still answers correctly after everything.
/// </summary>
public static class WorkerFuzzer
{
    public const string Path_ = "/faast.worker.v1.WorkerChannel/EventStream";

    /// <summary>The fake worker: records its arguments for the fuzzer, then waits to be killed.</summary>
    private const string FakeWorker = """
        import os, sys, time
        a = sys.argv
        port = a[a.index("--port") + 1]
        wid = a[a.index("--worker-id") + 1]
        d = REPORTS
        tmp = os.path.join(d, wid + ".tmp")
        with open(tmp, "w") as f:
            f.write(port)
        os.rename(tmp, os.path.join(d, wid + ".worker"))
        time.sleep(3600)
        """;

    /// <summary>Makes the fake FAAST_HOME; returns (home, the folder fake workers report to). The folder is written into the
    /// fake worker itself: a worker's environment is an allow-list (issue 19), so a variable of the harness's never reaches it.</summary>
    public static (string Home, string Reports) MakeFakeHome(string work)
    {
        var home = Path.Combine(work, "fake-home");
        Directory.CreateDirectory(Path.Combine(home, "workers", "python"));
        var reports = Path.Combine(work, "worker-reports");
        File.WriteAllText(Path.Combine(home, "workers", "python", "worker.py"), FakeWorker.Replace("\r", "", StringComparison.Ordinal)
            .Replace("REPORTS", System.Text.Json.JsonSerializer.Serialize(reports), StringComparison.Ordinal));
        File.WriteAllText(Path.Combine(home, "package.json"), "{}\n");
        Directory.CreateDirectory(reports);
        return (home, reports);
    }

    public static async Task<TargetResult> RunAsync(FuzzHost host, string reports, int seed, int count, TimeSpan budget, int malformedSessions)
    {
        var result = new TargetResult("worker", seed);
        var clock = Stopwatch.StartNew();
        using var invoker = new HttpMessageInvoker(new SocketsHttpHandler { UseCookies = false, EnableMultipleHttp2Connections = true });
        using var http = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(45) };
        long index = 0;
        var invocations = 0L;
        Session? session = null;
        try
        {
            session = await Session.OpenAsync(invoker, reports, TimeSpan.FromSeconds(60));
            // Calls that never were a worker (a quarter of the inputs), then odd traffic in batches,
            // each batch followed by a well-behaved invocation that must still answer correctly.
            var strangers = count / 4;
            for (; index < strangers && clock.Elapsed < budget; index++)
            {
                var r = new Random(FuzzRun.Mix(seed, 0x5753, index));
                var (bytes, what) = StrangerCall(r);
                var reply = await CallOnceAsync(invoker, session.Port, bytes);
                result.Count(reply.Status is { } st ? $"stranger_grpc_status_{st}" : "stranger_no_status");
                result.Add(reply.Status is { } s && s != 0
                    ? Outcome.Rejected
                    : Outcome.Crash(reply.Status == 0 ? $"a call that is not a started worker ({what}) got OK" : $"a call that is not a started worker ({what}) ended without a gRPC status: {reply.Failure}", reply.Failure ?? ""),
                    index, _ => $"{what}: base64:{Convert.ToBase64String(bytes.Length > 2000 ? bytes[..2000] : bytes)}");
            }
            var checks = 0;
            while (index < count - malformedSessions && clock.Elapsed < budget)
            {
                var batch = new List<string>();
                for (var k = 0; k < 25 && index < count - malformedSessions; k++, index++)
                {
                    var r = new Random(FuzzRun.Mix(seed, 0x574B, index));
                    if (r.Next(5) == 0)
                    {
                        // An odd answer to a real invocation.
                        session.NextAnswer = r;
                        var path = new[] { "/api/echo/odd", "/api/read/fuzzcheck", "/api/files/a/b" }[r.Next(3)];
                        var status = await StatusOfAsync(http, path, r.Next(3) == 0 ? "POST" : "GET");
                        invocations++;
                        result.Count(status is { } hs ? $"odd_answer_http_{hs}" : "odd_answer_no_http_response");
                        result.Add(status is null ? Outcome.Crash("a request whose worker answered oddly got no HTTP response", session.LastAnswer ?? "") : Outcome.Accepted,
                            index, _ => session.LastAnswer ?? "");
                        batch.Add("answer " + session.LastAnswer);
                    }
                    else
                    {
                        var (message, what) = OddMessage(r);
                        await session.SendAsync(message);
                        result.Add(Outcome.Accepted, index);
                        batch.Add(what);
                    }
                }
                // The barrier: a plain invocation answered properly must come back 200 with its body.
                session.NextAnswer = null;
                var ok = await StatusOfAsync(http, $"/api/echo/check{checks++}", "GET", expectBody: "fuzz-ok");
                if (ok != 200 || session.Ended)
                {
                    result.Add(Outcome.Crash("after well-formed odd worker messages, a proper invocation failed (or the host ended the worker's stream)",
                        $"HTTP {ok?.ToString(System.Globalization.CultureInfo.InvariantCulture) ?? "none"}; stream ended: {session.Ended} {session.EndStatus}"), -1,
                        _ => string.Join("\n", batch));
                    await session.DisposeAsync();
                    session = await Session.OpenAsync(invoker, reports, TimeSpan.FromSeconds(60));
                }
            }
            // Malformed messages: each must end the stream with a gRPC status; the host then starts a new worker.
            for (var m = 0; m < malformedSessions && clock.Elapsed < budget; m++, index++)
            {
                var r = new Random(FuzzRun.Mix(seed, 0x574D, index));
                var (bytes, what) = Malformed(r);
                await session.SendRawAsync(bytes);
                var ended = await session.WaitEndAsync(TimeSpan.FromSeconds(15));
                result.Count(ended ? $"malformed_ended_with_grpc_status_{session.EndStatus?.ToString(System.Globalization.CultureInfo.InvariantCulture) ?? "none"}" : "malformed_stream_kept_open");
                result.Add(ended && session.EndStatus is { } st and not 0 ? Outcome.Rejected
                    : ended && session.EndStatus == 0 ? Outcome.Crash("a malformed worker message ended the stream with grpc-status OK: the error is not reported to the worker", what)
                    : ended ? Outcome.Crash("a malformed worker message ended the stream without a gRPC status", what)
                    : Outcome.Accepted, index, _ => $"{what}: base64:{Convert.ToBase64String(bytes)}");
                await session.DisposeAsync();
                session = await Session.OpenAsync(invoker, reports, TimeSpan.FromSeconds(60));
            }
            if (index < count)
                result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {index} inputs";
            // Finally: a proper invocation through the (new) worker, and the status page.
            session.NextAnswer = null;
            var final = await StatusOfAsync(http, "/api/echo/final", "GET", expectBody: "fuzz-ok");
            var statusPage = await StatusOfAsync(http, "/admin/host/status", "GET");
            var good = final == 200 && statusPage == 200 && !host.Process.HasExited;
            result.Count(good ? "after_run_host_serves_correctly" : "after_run_host_broken");
            if (!good)
                result.Add(Outcome.Crash("after the run the host does not serve correctly", $"invocation {final}, status page {statusPage}, exited {host.Process.HasExited}"), -1);
        }
        catch (TimeoutException e)
        {
            result.Add(Outcome.Crash("the host stopped starting workers (no fake worker reported in time)", e.Message), -1);
        }
        finally
        {
            if (session is not null)
                await session.DisposeAsync();
        }
        result.Count("invocations_answered_oddly", invocations);
        result.Seconds = clock.Elapsed.TotalSeconds;
        return result;
    }

    private static async Task<int?> StatusOfAsync(HttpClient http, string path, string method, string? expectBody = null)
    {
        try
        {
            using var request = new HttpRequestMessage(new HttpMethod(method), path);
            if (method == "POST")
                request.Content = new StringContent("{\"key\": \"fuzzcheck\"}", Encoding.UTF8, "application/json");
            using var response = await http.SendAsync(request);
            var body = await response.Content.ReadAsStringAsync();
            if (expectBody is not null && !body.Contains(expectBody, StringComparison.Ordinal))
                return -(int)response.StatusCode;
            return (int)response.StatusCode;
        }
        catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
        {
            return null;
        }
    }

    // ---- what the fake worker sends ------------------------------------------------------------

    private static readonly string[] Strings =
    [
        "", "x", "\0", "\r\n", "../../../etc/passwd", "/dev/shm", "w1-0", "w999999-1", "%s%n", new string('s', 70_000), "😀", "\uFFFF", "$return",
        "req", "outblob", "inblob", "00000000-0000-0000-0000-000000000000",
    ];

    private static string S(Random r) => Strings[r.Next(Strings.Length)];

    private static (StreamingMessage, string) OddMessage(Random r)
    {
        var m = new StreamingMessage { RequestId = r.Next(3) == 0 ? S(r) : "" };
        string what;
        switch (r.Next(12))
        {
            case 0:
                m.InvocationResponse = OddResponse(r, S(r));
                what = "InvocationResponse for an unknown invocation";
                break;
            case 1:
            case 2:
                m.RpcLog = new RpcLog
                {
                    InvocationId = S(r), Category = S(r), Level = (RpcLog.Types.Level)r.Next(-3, 9), Message = r.Next(6) == 0 ? new string('m', r.Next(100_000, 1_500_000)) : S(r),
                    Exception = r.Next(3) == 0 ? new RpcException { Message = S(r), StackTrace = S(r), Source = S(r) } : null,
                };
                what = $"RpcLog level {(int)m.RpcLog.Level}";
                break;
            case 3:
                m.WorkerInitResponse = new WorkerInitResponse { WorkerVersion = S(r), Result = Status(r), Capabilities = { [S(r)] = S(r) } };
                what = "WorkerInitResponse to nothing";
                break;
            case 4:
                m.FunctionLoadResponse = new FunctionLoadResponse { FunctionId = S(r), Result = Status(r) };
                what = "FunctionLoadResponse to nothing";
                break;
            case 5:
                m.StartStream = new StartStream { WorkerId = S(r) };
                what = "StartStream again";
                break;
            case 6:
                m.InvocationRequest = new InvocationRequest { InvocationId = S(r), FunctionId = S(r) };
                what = "InvocationRequest (a host-bound message)";
                break;
            case 7:
                m.InvocationCancel = new InvocationCancel { InvocationId = S(r) };
                what = "InvocationCancel (a host-bound message)";
                break;
            case 8:
                m.WorkerTerminate = new WorkerTerminate { GracePeriodMs = r.Next(int.MinValue, int.MaxValue) };
                what = "WorkerTerminate (a host-bound message)";
                break;
            case 9:
                m.SharedMemoryReleased = new SharedMemoryReleased { Segments = { S(r), S(r) } };
                what = "SharedMemoryReleased";
                break;
            case 10:
                m.WorkerInitRequest = new WorkerInitRequest { HostVersion = S(r), FunctionAppDirectory = S(r) };
                what = "WorkerInitRequest (a host-bound message)";
                break;
            default:
                what = "an empty StreamingMessage";
                break;
        }
        return (m, what);
    }

    private static StatusResult? Status(Random r) => r.Next(4) == 0 ? null : new StatusResult
    {
        Status = (StatusResult.Types.Status)r.Next(-1, 5),
        Result = S(r),
        Exception = r.Next(2) == 0 ? null : new RpcException { Message = S(r), StackTrace = S(r) },
    };

    /// <summary>An answer to invocation <paramref name="id"/>: any shape a confused worker could send.</summary>
    public static InvocationResponse OddResponse(Random r, string id)
    {
        var response = new InvocationResponse { InvocationId = id, Result = r.Next(4) == 0 ? Status(r) : new StatusResult { Status = StatusResult.Types.Status.Success } };
        if (r.Next(3) != 0)
            response.ReturnValue = OddData(r, 0);
        for (var n = r.Next(0, 3); n > 0; n--)
            response.OutputData.Add(new ParameterBinding { Name = r.Next(2) == 0 ? "outblob" : S(r), Data = r.Next(6) == 0 ? null : OddData(r, 0) });
        return response;
    }

    private static TypedData OddData(Random r, int depth)
    {
        switch (r.Next(depth > 0 ? 5 : 7))
        {
            case 0: return new TypedData();
            case 1: return new TypedData { String = S(r) };
            case 2: return new TypedData { Json = new[] { "{", "null", "[1,", "\"x\"", "{\"a\":1}", S(r) }[r.Next(6)] };
            case 3: return new TypedData { Bytes = ByteString.CopyFrom(new byte[r.Next(0, 100_000)]) };
            case 4:
                var blob = new BlobData { Name = S(r), Uri = S(r), Length = r.Next(3) == 0 ? -1 : r.Next(0, 1000), Etag = S(r) };
                if (r.Next(2) == 0)
                    blob.SharedMemory = new SharedMemoryRef
                    {
                        Segment = S(r), Offset = new[] { 0L, -1L, long.MaxValue, 4096L }[r.Next(4)], Length = new[] { 0L, -1L, long.MaxValue, 5L, 1L << 40 }[r.Next(5)], Version = S(r),
                    };
                else
                    blob.Bytes = ByteString.CopyFromUtf8(S(r));
                return new TypedData { Blob = blob };
            default:
                var h = new HttpData
                {
                    StatusCode = new[] { 0, 200, 204, 304, -1, 1, 99, 600, 999, 1000, int.MaxValue, int.MinValue }[r.Next(12)],
                    Body = r.Next(4) == 0 ? null : OddData(r, depth + 1),
                };
                for (var n = r.Next(0, 4); n > 0; n--)
                    h.Headers[new[] { "x-a", "content-length", "transfer-encoding", "Content-Type", "bad\r\nname", "", " ", "x:y", "ü", "connection", "x-faast-invocation-id" }[r.Next(11)]]
                        = new[] { "1", "", "\r\n", "chunked", "-5", "text/plain", "a\0b", new string('v', 20_000), "ü" }[r.Next(9)];
                return new TypedData { Http = h };
        }
    }

    private static (byte[], string) Malformed(Random r)
    {
        var junk = new byte[r.Next(1, 64)];
        r.NextBytes(junk);
        return r.Next(4) switch
        {
            0 => (RawGrpc.Frame(junk), "random bytes as a StreamingMessage"),
            1 => (RawGrpc.Frame([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), "a length-delimited field longer than the message"),
            2 => (RawGrpc.Frame(new StreamingMessage { StartStream = new StartStream() }.ToByteArray(), compressed: 1), "a frame flagged compressed"),
            _ => (RawGrpc.Frame([0x92, 0x01, 0x03, 0x22, 0x01, 0xFF]), "an RpcLog whose message is invalid UTF-8"),
        };
    }

    /// <summary>A call from something that is not a started worker.</summary>
    private static (byte[], string) StrangerCall(Random r)
    {
        var junk = new byte[r.Next(0, 80)];
        r.NextBytes(junk);
        return r.Next(5) switch
        {
            0 => (RawGrpc.Frame(new StreamingMessage { StartStream = new StartStream { WorkerId = new[] { "", "python-0-1-x", "node-0-1-" + Guid.Empty.ToString("N"), "\0", "ü" }[r.Next(5)] } }), "StartStream with an id the host never gave"),
            1 => (RawGrpc.Frame(new StreamingMessage { RpcLog = new RpcLog { Message = "hi" } }), "a first message that is not StartStream"),
            2 => ([], "no message at all"),
            3 => (RawGrpc.Frame(junk), "random bytes"),
            _ => (junk, "random bytes without framing"),
        };
    }

    private sealed record OnceReply(int? Status, string? Failure);

    private static async Task<OnceReply> CallOnceAsync(HttpMessageInvoker invoker, int port, byte[] body)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
        using var request = NewRequest(port, new ByteArrayContent(body));
        try
        {
            using var response = await invoker.SendAsync(request, cts.Token);
            await response.Content.ReadAsByteArrayAsync(cts.Token);
            return new OnceReply(GrpcStatusOf(response), null);
        }
        catch (Exception e) when (e is HttpRequestException or IOException or OperationCanceledException)
        {
            return new OnceReply(null, e.Message);
        }
    }

    private static HttpRequestMessage NewRequest(int port, HttpContent content)
    {
        content.Headers.ContentType = new MediaTypeHeaderValue("application/grpc");
        var request = new HttpRequestMessage(HttpMethod.Post, $"http://127.0.0.1:{port}{Path_}")
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = content,
        };
        request.Headers.TE.ParseAdd("trailers");
        return request;
    }

    private static int? GrpcStatusOf(HttpResponseMessage response)
    {
        var headers = response.TrailingHeaders.Contains("grpc-status") ? (HttpHeaders)response.TrailingHeaders : response.Headers;
        return headers.TryGetValues("grpc-status", out var v) && int.TryParse(v.First(), out var s) ? s : null;
    }

    /// <summary>One fake worker's stream: init and loads answered, invocations answered by <see cref="NextAnswer"/>.</summary>
    private sealed class Session : IAsyncDisposable
    {
        private readonly PushContent _content;
        private readonly HttpRequestMessage _request;
        private readonly SemaphoreSlim _write = new(1, 1);
        private readonly TaskCompletionSource _end = new(TaskCreationOptions.RunContinuationsAsynchronously);
        private Stream _requests = null!;
        private HttpResponseMessage? _response;
        private Task _reader = Task.CompletedTask;

        private Session(int port, HttpRequestMessage request, PushContent content)
        {
            Port = port;
            _request = request;
            _content = content;
        }

        public int Port { get; }

        /// <summary>How to answer the next invocation: null answers properly ("fuzz-ok"), else oddly from this generator.</summary>
        public Random? NextAnswer { get; set; }

        public string? LastAnswer { get; private set; }

        public bool Ended => _end.Task.IsCompleted;

        public int? EndStatus { get; private set; }

        private readonly TaskCompletionSource _ready = new(TaskCreationOptions.RunContinuationsAsynchronously);

        /// <summary>Waits for the host's next fake worker to report, dials in as it, and answers init and loads.</summary>
        public static async Task<Session> OpenAsync(HttpMessageInvoker invoker, string reports, TimeSpan timeout)
        {
            var deadline = DateTime.UtcNow + timeout;
            string? file;
            while ((file = Directory.EnumerateFiles(reports, "*.worker").FirstOrDefault()) is null)
            {
                if (DateTime.UtcNow > deadline)
                    throw new TimeoutException($"no fake worker reported within {timeout.TotalSeconds:0} s");
                await Task.Delay(50);
            }
            var port = int.Parse(await File.ReadAllTextAsync(file), System.Globalization.CultureInfo.InvariantCulture);
            var id = Path.GetFileNameWithoutExtension(file);
            File.Delete(file);
            var content = new PushContent();
            var session = new Session(port, NewRequest(port, content), content);
            var sending = invoker.SendAsync(session._request, CancellationToken.None);
            session._requests = await content.Stream.WaitAsync(TimeSpan.FromSeconds(20));
            await session.SendAsync(new StreamingMessage { StartStream = new StartStream { WorkerId = id } });
            session._response = await sending.WaitAsync(TimeSpan.FromSeconds(20));
            session._reader = Task.Run(session.ReadLoopAsync);
            var left = deadline - DateTime.UtcNow;
            await session._ready.Task.WaitAsync(left > TimeSpan.Zero ? left : TimeSpan.FromSeconds(1));
            return session;
        }

        public async Task SendAsync(StreamingMessage message) => await SendRawAsync(RawGrpc.Frame(message));

        public async Task SendRawAsync(byte[] bytes)
        {
            await _write.WaitAsync();
            try
            {
                if (Ended)
                    return;
                await _requests.WriteAsync(bytes);
                await _requests.FlushAsync();
            }
            catch (Exception e) when (e is IOException or ObjectDisposedException or HttpRequestException or OperationCanceledException)
            {
                // The host ended the stream; the reader records how.
            }
            finally
            {
                _write.Release();
            }
        }

        public async Task<bool> WaitEndAsync(TimeSpan timeout)
        {
            try
            {
                await _end.Task.WaitAsync(timeout);
                return true;
            }
            catch (TimeoutException)
            {
                return false;
            }
        }

        private async Task ReadLoopAsync()
        {
            var loads = 0;
            try
            {
                var body = await _response!.Content.ReadAsStreamAsync();
                var header = new byte[5];
                while (true)
                {
                    try
                    {
                        await body.ReadExactlyAsync(header);
                    }
                    catch (EndOfStreamException)
                    {
                        break;
                    }
                    var payload = new byte[BinaryPrimitives.ReadUInt32BigEndian(header.AsSpan(1))];
                    await body.ReadExactlyAsync(payload);
                    var message = StreamingMessage.Parser.ParseFrom(payload);
                    switch (message.ContentCase)
                    {
                        case StreamingMessage.ContentOneofCase.WorkerInitRequest:
                            await SendAsync(new StreamingMessage
                            {
                                RequestId = message.RequestId,
                                WorkerInitResponse = new WorkerInitResponse { WorkerVersion = "fuzz", Result = new StatusResult { Status = StatusResult.Types.Status.Success } },
                            });
                            break;
                        case StreamingMessage.ContentOneofCase.FunctionEnvironmentReloadRequest:
                            await SendAsync(new StreamingMessage
                            {
                                RequestId = message.RequestId,
                                FunctionEnvironmentReloadResponse = new FunctionEnvironmentReloadResponse { Result = new StatusResult { Status = StatusResult.Types.Status.Success } },
                            });
                            break;
                        case StreamingMessage.ContentOneofCase.FunctionLoadRequest:
                            await SendAsync(new StreamingMessage
                            {
                                RequestId = message.RequestId,
                                FunctionLoadResponse = new FunctionLoadResponse { FunctionId = message.FunctionLoadRequest.FunctionId, Result = new StatusResult { Status = StatusResult.Types.Status.Success } },
                            });
                            if (++loads >= 5) // the fuzz app's five functions
                                _ready.TrySetResult();
                            break;
                        case StreamingMessage.ContentOneofCase.InvocationRequest:
                            var id = message.InvocationRequest.InvocationId;
                            InvocationResponse answer;
                            if (NextAnswer is { } r)
                            {
                                answer = OddResponse(r, id);
                                var text = answer.ToString();
                                LastAnswer = text.Length > 1500 ? text[..1500] + "..." : text;
                            }
                            else
                            {
                                answer = new InvocationResponse
                                {
                                    InvocationId = id,
                                    Result = new StatusResult { Status = StatusResult.Types.Status.Success },
                                    ReturnValue = new TypedData { Http = new HttpData { StatusCode = 200, Body = new TypedData { String = "fuzz-ok" } } },
                                };
                            }
                            await SendAsync(new StreamingMessage { InvocationResponse = answer });
                            break;
                    }
                }
                EndStatus = GrpcStatusOf(_response);
            }
            catch (Exception e) when (e is IOException or HttpRequestException or InvalidProtocolBufferException or ObjectDisposedException or OperationCanceledException)
            {
                EndStatus = _response is null ? null : GrpcStatusOf(_response);
            }
            finally
            {
                _end.TrySetResult();
                _ready.TrySetResult();
            }
        }

        public async ValueTask DisposeAsync()
        {
            _content.Done.TrySetResult();
            _response?.Dispose();
            _request.Dispose();
            try
            {
                await _reader.WaitAsync(TimeSpan.FromSeconds(5));
            }
            catch (TimeoutException)
            {
                // left to die with the connection
            }
        }
    }

    /// <summary>A request body the fuzzer writes into while the call runs.</summary>
    private sealed class PushContent : HttpContent
    {
        private readonly TaskCompletionSource<Stream> _stream = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public TaskCompletionSource Done { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public Task<Stream> Stream => _stream.Task;

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context)
        {
            _stream.TrySetResult(stream);
            await Done.Task;
        }

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }
}
