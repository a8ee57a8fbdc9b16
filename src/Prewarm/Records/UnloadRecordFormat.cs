using System.Buffers;
using System.Globalization;
using System.Text.Json;

namespace FaaST.Prewarm.Records;

/// <summary>
/// The stored form of an <see cref="UnloadRecord"/>: UTF-8 JSON, versioned by a top-level <c>"format"</c> so that a
/// later layout is recognised and skipped rather than misread (docs in src/Prewarm/README.md):
/// <code>
/// { "format": 1, "app": "shop", "instance": "shop-7f9c", "unloadedAt": "2026-11-28T06:00:00.0000000+00:00",
///   "objects": [ { "account": "devstoreaccount1", "container": "models", "blob": "m.bin", "size": 35000000,
///                  "etag": "\"0x8DC\"", "localHits": 3, "remoteHits": 0, "localMisses": 1, "remoteMisses": 0,
///                  "produced": 0, "meanInterArrivalMs": 1250.5 } ] }
/// </code>
/// Unknown keys are ignored (a writer of the same format may add some); missing ones are an error.
/// </summary>
public static class UnloadRecordFormat
{
    /// <summary>The record as UTF-8 JSON.</summary>
    public static byte[] Write(UnloadRecord record)
    {
        ArgumentNullException.ThrowIfNull(record);
        var buffer = new ArrayBufferWriter<byte>(256 + record.Objects.Count * 256);
        using (var json = new Utf8JsonWriter(buffer))
        {
            json.WriteStartObject();
            json.WriteNumber("format", UnloadRecord.FormatVersion);
            json.WriteString("app", record.App);
            json.WriteString("instance", record.Instance);
            json.WriteString("unloadedAt", record.UnloadedAt.ToString("O", CultureInfo.InvariantCulture));
            json.WriteStartArray("objects");
            foreach (var o in record.Objects)
            {
                json.WriteStartObject();
                json.WriteString("account", o.Account);
                json.WriteString("container", o.Container);
                json.WriteString("blob", o.Blob);
                json.WriteNumber("size", o.Size);
                json.WriteString("etag", o.ETag);
                json.WriteNumber("localHits", o.LocalHits);
                json.WriteNumber("remoteHits", o.RemoteHits);
                json.WriteNumber("localMisses", o.LocalMisses);
                json.WriteNumber("remoteMisses", o.RemoteMisses);
                json.WriteNumber("produced", o.Produced);
                json.WriteNumber("meanInterArrivalMs", o.MeanInterArrival.TotalMilliseconds);
                json.WriteEndObject();
            }
            json.WriteEndArray();
            json.WriteEndObject();
        }
        return buffer.WrittenSpan.ToArray();
    }

    /// <summary>
    /// Reads a record stored by <see cref="Write"/>. Anything it cannot use (not UTF-8, not JSON, another
    /// <c>"format"</c>, a key missing or of the wrong type or range) throws <see cref="PrewarmRecordException"/> naming
    /// <paramref name="source"/> and what is wrong.
    /// </summary>
    public static UnloadRecord Read(ReadOnlySpan<byte> utf8, string source)
    {
        ArgumentNullException.ThrowIfNull(source);
        if (JsonSyntaxError.InvalidUtf8(utf8) is { } badUtf8)
            throw new PrewarmRecordException(source, "not UTF-8" + badUtf8);
        JsonDocument document;
        try
        {
            var reader = new Utf8JsonReader(utf8);
            document = JsonDocument.ParseValue(ref reader);
        }
        catch (JsonException e)
        {
            throw new PrewarmRecordException(source, "not valid JSON" + JsonSyntaxError.Describe(e, utf8), e);
        }
        using (document)
        {
            var root = document.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new PrewarmRecordException(source, $"expected a JSON object, found {Kind(root)}");
            if (!root.TryGetProperty("format", out var format))
                throw new PrewarmRecordException(source, "format: missing (not an unload record, or one written before formats were versioned)");
            if (format.ValueKind != JsonValueKind.Number || !format.TryGetInt32(out var version))
                throw new PrewarmRecordException(source, $"format: expected an integer, found {Kind(format)}");
            if (version != UnloadRecord.FormatVersion)
                throw new PrewarmRecordException(source,
                    $"format: {version} is {(version > UnloadRecord.FormatVersion ? "newer than" : "older than")} the only one this version reads ({UnloadRecord.FormatVersion})");
            var app = String(root, "app", source, "");
            var instance = String(root, "instance", source, "");
            var at = String(root, "unloadedAt", source, "");
            if (!DateTimeOffset.TryParseExact(at, "O", CultureInfo.InvariantCulture, DateTimeStyles.None, out var unloadedAt))
                throw new PrewarmRecordException(source, $"unloadedAt: \"{at}\" is not a round-trip (ISO 8601) time");
            if (!root.TryGetProperty("objects", out var objects))
                throw new PrewarmRecordException(source, "objects: missing");
            if (objects.ValueKind != JsonValueKind.Array)
                throw new PrewarmRecordException(source, $"objects: expected an array, found {Kind(objects)}");
            var list = new List<ObjectRecord>(objects.GetArrayLength());
            var i = 0;
            foreach (var o in objects.EnumerateArray())
            {
                var path = $"objects[{i}].";
                if (o.ValueKind != JsonValueKind.Object)
                    throw new PrewarmRecordException(source, $"objects[{i}]: expected an object, found {Kind(o)}");
                var meanMs = Number(o, "meanInterArrivalMs", source, path);
                if (!double.IsFinite(meanMs) || meanMs < 0 || meanMs > TimeSpan.MaxValue.TotalMilliseconds)
                    throw new PrewarmRecordException(source, $"{path}meanInterArrivalMs: {meanMs} is not a duration in milliseconds");
                list.Add(new ObjectRecord(
                    String(o, "account", source, path), String(o, "container", source, path), String(o, "blob", source, path),
                    Count(o, "size", source, path), String(o, "etag", source, path),
                    Count(o, "localHits", source, path), Count(o, "remoteHits", source, path),
                    Count(o, "localMisses", source, path), Count(o, "remoteMisses", source, path),
                    Count(o, "produced", source, path), TimeSpan.FromMilliseconds(meanMs)));
                i++;
            }
            return new UnloadRecord(app, instance, unloadedAt, list);
        }
    }

    private static string String(JsonElement parent, string key, string source, string path)
    {
        if (!parent.TryGetProperty(key, out var value))
            throw new PrewarmRecordException(source, $"{path}{key}: missing");
        if (value.ValueKind != JsonValueKind.String)
            throw new PrewarmRecordException(source, $"{path}{key}: expected a string, found {Kind(value)}");
        return value.GetString()!;
    }

    private static long Count(JsonElement parent, string key, string source, string path)
    {
        if (!parent.TryGetProperty(key, out var value))
            throw new PrewarmRecordException(source, $"{path}{key}: missing");
        if (value.ValueKind != JsonValueKind.Number || !value.TryGetInt64(out var n) || n < 0)
            throw new PrewarmRecordException(source, $"{path}{key}: expected a whole number ≥ 0, found {Kind(value)} {value.GetRawText()}");
        return n;
    }

    private static double Number(JsonElement parent, string key, string source, string path)
    {
        if (!parent.TryGetProperty(key, out var value))
            throw new PrewarmRecordException(source, $"{path}{key}: missing");
        if (value.ValueKind != JsonValueKind.Number)
            throw new PrewarmRecordException(source, $"{path}{key}: expected a number, found {Kind(value)}");
        return value.GetDouble();
    }

    private static string Kind(JsonElement e) => e.ValueKind switch
    {
        JsonValueKind.Object => "an object",
        JsonValueKind.Array => "an array",
        JsonValueKind.String => "a string",
        JsonValueKind.Number => "a number",
        JsonValueKind.True or JsonValueKind.False => "a boolean",
        JsonValueKind.Null => "null",
        _ => "nothing",
    };
}
