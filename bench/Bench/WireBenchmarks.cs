using System.Buffers;
using BenchmarkDotNet.Attributes;
using FaaST.Protos.Worker;
using Google.Protobuf;

namespace FaaST.Bench;

/// <summary>
/// The host's per-invocation wire cost on the worker channel: serialising an invocation request and
/// parsing a response, as the generated Grpc.AspNetCore marshaller does it (the message written
/// straight into a buffer writer at its known size; parsed from a byte sequence).
/// </summary>
[MemoryDiagnoser]
public class WireBenchmarks
{
    private readonly ArrayBufferWriter<byte> _buffer = new(64 * 1024);
    private StreamingMessage _request = null!;
    private ReadOnlySequence<byte> _response;

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
        _response = new ReadOnlySequence<byte>(response.ToByteArray());
    }

    [Benchmark]
    public int SerializeInvocationRequest()
    {
        _buffer.ResetWrittenCount();
        var size = _request.CalculateSize();
        _request.WriteTo(_buffer);
        return size;
    }

    [Benchmark]
    public StreamingMessage ParseInvocationResponse() => StreamingMessage.Parser.ParseFrom(_response);
}
