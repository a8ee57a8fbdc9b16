using System.Collections.Concurrent;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.Logging;

namespace FaaST.TestSupport;

/// <summary>One span as an OTLP exporter sent it: ids in lower-case hex (as <c>ActivityTraceId.ToHexString()</c>).</summary>
public sealed record OtlpSpan(string TraceId, string SpanId, string ParentSpanId, string Name);

/// <summary>
/// An OTLP/HTTP (protobuf) collector on loopback that keeps what it is sent: the raw bodies per signal, and the spans
/// decoded from them. A test asks for spans, not for bytes in one body: an exporter batches on a timer, so a parent
/// and its child routinely arrive in different exports (the child ends first) — more so on a busy machine.
/// </summary>
public sealed class OtlpCollector : IAsyncDisposable
{
    private readonly WebApplication _web;
    private readonly ConcurrentQueue<(string Path, byte[] Body)> _received = new();

    private OtlpCollector(WebApplication web) => _web = web;

    /// <summary>The base address to give an exporter (OTEL_EXPORTER_OTLP_ENDPOINT).</summary>
    public string Endpoint => _web.Urls.Single();

    public static async Task<OtlpCollector> StartAsync()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.Logging.ClearProviders();
        var collector = new OtlpCollector(builder.Build());
        collector._web.MapPost("/v1/{signal}", async context =>
        {
            using var body = new MemoryStream();
            await context.Request.Body.CopyToAsync(body);
            collector._received.Enqueue((context.Request.Path.Value!, body.ToArray()));
            context.Response.ContentType = "application/x-protobuf";
        });
        await collector._web.StartAsync();
        return collector;
    }

    /// <summary>Whether one export to <paramref name="path"/> (e.g. /v1/metrics) held <paramref name="text"/> as UTF-8.</summary>
    public bool Received(string path, string text)
    {
        var bytes = Encoding.UTF8.GetBytes(text);
        return _received.Any(r => r.Path == path && r.Body.AsSpan().IndexOf(bytes) >= 0);
    }

    /// <summary>Every span received on /v1/traces so far, in the order they arrived.</summary>
    public IReadOnlyList<OtlpSpan> Spans()
    {
        var spans = new List<OtlpSpan>();
        foreach (var (path, body) in _received)
            if (path == "/v1/traces")
                OtlpTraceDecoder.Decode(body, spans);
        return spans;
    }

    /// <summary>What was received, for a failing test's message.</summary>
    public string Describe() =>
        $"{_received.Count} export(s): " + string.Join(", ", _received.Select(r => $"{r.Path} ({r.Body.Length} B)")) +
        "; spans: " + string.Join("; ", Spans().Select(s => $"{s.Name} trace {s.TraceId} span {s.SpanId} parent {s.ParentSpanId}"));

    public async ValueTask DisposeAsync()
    {
        await _web.StopAsync();
        await _web.DisposeAsync();
    }
}

/// <summary>
/// Reads spans out of an ExportTraceServiceRequest (opentelemetry/proto/collector/trace/v1) by walking the protobuf
/// wire format: request.resource_spans = 1 → ResourceSpans.scope_spans = 2 → ScopeSpans.spans = 2 → Span
/// { trace_id = 1, span_id = 2, parent_span_id = 4, name = 5 }. Every other field is skipped by its wire type.
/// </summary>
internal static class OtlpTraceDecoder
{
    public static void Decode(ReadOnlySpan<byte> request, List<OtlpSpan> into)
    {
        foreach (var resourceSpans in Fields(request, 1))
            foreach (var scopeSpans in Fields(resourceSpans.Span, 2))
                foreach (var span in Fields(scopeSpans.Span, 2))
                    into.Add(Span(span.Span));
    }

    private static OtlpSpan Span(ReadOnlySpan<byte> span)
    {
        string trace = "", id = "", parent = "", name = "";
        var reader = new Reader(span);
        while (reader.Next(out var field, out var value))
        {
            switch (field)
            {
                case 1: trace = Convert.ToHexStringLower(value.Span); break;
                case 2: id = Convert.ToHexStringLower(value.Span); break;
                case 4: parent = Convert.ToHexStringLower(value.Span); break;
                case 5: name = Encoding.UTF8.GetString(value.Span); break;
            }
        }
        return new OtlpSpan(trace, id, parent, name);
    }

    /// <summary>The length-delimited values of field <paramref name="number"/> in a message.</summary>
    private static List<ReadOnlyMemory<byte>> Fields(ReadOnlySpan<byte> message, int number)
    {
        var values = new List<ReadOnlyMemory<byte>>();
        var reader = new Reader(message);
        while (reader.Next(out var field, out var value))
            if (field == number)
                values.Add(value);
        return values;
    }

    /// <summary>Steps through a message's fields; the value is returned for length-delimited fields only.</summary>
    private ref struct Reader(ReadOnlySpan<byte> data)
    {
        private readonly ReadOnlySpan<byte> _data = data;
        private int _at;

        public bool Next(out int field, out ReadOnlyMemory<byte> value)
        {
            value = default;
            field = 0;
            if (_at >= _data.Length)
                return false;
            var key = Varint();
            field = (int)(key >> 3);
            switch ((int)(key & 7))
            {
                case 0: Varint(); break;
                case 1: _at += 8; break;
                case 5: _at += 4; break;
                case 2:
                    var length = checked((int)Varint());
                    value = _data.Slice(_at, length).ToArray();
                    _at += length;
                    break;
                default:
                    throw new InvalidDataException($"OTLP export: wire type {key & 7} of field {field} at byte {_at} is not one protobuf 3 writes");
            }
            if (_at > _data.Length)
                throw new InvalidDataException($"OTLP export: field {field} runs past the end of its message ({_data.Length} bytes)");
            return true;
        }

        private ulong Varint()
        {
            ulong result = 0;
            for (var shift = 0; shift < 64; shift += 7)
            {
                var b = _data[_at++];
                result |= (ulong)(b & 0x7F) << shift;
                if (b < 0x80)
                    return result;
            }
            throw new InvalidDataException($"OTLP export: a varint longer than 10 bytes before byte {_at}");
        }
    }
}
