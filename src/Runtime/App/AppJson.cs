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
        try
        {
            return JsonDocument.Parse(File.ReadAllBytes(file), Options);
        }
        catch (JsonException e)
        {
            var where = e.LineNumber is { } line ? $" (line {line + 1}, position {e.BytePositionInLine + 1})" : "";
            throw new AppConfigException($"{file}: not valid JSON{where}: {FirstSentence(e.Message)}");
        }
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
