using System.Buffers;
using FaaST.Protos.Peer;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.Peers;

/// <summary>
/// The peer protocol's methods (protos/peer.proto, service faast.peer.v1.CacheletPeer) with the
/// marshallers each side uses. The messages are the generated ones; the methods are declared here
/// because the payload-carrying messages take hand marshallers: a Put's data (at the owner) and a
/// Get's data (at the requester) are copied from the message buffer straight into the destination
/// (an extent) by <see cref="PayloadSink"/>, instead of becoming a ByteString first. Sending copies
/// once as well: the data field wraps the extent's memory (UnsafeByteOperations) and is serialized
/// into the transport's buffer. A malformed request is InvalidArgument, naming the message.
/// </summary>
internal static class PeerMethods
{
    public const string Service = "faast.peer.v1.CacheletPeer";
    public const string GetPath = "/" + Service + "/Get";
    public const string PutPath = "/" + Service + "/Put";
    public const string InvalidatePath = "/" + Service + "/Invalidate";
    public const string StatsPath = "/" + Service + "/Stats";
    public const string LookupPath = "/" + Service + "/Lookup";

    /// <summary>Largest message either side sends or takes: a data chunk (<see cref="PeerOptions.ChunkSize"/>,
    /// 1 MiB by default) with room to spare; requests and Lookup replies are far smaller.</summary>
    public const int MaxMessageSize = 16 << 20;

    /// <summary>The data field of GetChunk and PutChunk.</summary>
    private const int DataField = 2;

    // ---- serving side --------------------------------------------------------------------------
    public static readonly Method<GetRequest, GetChunk> ServeGet = new(MethodType.ServerStreaming, Service, "Get", Checked(GetRequest.Parser), Plain(GetChunk.Parser));
    public static readonly Method<PutFrame, PutResponse> ServePut = new(MethodType.ClientStreaming, Service, "Put", PutFrameMarshaller(), Plain(PutResponse.Parser));

    // ---- requesting side -----------------------------------------------------------------------
    public static readonly Method<GetRequest, GetFrame> FetchGet = new(MethodType.ServerStreaming, Service, "Get", Plain(GetRequest.Parser), GetFrameMarshaller());
    public static readonly Method<PutChunk, PutResponse> SendPut = new(MethodType.ClientStreaming, Service, "Put", Plain(PutChunk.Parser), Plain(PutResponse.Parser));

    // ---- serving side (the requesting side uses the generated client for these) -----------------
    public static readonly Method<LookupRequest, LookupReply> Lookup = new(MethodType.DuplexStreaming, Service, "Lookup", Checked(LookupRequest.Parser), Plain(LookupReply.Parser));
    public static readonly Method<InvalidateRequest, InvalidateResponse> Invalidate = new(MethodType.Unary, Service, "Invalidate", Checked(InvalidateRequest.Parser), Plain(InvalidateResponse.Parser));
    public static readonly Method<StatsRequest, StatsResponse> Stats = new(MethodType.Unary, Service, "Stats", Checked(StatsRequest.Parser), Plain(StatsResponse.Parser));

    private static Marshaller<T> Plain<T>(MessageParser<T> parser) where T : IMessage<T> =>
        Marshallers.Create<T>(Serialize, context => parser.ParseFrom(context.PayloadAsReadOnlySequence()));

    /// <summary>A request marshaller whose parse errors are the caller's: InvalidArgument, not an internal error.</summary>
    private static Marshaller<T> Checked<T>(MessageParser<T> parser) where T : IMessage<T> =>
        Marshallers.Create<T>(Serialize, context => Parse(parser, context.PayloadAsReadOnlySequence()));

    private static T Parse<T>(MessageParser<T> parser, ReadOnlySequence<byte> payload) where T : IMessage<T>
    {
        try
        {
            return parser.ParseFrom(payload);
        }
        catch (InvalidProtocolBufferException e)
        {
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"malformed {typeof(T).Name} message: {e.Message}"));
        }
    }

    /// <summary>Straight into the transport's buffer (a data field that wraps an extent is copied once, here).</summary>
    private static void Serialize<T>(T message, SerializationContext context) where T : IMessage<T>
    {
        context.SetPayloadLength(message.CalculateSize());
        message.WriteTo(context.GetBufferWriter());
        context.Complete();
    }

    private static Marshaller<PutFrame> PutFrameMarshaller() => Marshallers.Create<PutFrame>(
        (_, _) => throw new NotSupportedException("a PutFrame is only received"),
        context =>
        {
            var payload = context.PayloadAsReadOnlySequence();
            if (TryReadBytesField(payload, DataField, out var data))
            {
                var sink = PayloadSink.Current ?? throw new RpcException(new Status(StatusCode.InvalidArgument, "Put: the first message must be the header"));
                if (!sink.TryWrite(data))
                    throw new RpcException(new Status(StatusCode.InvalidArgument, sink.Failure!));
                return PutFrame.Data;
            }
            var chunk = Parse(PutChunk.Parser, payload);
            return chunk.ContentCase == PutChunk.ContentOneofCase.Header
                ? new PutFrame(chunk.Header)
                : throw new RpcException(new Status(StatusCode.InvalidArgument, "Put: a malformed data message"));
        });

    private static Marshaller<GetFrame> GetFrameMarshaller() => Marshallers.Create<GetFrame>(
        (_, _) => throw new NotSupportedException("a GetFrame is only received"),
        context =>
        {
            var payload = context.PayloadAsReadOnlySequence();
            if (TryReadBytesField(payload, DataField, out var data))
            {
                var sink = PayloadSink.Current;
                if (sink is null || !sink.TryWrite(data))
                    throw new InvalidDataException(sink?.Failure ?? "data before the header");
                return GetFrame.Data;
            }
            var chunk = GetChunk.Parser.ParseFrom(payload);
            return chunk.ContentCase == GetChunk.ContentOneofCase.Header
                ? new GetFrame(chunk.Header)
                : throw new InvalidDataException("a malformed data message");
        });

    /// <summary>
    /// If <paramref name="payload"/> is exactly one length-delimited field numbered
    /// <paramref name="field"/>, its bytes (a slice of the payload, not a copy).
    /// </summary>
    internal static bool TryReadBytesField(in ReadOnlySequence<byte> payload, int field, out ReadOnlySequence<byte> data)
    {
        data = default;
        var reader = new SequenceReader<byte>(payload);
        if (!TryReadVarint(ref reader, out var tag) || tag != (ulong)(field << 3 | 2) ||
            !TryReadVarint(ref reader, out var length) || length != (ulong)reader.Remaining)
            return false;
        data = reader.UnreadSequence;
        return true;
    }

    private static bool TryReadVarint(ref SequenceReader<byte> reader, out ulong value)
    {
        value = 0;
        for (var shift = 0; shift < 64; shift += 7)
        {
            if (!reader.TryRead(out var b))
                return false;
            value |= (ulong)(b & 0x7F) << shift;
            if (b < 0x80)
                return true;
        }
        return false;
    }
}

/// <summary>A received Put message: the header, or (<see cref="Data"/>) data already written to the call's sink.</summary>
public sealed class PutFrame(PutHeader? header)
{
    /// <summary>Every data message (its bytes went to the sink; nothing to allocate per chunk).</summary>
    internal static readonly PutFrame Data = new(null);

    public PutHeader? Header => header;
}

/// <summary>A received Get message: the header, or (<see cref="Data"/>) data already written to the call's sink.</summary>
internal sealed class GetFrame(ObjectHeader? header)
{
    public static readonly GetFrame Data = new(null);

    public ObjectHeader? Header => header;
}

/// <summary>
/// Where the data messages of one call go, as they are parsed: the call's destination (an extent's
/// write stream), set for the async flow that reads the call (the marshallers are shared by every
/// call, and a reader's parse runs in the flow that awaits it).
/// </summary>
internal sealed class PayloadSink
{
    private static readonly AsyncLocal<PayloadSink?> Flow = new();

    public static PayloadSink? Current => Flow.Value;

    /// <summary>Makes a new sink the current one for the calling flow (and what it awaits).</summary>
    public static PayloadSink Begin(string what)
    {
        var sink = new PayloadSink(what);
        Flow.Value = sink;
        return sink;
    }

    private PayloadSink(string what) => _what = what;

    private readonly string _what;
    private Stream? _target;
    private long _expected;
    private Action? _onData;

    public long Received { get; private set; }

    /// <summary>Why the last write was refused.</summary>
    public string? Failure { get; private set; }

    /// <summary>From now on, up to <paramref name="expected"/> bytes go to <paramref name="target"/>;
    /// <paramref name="onData"/> runs before each message's bytes are written (e.g. to stop a timeout).</summary>
    public void Start(Stream target, long expected, Action? onData = null)
    {
        _target = target;
        _expected = expected;
        _onData = onData;
    }

    public bool TryWrite(ReadOnlySequence<byte> data)
    {
        if (_target is null)
        {
            Failure = $"{_what}: data before the header";
            return false;
        }
        if (Received + data.Length > _expected)
        {
            Failure = $"{_what}: more than the announced {_expected} bytes";
            return false;
        }
        _onData?.Invoke();
        foreach (var segment in data)
            _target.Write(segment.Span);
        Received += data.Length;
        return true;
    }
}
