using System.Net;
using FaaST.Protos.Worker;
using FaaST.Runtime.Workers;
using Google.Protobuf;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The worker pool on its own: real Python workers dialling a real Kestrel serving the worker
/// channel, started on standby (no app) and specialised afterwards.
/// </summary>
public sealed class WorkerPoolTests : IAsyncLifetime
{
    // Answers with who ran it and what it sees, so the test can tell a specialised worker.
    private const string WhoAmI = """
        import os
        import azure.functions as func

        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse(f"{os.getpid()}|{os.environ.get('STANDBY_TEST_SETTING')}|{os.getcwd()}")
        """;

    private readonly CapturingLoggerProvider _logs = new();
    private readonly ILoggerFactory _loggers;
    private WebApplication _web = null!;
    private WorkerChannelService _service = null!;
    private int _port;
    private int _otherPort;

    public WorkerPoolTests() => _loggers = LoggerFactory.Create(b => b.AddProvider(_logs).SetMinimumLevel(LogLevel.Information));

    public async Task InitializeAsync()
    {
        var builder = WebApplication.CreateSlimBuilder();
        ListenOptions? listen = null, other = null;
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.Listen(IPAddress.Loopback, 0, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                listen = l;
            });
            // Another HTTP/2 port of the same host (as the peer port is), which must not take worker streams.
            k.Listen(IPAddress.Loopback, 0, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                other = l;
            });
        });
        _service = builder.Services.AddWorkerChannel(WorkerOptions.DefaultMaxMessageSize);
        _web = builder.Build();
        _web.MapWorkerChannel();
        await _web.StartAsync();
        _port = listen!.IPEndPoint!.Port;
        _otherPort = other!.IPEndPoint!.Port;
    }

    public async Task DisposeAsync()
    {
        await _web.StopAsync();
        await _web.DisposeAsync();
        _loggers.Dispose();
    }

    private WorkerPool NewPool(int processes, string? workersDirectory = null)
    {
        var pool = new WorkerPool(new WorkerOptions
        {
            Runtime = "python",
            ProcessCount = processes,
            WorkersDirectory = workersDirectory ?? Path.Combine(Repo.Root, "workers"),
            RestartDelay = TimeSpan.FromMilliseconds(100),
        }, _loggers);
        _service.Attach(pool, WorkerOptions.DefaultMaxMessageSize);
        pool.GrpcPort = _port;
        return pool;
    }

    [Fact]
    public async Task A_pool_started_with_no_app_and_then_specialised_to_a_sample_app_serves_its_invocations()
    {
        using var app = TestApp.CopySample("python-app")
            .Function("WhoAmI", TestApp.HttpFunctionJson, ("__init__.py", WhoAmI));
        File.WriteAllText(Path.Combine(app.Directory, "local.settings.json"), """
            { "Values": { "FUNCTIONS_WORKER_RUNTIME": "python", "STANDBY_TEST_SETTING": "the app's" } }
            """);
        var functionApp = FunctionApp.Load(app.Directory);
        await using var pool = NewPool(processes: 2);

        Assert.True(await pool.StartAsync(), _logs.All);
        Assert.Equal(2, pool.StartedWorkers);
        Assert.Equal(0, pool.ReadyWorkers);
        Assert.Null(pool.Specialization);
        var standbyPids = pool.WorkerProcessIds.Order().ToArray();

        Assert.True(await pool.SpecializeAsync(new WorkerSpecialization { App = functionApp }), _logs.All);
        Assert.Equal(2, pool.ReadyWorkers);
        Assert.Empty(pool.LoadErrors);
        // The same processes: specialisation loaded the app into them, it did not start new ones.
        Assert.Equal(standbyPids, pool.WorkerProcessIds.Order().ToArray());

        var hello = functionApp.Functions.Single(f => f.Name == "Hello");
        var response = await pool.InvokeAsync(hello, Request(hello, "?name=Standby"), CancellationToken.None);
        Assert.Equal(StatusResult.Types.Status.Success, response.Result.Status);
        Assert.Equal("Hello, Standby!", BodyOf(response));

        var whoAmI = functionApp.Functions.Single(f => f.Name == "WhoAmI");
        var (_, setting, cwd) = await WhoAnswersAsync(pool, whoAmI);
        Assert.Equal("the app's", setting);
        Assert.Equal(app.Directory, cwd);
    }

    [Fact]
    public async Task A_worker_that_crashes_after_specialisation_restarts_already_specialised()
    {
        using var app = new TestApp("python", settings: new() { ["STANDBY_TEST_SETTING"] = "after the crash" })
            .Function("WhoAmI", TestApp.HttpFunctionJson, ("__init__.py", WhoAmI));
        var functionApp = FunctionApp.Load(app.Directory);
        var whoAmI = functionApp.Functions.Single();
        await using var pool = NewPool(processes: 1);
        Assert.True(await pool.StartAsync(), _logs.All);
        Assert.True(await pool.SpecializeAsync(new WorkerSpecialization { App = functionApp }), _logs.All);
        var before = Assert.Single(pool.WorkerProcessIds);

        System.Diagnostics.Process.GetProcessById(before).Kill();
        await Eventually.TrueAsync(() => Task.FromResult(pool.ReadyWorkers == 1 && pool.WorkerProcessIds is [var pid] && pid != before),
            "the worker to restart", seconds: 60);

        var (pid, setting, cwd) = await WhoAnswersAsync(pool, whoAmI);
        Assert.NotEqual(before, pid);
        Assert.Equal("after the crash", setting);
        Assert.Equal(app.Directory, cwd);
    }

    [Fact]
    public async Task A_worker_stream_on_another_port_of_the_host_is_refused_before_it_reaches_the_pool()
    {
        await using var pool = NewPool(processes: 1);
        using var channel = Grpc.Net.Client.GrpcChannel.ForAddress($"http://127.0.0.1:{_otherPort}");
        // Refused as the call starts, before any message is read (so none is sent: the write could
        // race the refusal).
        using var call = channel.CreateCallInvoker().AsyncDuplexStreamingCall(WorkerChannelTests.EventStream, null, new Grpc.Core.CallOptions());
        var refused = await Assert.ThrowsAsync<Grpc.Core.RpcException>(() => call.ResponseStream.MoveNext(CancellationToken.None));
        Assert.Equal(Grpc.Core.StatusCode.NotFound, refused.StatusCode);
        Assert.Equal("not a worker endpoint", refused.Status.Detail);
    }

    // Found by ./faast bench fuzz (worker target) on Grpc.AspNetCore: a frame whose flag byte is
    // neither 0 nor 1, or whose length is past 2 GiB, ended the call with Unknown ("Exception was
    // thrown by handler"); the same after StartStream would have ended it with OK.
    [Theory]
    [InlineData(false, new byte[] { 0x07, 0, 0, 0, 1, 0 })]
    [InlineData(false, new byte[] { 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0 })]
    [InlineData(true, new byte[] { 0x07, 0, 0, 0, 1, 0 })]
    [InlineData(true, new byte[] { 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0 })]
    public async Task A_stream_that_is_no_grpc_framing_ends_with_InvalidArgument_naming_the_frame(bool afterStartStream, byte[] frame)
    {
        var scratch = Directory.CreateTempSubdirectory("faast-pool-standin-").FullName;
        try
        {
            // The pool's worker is a stand-in that reports its id and waits: the test plays that
            // worker (after StartStream) or a stranger (without).
            var reports = Path.Combine(scratch, "reports");
            Directory.CreateDirectory(Path.Combine(scratch, "python"));
            Directory.CreateDirectory(reports);
            File.WriteAllText(Path.Combine(scratch, "python", "worker.py"), WorkerChannelTests.StandInWorker);
            using var app = new TestApp("python", settings: new() { ["FAAST_TEST_WORKER_REPORTS"] = reports })
                .Function("WhoAmI", TestApp.HttpFunctionJson, ("__init__.py", WhoAmI));
            await using var pool = NewPool(processes: 1, workersDirectory: scratch);
            byte[] body = frame;
            if (afterStartStream)
            {
                _ = pool.SpecializeAsync(new WorkerSpecialization { App = FunctionApp.Load(app.Directory) });
                _ = pool.StartAsync();
                var (_, id) = await WorkerChannelTests.NextWorkerAsync(reports);
                var start = new StreamingMessage { StartStream = new StartStream { WorkerId = id } }.ToByteArray();
                var header = new byte[5];
                System.Buffers.Binary.BinaryPrimitives.WriteInt32BigEndian(header.AsSpan(1), start.Length);
                body = [.. header, .. start, .. frame];
            }
            await AssertEndsWithMalformedFrameAsync(body);
        }
        finally
        {
            File.WriteAllText(Path.Combine(scratch, "reports", "stop"), "");
            Directory.Delete(scratch, recursive: true);
        }
    }

    private async Task AssertEndsWithMalformedFrameAsync(byte[] body)
    {
        using var handler = new SocketsHttpHandler();
        using var http = new HttpMessageInvoker(handler);
        using var request = new HttpRequestMessage(HttpMethod.Post, $"http://127.0.0.1:{_port}/faast.worker.v1.WorkerChannel/EventStream")
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new ByteArrayContent(body),
        };
        request.Content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("application/grpc");
        request.Headers.TE.ParseAdd("trailers");
        using var response = await http.SendAsync(request, CancellationToken.None);
        await response.Content.ReadAsByteArrayAsync();
        // A call that fails before any message is sent answers "trailers-only": the status is in the headers.
        var headers = response.TrailingHeaders.Contains("grpc-status") ? (System.Net.Http.Headers.HttpHeaders)response.TrailingHeaders : response.Headers;
        Assert.True(headers.TryGetValues("grpc-status", out var status), "the call ended without a grpc-status");
        Assert.Equal("3", Assert.Single(status)); // InvalidArgument
        Assert.Contains("malformed gRPC frame", Uri.UnescapeDataString(headers.GetValues("grpc-message").Single()), StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_pool_refuses_an_app_whose_workers_must_run_as_another_user()
    {
        using var app = new TestApp("python").Function("WhoAmI", TestApp.HttpFunctionJson, ("__init__.py", WhoAmI));
        await using var pool = NewPool(processes: 1);
        var other = new WorkerIdentity("faast-someone-else", 54321, 54321);
        var e = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            pool.SpecializeAsync(new WorkerSpecialization { App = FunctionApp.Load(app.Directory), Identity = other }));
        Assert.Contains("faast-someone-else", e.Message, StringComparison.Ordinal);
        Assert.Contains("the host's user", e.Message, StringComparison.Ordinal);
        Assert.Contains("cannot change its user", e.Message, StringComparison.Ordinal);
        Assert.Null(pool.Specialization);
    }

    [Fact]
    public async Task A_pool_is_specialised_once_and_only_to_an_app_of_its_runtime()
    {
        using var app = new TestApp("python").Function("WhoAmI", TestApp.HttpFunctionJson, ("__init__.py", WhoAmI));
        using var nodeApp = new TestApp("node").Function("Hi", TestApp.HttpFunctionJson, ("index.js", "module.exports = async () => 'hi';"));
        await using var pool = NewPool(processes: 1);
        var wrongRuntime = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            pool.SpecializeAsync(new WorkerSpecialization { App = FunctionApp.Load(nodeApp.Directory) }));
        Assert.Contains("needs node workers; this pool runs python workers", wrongRuntime.Message, StringComparison.Ordinal);

        var first = new WorkerSpecialization { App = FunctionApp.Load(app.Directory) };
        using var giveUp = new CancellationTokenSource();
        var waiting = pool.SpecializeAsync(first, giveUp.Token); // not started: waits for workers that never come
        var again = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            pool.SpecializeAsync(new WorkerSpecialization { App = FunctionApp.Load(app.Directory) }));
        Assert.Contains("already runs the app", again.Message, StringComparison.Ordinal);
        Assert.Same(first, pool.Specialization);
        await giveUp.CancelAsync();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting);
    }

    private static async Task<(int Pid, string Setting, string Cwd)> WhoAnswersAsync(WorkerPool pool, FunctionDefinition function)
    {
        var response = await pool.InvokeAsync(function, Request(function, ""), CancellationToken.None);
        Assert.Equal(StatusResult.Types.Status.Success, response.Result.Status);
        var parts = BodyOf(response).Split('|');
        Assert.Equal(3, parts.Length);
        return (int.Parse(parts[0], System.Globalization.CultureInfo.InvariantCulture), parts[1], parts[2]);
    }

    private static string BodyOf(InvocationResponse response)
    {
        var body = response.ReturnValue.Http.Body;
        return body.DataCase == TypedData.DataOneofCase.Bytes ? body.Bytes.ToStringUtf8() : body.String;
    }

    private static InvocationRequest Request(FunctionDefinition function, string query)
    {
        var http = new HttpData { Method = "GET", Url = $"http://127.0.0.1/api/{function.Name}{query}", Body = new TypedData { Bytes = Google.Protobuf.ByteString.Empty } };
        foreach (var pair in query.TrimStart('?').Split('&', StringSplitOptions.RemoveEmptyEntries))
        {
            var kv = pair.Split('=', 2);
            http.Query[kv[0]] = kv.Length > 1 ? kv[1] : "";
        }
        return new InvocationRequest
        {
            InvocationId = Guid.NewGuid().ToString(),
            FunctionId = function.Id,
            InputData = { new ParameterBinding { Name = "req", Data = new TypedData { Http = http } } },
        };
    }
}
