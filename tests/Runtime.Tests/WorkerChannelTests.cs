using System.Buffers.Binary;
using System.Net;
using System.Net.Http.Headers;
using FaaST.Protos.Worker;
using FaaST.Rpc;
using FaaST.Runtime.Hosting;
using FaaST.Runtime.Workers;
using Google.Protobuf;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The worker channel against a worker the test plays itself: the host starts a stand-in
/// worker.py (from a FAAST_HOME of the test's own) that only reports the port and worker id it was
/// given; the test dials in with that id as the real worker would and sends what it likes.
/// </summary>
public sealed class WorkerChannelTests : IDisposable
{
    // Reports its port and id, then waits until the test lets it go (or the host kills it).
    private const string StandInWorker = """
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
            using var handler = new SocketsHttpHandler();
            using var http = new HttpMessageInvoker(handler);

            // StartStream as the worker the host started, then bytes that are no StreamingMessage
            // (a length-delimited field claiming more bytes than the message has).
            var (port, id) = await NextWorkerAsync(reports);
            byte[] body = [.. Frame(new StreamingMessage { StartStream = new StartStream { WorkerId = id } }.ToByteArray()), .. Frame([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F])];
            using var request = new HttpRequestMessage(HttpMethod.Post, $"http://127.0.0.1:{port}{WorkerPool.EventStreamPath}")
            {
                Version = HttpVersion.Version20,
                VersionPolicy = HttpVersionPolicy.RequestVersionExact,
                Content = new ByteArrayContent(body),
            };
            request.Content.Headers.ContentType = new MediaTypeHeaderValue("application/grpc");
            request.Headers.TE.ParseAdd("trailers");
            using var response = await http.SendAsync(request, CancellationToken.None);
            await response.Content.ReadAsByteArrayAsync();
            Assert.True(response.TrailingHeaders.TryGetValues("grpc-status", out var status), "the stream ended without a grpc-status");
            Assert.Equal(((int)GrpcStatus.InvalidArgument).ToString(System.Globalization.CultureInfo.InvariantCulture), Assert.Single(status));
            Assert.Contains("malformed StreamingMessage", Uri.UnescapeDataString(response.TrailingHeaders.GetValues("grpc-message").Single()));

            // The host replaces that worker; the next one behaves, and the host comes up with it.
            var (port2, id2) = await NextWorkerAsync(reports);
            using var client = new GrpcClient(new Uri($"http://127.0.0.1:{port2}"));
            using var call = await client.DuplexAsync(WorkerPool.EventStreamPath, StreamingMessage.Parser);
            call.Write(new StreamingMessage { StartStream = new StartStream { WorkerId = id2 } });
            await call.FlushAsync();
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

    /// <summary>Answers init and function loads until the host ends the stream (it does when it stops).</summary>
    private static async Task AnswerInitAndLoadsAsync(GrpcDuplexCall<StreamingMessage> call)
    {
        try
        {
            while (await call.ReadAsync() is { } message)
            {
                var reply = message.ContentCase switch
                {
                    StreamingMessage.ContentOneofCase.WorkerInitRequest => new StreamingMessage
                    {
                        RequestId = message.RequestId,
                        WorkerInitResponse = new WorkerInitResponse { Result = new StatusResult { Status = StatusResult.Types.Status.Success } },
                    },
                    StreamingMessage.ContentOneofCase.FunctionLoadRequest => new StreamingMessage
                    {
                        RequestId = message.RequestId,
                        FunctionLoadResponse = new FunctionLoadResponse { FunctionId = message.FunctionLoadRequest.FunctionId, Result = new StatusResult { Status = StatusResult.Types.Status.Success } },
                    },
                    _ => null,
                };
                if (reply is null)
                    continue;
                call.Write(reply);
                await call.FlushAsync();
            }
        }
        catch (Exception e) when (e is IOException or HttpRequestException or OperationCanceledException)
        {
            // the host stopped and took the stream with it
        }
    }

    private static async Task<(int Port, string Id)> NextWorkerAsync(string reports)
    {
        string? file = null;
        await HostUnderTest.EventuallyAsync(() => Task.FromResult((file = Directory.EnumerateFiles(reports, "*.worker").FirstOrDefault()) is not null),
            "the host to start a worker", seconds: 60);
        var port = int.Parse(await File.ReadAllTextAsync(file!), System.Globalization.CultureInfo.InvariantCulture);
        File.Delete(file!);
        return (port, Path.GetFileNameWithoutExtension(file!));
    }

    private static byte[] Frame(ReadOnlySpan<byte> payload)
    {
        var frame = new byte[5 + payload.Length];
        BinaryPrimitives.WriteUInt32BigEndian(frame.AsSpan(1), (uint)payload.Length);
        payload.CopyTo(frame.AsSpan(5));
        return frame;
    }
}
