using FaaST.Protos.Worker;
using Grpc.Core;
using RpcException = Grpc.Core.RpcException;

namespace FaaST.Runtime.Workers;

/// <summary>
/// The worker channel's gRPC service (protos/worker.proto, WorkerChannel.EventStream) on
/// Grpc.AspNetCore: each worker the pool started dials in and hands its stream to the pool. One
/// instance serves the host; it is registered before the web application is built and attached to
/// the pool once the pool exists.
/// </summary>
/// <remarks>
/// The generated marshaller already keeps large payloads at one copy each way: Grpc.AspNetCore
/// serialises a message of known size straight into Kestrel's response pipe
/// (<c>IBufferMessage.WriteTo(IBufferWriter)</c>), and parses a request from the request pipe's
/// buffers (<c>ParseFrom(ReadOnlySequence)</c>), so no custom marshaller is needed.
/// </remarks>
internal sealed class WorkerChannelService : Protos.Worker.WorkerChannel.WorkerChannelBase
{
    /// <summary>The stream's HTTP/2 path (the service and method names in protos/worker.proto).</summary>
    public const string EventStreamPath = "/faast.worker.v1.WorkerChannel/EventStream";

    private WorkerPool? _pool;

    /// <summary>Sends every worker stream to <paramref name="pool"/> from now on.</summary>
    /// <exception cref="InvalidOperationException">The pool's message limit is not the one the
    /// service was registered with.</exception>
    public void Attach(WorkerPool pool, int registeredMaxMessageSize)
    {
        if (pool.Options.MaxMessageSize != registeredMaxMessageSize)
            throw new InvalidOperationException(
                $"the worker pool's MaxMessageSize ({pool.Options.MaxMessageSize}) differs from the worker channel's limit ({registeredMaxMessageSize})");
        Volatile.Write(ref _pool, pool);
    }

    public override Task EventStream(IAsyncStreamReader<StreamingMessage> requestStream,
        IServerStreamWriter<StreamingMessage> responseStream, ServerCallContext context)
    {
        var pool = Volatile.Read(ref _pool);
        // Only the loopback worker endpoint accepts worker streams: the same route on the HTTP or
        // peer port is refused, and so is any stream before the pool knows its port.
        if (pool is null || pool.GrpcPort == 0 || context.GetHttpContext().Connection.LocalPort != pool.GrpcPort)
            throw new RpcException(new Status(StatusCode.NotFound, "not a worker endpoint"));
        return pool.AcceptAsync(requestStream, responseStream, context);
    }
}

/// <summary>Registration of the worker channel on a web application.</summary>
internal static class WorkerChannelEndpoints
{
    /// <summary>
    /// Adds gRPC and the worker channel's service, with its message limits set explicitly to
    /// <paramref name="maxMessageSize"/> both ways (Grpc.AspNetCore's defaults, 4 MB in and no limit
    /// out, fit neither a 1 GB inline blob nor a worker that must not flood the host).
    /// </summary>
    public static WorkerChannelService AddWorkerChannel(this IServiceCollection services, int maxMessageSize)
    {
        var service = new WorkerChannelService();
        services.AddSingleton(service);
        // IgnoreUnknownServices: otherwise Grpc.AspNetCore maps a catch-all /{service}/{method} of
        // any HTTP method, which turns an HTTP function's 405 (wrong method) into 404. A gRPC call to
        // an unknown service gets HTTP 404, which gRPC clients report as UNIMPLEMENTED all the same.
        services.AddGrpc(o => o.IgnoreUnknownServices = true).AddServiceOptions<WorkerChannelService>(o =>
        {
            o.MaxReceiveMessageSize = maxMessageSize;
            o.MaxSendMessageSize = maxMessageSize;
            // Workers neither send nor accept compressed messages; identity keeps the one-copy path.
            o.ResponseCompressionAlgorithm = null;
        });
        return service;
    }

    public static void MapWorkerChannel(this IEndpointRouteBuilder routes) => routes.MapGrpcService<WorkerChannelService>();
}
