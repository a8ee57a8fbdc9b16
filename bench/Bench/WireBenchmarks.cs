using System.Buffers;
using BenchmarkDotNet.Attributes;
using FaaST.Protos.Worker;
using FaaST.Rpc;
using Google.Protobuf;

namespace FaaST.Bench;

/// <summary>The host's per-invocation wire cost: framing an invocation request and parsing a response.</summary>
[MemoryDiagnoser]
public class WireBenchmarks
{
    private readonly ArrayBufferWriter<byte> _buffer = new(64 * 1024);
    private StreamingMessage _request = null!;
    private ReadOnlySequence<byte> _framedResponse;

    [GlobalSetup]
    public void Setup()
    {
        var http = new HttpData { Method = "GET", Url = "http://127.0.0.1:7071/api/Noop", Body = new TypedData { Bytes = ByteString.Empty } };
        http.Headers["host"] = "127.0.0.1:7071";
        _request = new StreamingMessage
        {
            InvocationRequest = new InvocationRequest
            {
                InvocationId = Guid.NewGuid().ToString(),
                FunctionId = "Noop",
                InputData = { new ParameterBinding { Name = "req", Data = new TypedData { Http = http } } },
            },
        };
        var response = new StreamingMessage
        {
            InvocationResponse = new InvocationResponse
            {
                InvocationId = Guid.NewGuid().ToString(),
                ReturnValue = new TypedData { Http = new HttpData { StatusCode = 200, Body = new TypedData { String = "ok" } } },
                Result = new StatusResult { Status = StatusResult.Types.Status.Success },
            },
        };
        var w = new ArrayBufferWriter<byte>();
        GrpcFraming.Write(w, response);
        _framedResponse = new ReadOnlySequence<byte>(w.WrittenMemory);
    }

    [Benchmark]
    public int FrameInvocationRequest()
    {
        _buffer.ResetWrittenCount();
        GrpcFraming.Write(_buffer, _request);
        return _buffer.WrittenCount;
    }

    [Benchmark]
    public StreamingMessage ParseInvocationResponse()
    {
        var buffer = _framedResponse;
        GrpcFraming.TryRead(ref buffer, 1 << 20, out var payload);
        return StreamingMessage.Parser.ParseFrom(payload);
    }
}
