using System.Text.Json;

namespace FaaST.Runtime.App;

internal static class AppJson
{
    private static readonly JsonDocumentOptions Options = new()
    {
        CommentHandling = JsonCommentHandling.Skip,
        AllowTrailingCommas = true,
    };

    /// <summary>Parses a JSON file; a syntax error names the file, line and position.</summary>
    public static JsonDocument Parse(string file)
    {
        var bytes = File.ReadAllBytes(file);
        // JsonDocument accepts invalid UTF-8 inside strings and only fails when a value is read
        // (InvalidOperationException, which nothing expected): refuse the file here, with the place.
        if (!System.Text.Unicode.Utf8.IsValid(bytes))
            throw new AppConfigException($"{file}: not valid UTF-8 ({InvalidUtf8At(bytes)}); save it as UTF-8");
        try
        {
            return JsonDocument.Parse(bytes, Options);
        }
        catch (JsonException e)
        {
            var where = e.LineNumber is { } line ? $" (line {line + 1}, position {e.BytePositionInLine + 1})" : "";
            throw new AppConfigException($"{file}: not valid JSON{where}: {FirstSentence(e.Message)}");
        }
    }

    /// <summary>Where the first byte that is not UTF-8 is: line, column and byte offset.</summary>
    internal static string InvalidUtf8At(ReadOnlySpan<byte> bytes)
    {
        int offset = 0, line = 1, lineStart = 0;
        while (offset < bytes.Length)
        {
            if (System.Text.Rune.DecodeFromUtf8(bytes[offset..], out var rune, out var used) != System.Buffers.OperationStatus.Done)
                break;
            if (rune.Value == '\n')
            {
                line++;
                lineStart = offset + used;
            }
            offset += used;
        }
        return $"line {line}, byte {offset - lineStart + 1} of the line, offset {offset}: 0x{(offset < bytes.Length ? bytes[offset] : 0):X2}";
    }

    private static string FirstSentence(string message)
    {
        var i = message.IndexOf(" Path:", StringComparison.Ordinal);
        return i > 0 ? message[..i] : message;
    }

    public static string? GetString(JsonElement obj, string name, string file, string where)
    {
        if (!obj.TryGetProperty(name, out var v) || v.ValueKind == JsonValueKind.Null)
            return null;
        if (v.ValueKind != JsonValueKind.String)
            throw new AppConfigException($"{file}: {where}{name} must be a string, not {v.ValueKind}");
        return v.GetString();
    }

    public static TimeSpan? GetTimeSpan(JsonElement obj, string name, string file, string where)
    {
        var s = GetString(obj, name, file, where);
        if (s is null)
            return null;
        if (!TimeSpan.TryParse(s, System.Globalization.CultureInfo.InvariantCulture, out var t) || t < TimeSpan.Zero)
            throw new AppConfigException($"{file}: {where}{name} must be a time span like \"00:05:00\", not \"{s}\"");
        return t;
    }
}
