using System.Net;
using Microsoft.Extensions.Logging;

namespace FaaST.Peers;

/// <summary>
/// The peer transport's log messages, source-generated (no boxing, no parsing of the template per call), with
/// event ids 3000-3099, and 3600-3649 for bandwidth scaling's ranges served from storage. Refusals are logged per connection or call, not per blob read, so they are not gated.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 3000, Level = LogLevel.Warning, Message = "Dropped a bulk peer connection from {Remote}: {Reason}")]
    public static partial void BulkDropped(ILogger logger, EndPoint? remote, string reason);

    [LoggerMessage(EventId = 3001, Level = LogLevel.Debug, Message = "Bulk peer connection from {Remote} ended: {Reason}")]
    public static partial void BulkEnded(ILogger logger, EndPoint? remote, string reason);

    [LoggerMessage(EventId = 3002, Level = LogLevel.Warning,
        Message = "Refused a peer Get call (bulk connection) from {Remote}: it ended the handshake without an answer (wrong or missing app credentials)")]
    public static partial void BulkRefusedNoAnswer(ILogger logger, EndPoint? remote);

    [LoggerMessage(EventId = 3003, Level = LogLevel.Warning,
        Message = "Refused a peer Get call (bulk connection) from {Remote}: missing or wrong app credentials (the handshake's answer does not match this connection's challenge)")]
    public static partial void BulkRefusedWrongProof(ILogger logger, EndPoint? remote);

    [LoggerMessage(EventId = 3004, Level = LogLevel.Warning, Message = "Refused a peer {Method} call from {Remote}: missing or wrong app credentials ({Reason})")]
    public static partial void CallRefused(ILogger logger, string method, IPAddress? remote, string reason);

    [LoggerMessage(EventId = 3600, Level = LogLevel.Debug, Message = "Served {Container}/{Blob} range {Offset}+{Length} from storage to a peer in {Milliseconds:0.0} ms")]
    public static partial void ServedStorageRange(ILogger logger, string container, string blob, long offset, long length, double milliseconds);
}
