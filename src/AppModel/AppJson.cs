using System.Text.Json;

namespace FaaST.AppModel;

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
        if (JsonSyntaxError.InvalidUtf8(bytes) is { } where)
            throw new AppConfigException($"{file}: not valid UTF-8{where}; save it as UTF-8");
        JsonDocument doc;
        try
        {
            doc = JsonDocument.Parse(bytes, Options);
        }
        catch (JsonException e)
        {
            throw new AppConfigException($"{file}: not valid JSON{JsonSyntaxError.Describe(e, bytes)}");
        }
        try
        {
            CheckStrings(doc.RootElement, file, "");
            return doc;
        }
        catch
        {
            doc.Dispose();
            throw;
        }
    }

    /// <summary>
    /// A \u escape of half a surrogate pair is valid JSON syntax but no string: reading it throws
    /// InvalidOperationException wherever a value happens to be read (found by the fuzzer; it stopped
    /// the host). Every name and string is decoded once here, so the error names the file and key.
    /// Config files are small; this costs microseconds at load.
    /// </summary>
    private static void CheckStrings(JsonElement e, string file, string path)
    {
        switch (e.ValueKind)
        {
            case JsonValueKind.Object:
                foreach (var p in e.EnumerateObject())
                {
                    string name;
                    try
                    {
                        name = p.Name;
                    }
                    catch (InvalidOperationException)
                    {
                        throw new AppConfigException($"{file}: a key in {(path.Length == 0 ? "the top level" : path)} is not valid text (an escape of half a UTF-16 surrogate pair)");
                    }
                    CheckStrings(p.Value, file, path.Length == 0 ? name : path + "." + name);
                }
                break;
            case JsonValueKind.Array:
                var i = 0;
                foreach (var item in e.EnumerateArray())
                    CheckStrings(item, file, $"{path}[{i++}]");
                break;
            case JsonValueKind.String:
                try
                {
                    _ = e.GetString();
                }
                catch (InvalidOperationException)
                {
                    throw new AppConfigException($"{file}: {(path.Length == 0 ? "the top level" : path)} is not valid text (an escape of half a UTF-16 surrogate pair)");
                }
                break;
        }
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
