using FaaST.Protos.Worker;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;
using RpcException = Grpc.Core.RpcException;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The worker channel against a worker the test plays itself: the host starts a stand-in
/// worker.py (from a FAAST_HOME of the test's own) that only reports the port and worker id it was
/// given; the test dials in with that id as the real worker would and sends what it likes.
/// </summary>
public sealed class WorkerChannelTests : IDisposable
{
    // Reports its port and id, then waits until the test lets it go (or the host kills it).
    internal const string StandInWorker = """
        import os, sys, time
        a = sys.argv
        d = os.environ["FAAST_TEST_WORKER_REPORTS"]
        wid = a[a.index("--worker-id") + 1]
        tmp = os.path.join(d, wid + ".tmp")
        with open(tmp, "w") as f:
            f.write(a[a.index("--port") + 1])
        os.rename(tmp, os.path.join(d, wid + ".worker"))
        while not os.path.exists(os.path.join(d, "stop")):
            time.sleep(0.05)
        """;

    // Storage nobody dials: the cache is off, there are no peers and no blob bindings.
    private const string UnusedStorage = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" +
        FaaST.Storage.StorageConnectionString.DevelopmentAccountKey + ";BlobEndpoint=http://127.0.0.1:9/devstoreaccount1";

    /// <summary>The worker's side of EventStream, as a worker's gRPC library calls it.</summary>
    internal static readonly Method<StreamingMessage, StreamingMessage> EventStream = new(
        MethodType.DuplexStreaming, "faast.worker.v1.WorkerChannel", "EventStream",
        Marshallers.Create(m => m.ToByteArray(), StreamingMessage.Parser.ParseFrom),
        Marshallers.Create(m => m.ToByteArray(), StreamingMessage.Parser.ParseFrom));

    /// <summary>The same method carrying raw bytes, to send what no StreamingMessage is.</summary>
    private static readonly Method<byte[], byte[]> RawEventStream = new(
        MethodType.DuplexStreaming, "faast.worker.v1.WorkerChannel", "EventStream",
        Marshallers.Create(b => b, b => b), Marshallers.Create(b => b, b => b));

    private readonly string _root = Directory.CreateTempSubdirectory("faast-standin-").FullName;

    public void Dispose() => Directory.Delete(_root, recursive: true);

    // Found by ./faast bench fuzz (worker target): the channel swallowed the parse error and the
    // stream ended with grpc-status 0, so the worker was told all was well.
    [Fact]
    public async Task A_malformed_message_from_a_worker_ends_its_stream_with_an_error_status_not_OK()
    {
        var home = Path.Combine(_root, "home");
        var reports = Path.Combine(_root, "reports");
        Directory.CreateDirectory(Path.Combine(home, "workers", "python"));
        Directory.CreateDirectory(reports);
        File.WriteAllText(Path.Combine(home, "workers", "python", "worker.py"), StandInWorker);
        File.WriteAllText(Path.Combine(home, "package.json"), "{}");
        using var app = new TestApp("python", settings: new() { ["FAAST_TEST_WORKER_REPORTS"] = reports })
            .Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", "def main(req): return 'hi'"));
        var starting = HostUnderTest.StartAsync(app.Directory, UnusedStorage, configure: o => o with
        {
            HomeDirectory = home, CacheEnabled = false, Peers = false, Isolation = IsolationMode.Off, WorkerUser = null,
        });
        try
        {
            // StartStream as the worker the host started, then bytes that are no StreamingMessage
            // (a length-delimited field claiming more bytes than the message has).
            var (port, id) = await NextWorkerAsync(reports);
            using (var raw = GrpcChannel.ForAddress($"http://127.0.0.1:{port}"))
            {
                using var bad = raw.CreateCallInvoker().AsyncDuplexStreamingCall(RawEventStream, null, new CallOptions());
                await bad.RequestStream.WriteAsync(new StreamingMessage { StartStream = new StartStream { WorkerId = id } }.ToByteArray());
                await bad.RequestStream.WriteAsync([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
                var ended = await Assert.ThrowsAsync<RpcException>(async () =>
                {
                    while (await bad.ResponseStream.MoveNext(CancellationToken.None))
                    {
                        // the host's init request, if it got that far first
                    }
                });
                Assert.Equal(StatusCode.InvalidArgument, ended.StatusCode);
                Assert.Contains("malformed StreamingMessage", ended.Status.Detail, StringComparison.Ordinal);
            }

            // The host replaces that worker; the next one behaves, and the host comes up with it.
            var (port2, id2) = await NextWorkerAsync(reports);
            using var channel = GrpcChannel.ForAddress($"http://127.0.0.1:{port2}");
            using var call = channel.CreateCallInvoker().AsyncDuplexStreamingCall(EventStream, null, new CallOptions());
            await call.RequestStream.WriteAsync(new StreamingMessage { StartStream = new StartStream { WorkerId = id2 } });
            var answering = AnswerInitAndLoadsAsync(call);
            var host = await starting;
            try
            {
                // Before the fix of RequestAsync the replacement waited out the 30 s init timeout first.
                Assert.True(host.Host.ReadyWorkers == 1, host.Logs.All);
            }
            finally
            {
                File.WriteAllText(Path.Combine(reports, "stop"), "");
                await host.DisposeAsync();
            }
            await answering.WaitAsync(TimeSpan.FromSeconds(60)); // ends with the host's stream
        }
        finally
        {
            File.WriteAllText(Path.Combine(reports, "stop"), "");
            if (!starting.IsCompleted)
                await (await starting.WaitAsync(TimeSpan.FromSeconds(60))).DisposeAsync();
        }
    }

    /// <summary>Answers init, the environment reload and function loads until the host ends the
    /// stream (it does when it stops).</summary>
    internal static async Task AnswerInitAndLoadsAsync(AsyncDuplexStreamingCall<StreamingMessage, StreamingMessage> call)
    {
        var success = new StatusResult { Status = StatusResult.Types.Status.Success };
        try
        {
            while (await call.ResponseStream.MoveNext(CancellationToken.None))
            {
                var message = call.ResponseStream.Current;
                var reply = message.ContentCase switch
                {
                    StreamingMessage.ContentOneofCase.WorkerInitRequest => new StreamingMessage
                    {
                        RequestId = message.RequestId,
                        WorkerInitResponse = new WorkerInitResponse { Result = success },
                    },
                    StreamingMessage.ContentOneofCase.FunctionEnvironmentReloadRequest => new StreamingMessage
                    {
                        RequestId = message.RequestId,
                        FunctionEnvironmentReloadResponse = new FunctionEnvironmentReloadResponse { Result = success },
                    },
                    StreamingMessage.ContentOneofCase.FunctionLoadRequest => new StreamingMessage
                    {
                        RequestId = message.RequestId,
                        FunctionLoadResponse = new FunctionLoadResponse { FunctionId = message.FunctionLoadRequest.FunctionId, Result = success },
                    },
                    _ => null,
                };
                if (reply is not null)
                    await call.RequestStream.WriteAsync(reply);
            }
        }
        catch (Exception e) when (e is IOException or HttpRequestException or OperationCanceledException or RpcException or InvalidOperationException)
        {
            // the host stopped and took the stream with it
        }
    }

    internal static async Task<(int Port, string Id)> NextWorkerAsync(string reports)
    {
        string? file = null;
        await Eventually.TrueAsync(() => Task.FromResult((file = Directory.EnumerateFiles(reports, "*.worker").FirstOrDefault()) is not null),
            "the host to start a worker", seconds: 60);
        var port = int.Parse(await File.ReadAllTextAsync(file!), System.Globalization.CultureInfo.InvariantCulture);
        File.Delete(file!);
        return (port, Path.GetFileNameWithoutExtension(file!));
    }
}
