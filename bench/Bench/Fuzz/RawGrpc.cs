using System.Buffers.Binary;
using System.Net;
using System.Net.Http.Headers;
using Google.Protobuf;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// gRPC over HTTP/2 with the bytes in the fuzzer's hands: frames written as given (also broken
/// ones), responses read frame by frame, the call's grpc-status read from the trailers.
/// </summary>
public sealed class RawGrpc : IDisposable
{
    private readonly HttpMessageInvoker _invoker = new(new SocketsHttpHandler
    {
        UseCookies = false,
        EnableMultipleHttp2Connections = true,
        ConnectTimeout = TimeSpan.FromSeconds(5),
    });

    /// <summary>One length-prefixed gRPC frame around <paramref name="payload"/>.</summary>
    public static byte[] Frame(ReadOnlySpan<byte> payload, byte compressed = 0, uint? length = null)
    {
        var frame = new byte[5 + payload.Length];
        frame[0] = compressed;
        BinaryPrimitives.WriteUInt32BigEndian(frame.AsSpan(1), length ?? (uint)payload.Length);
        payload.CopyTo(frame.AsSpan(5));
        return frame;
    }

    public static byte[] Frame(IMessage message) => Frame(message.ToByteArray());

    /// <summary>What a call got: the HTTP status, the grpc-status (null when absent), the messages' payloads.</summary>
    public sealed record Reply(int HttpStatus, int? GrpcStatus, string? GrpcMessage, List<byte[]> Messages, string? Failure);

    /// <summary>Sends a whole request body at once and reads the whole answer.</summary>
    public async Task<Reply> CallAsync(Uri address, string path, byte[] body, string? authorization, string contentType, TimeSpan timeout)
    {
        using var cts = new CancellationTokenSource(timeout);
        using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(address, path))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new ByteArrayContent(body),
        };
        request.Content.Headers.ContentType = MediaTypeHeaderValue.Parse(contentType);
        request.Headers.TE.ParseAdd("trailers");
        if (authorization is not null)
            request.Headers.TryAddWithoutValidation("authorization", authorization);
        try
        {
            using var response = await _invoker.SendAsync(request, cts.Token);
            var bytes = await response.Content.ReadAsByteArrayAsync(cts.Token);
            var messages = new List<byte[]>();
            var at = 0;
            while (at + 5 <= bytes.Length)
            {
                var n = (int)BinaryPrimitives.ReadUInt32BigEndian(bytes.AsSpan(at + 1));
                if (n < 0 || at + 5 + n > bytes.Length)
                    return new Reply((int)response.StatusCode, null, null, messages, "a response frame runs past the end of the body");
                messages.Add(bytes.AsSpan(at + 5, n).ToArray());
                at += 5 + n;
            }
            var headers = response.TrailingHeaders.Contains("grpc-status") ? (HttpHeaders)response.TrailingHeaders : response.Headers;
            int? status = headers.TryGetValues("grpc-status", out var s) && int.TryParse(s.First(), out var v) ? v : null;
            var message = headers.TryGetValues("grpc-message", out var m) ? Uri.UnescapeDataString(m.First()) : null;
            return new Reply((int)response.StatusCode, status, message, messages, null);
        }
        catch (OperationCanceledException)
        {
            return new Reply(0, null, null, [], $"no answer within {timeout.TotalSeconds:0} s");
        }
        catch (HttpRequestException e)
        {
            return new Reply(0, null, null, [], $"{e.HttpRequestError}: {e.Message}{(e.InnerException is { } i ? " / " + i.Message : "")}");
        }
        catch (IOException e)
        {
            return new Reply(0, null, null, [], "IOException: " + e.Message);
        }
    }

    public void Dispose() => _invoker.Dispose();
}
