using System.Text.Json;

namespace FaaST.AppModel;

/// <summary>
/// The host's structured readiness report (--ready-file PATH): once its lifecycle reached Started (the moment it
/// logs event 5003, "Host started"), the host writes <c>{"instance":ID,"http":URL,"peer":URL|null,"pid":N}</c> to
/// PATH.tmp and renames it to PATH, so a reader never sees half a file. Whoever started the host (the platform)
/// learns its address from this file, in a folder only it and the host can write, and never from the host's
/// output, which carries the functions' own output too (issue 19, defect 10).
/// </summary>
public sealed record ReadyFile(string Instance, Uri Http, Uri? Peer, int Pid)
{
    /// <summary>Writes <paramref name="ready"/> to <paramref name="path"/> (temp file, then rename), 0600.</summary>
    public static void Write(string path, ReadyFile ready)
    {
        ArgumentNullException.ThrowIfNull(path);
        ArgumentNullException.ThrowIfNull(ready);
        var temp = path + ".tmp";
        var create = new FileStreamOptions { Mode = FileMode.Create, Access = FileAccess.Write };
        if (!OperatingSystem.IsWindows())
            create.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
        using (var file = new FileStream(temp, create))
        using (var json = new Utf8JsonWriter(file))
        {
            json.WriteStartObject();
            json.WriteString("instance", ready.Instance);
            json.WriteString("http", ready.Http.ToString());
            if (ready.Peer is null)
                json.WriteNull("peer");
            else
                json.WriteString("peer", ready.Peer.ToString());
            json.WriteNumber("pid", ready.Pid);
            json.WriteEndObject();
        }
        File.Move(temp, path, overwrite: true);
    }

    /// <summary>Reads a ready file; <see cref="InvalidDataException"/> naming <paramref name="path"/> when it is not one.</summary>
    public static ReadyFile Read(string path)
    {
        ArgumentNullException.ThrowIfNull(path);
        try
        {
            using var doc = JsonDocument.Parse(File.ReadAllBytes(path));
            var root = doc.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new InvalidDataException($"{path}: the top level must be a JSON object");
            var instance = root.TryGetProperty("instance", out var i) && i.ValueKind == JsonValueKind.String ? i.GetString()!
                : throw new InvalidDataException($"{path}: instance must be a string");
            var http = root.TryGetProperty("http", out var h) && h.ValueKind == JsonValueKind.String ? Address(h.GetString()!, path, "http")
                : throw new InvalidDataException($"{path}: http must be a URL");
            Uri? peer = null;
            if (root.TryGetProperty("peer", out var p) && p.ValueKind != JsonValueKind.Null)
                peer = p.ValueKind == JsonValueKind.String ? Address(p.GetString()!, path, "peer") : throw new InvalidDataException($"{path}: peer must be a URL or null");
            var pid = root.TryGetProperty("pid", out var n) && n.ValueKind == JsonValueKind.Number && n.TryGetInt32(out var number) && number > 0 ? number
                : throw new InvalidDataException($"{path}: pid must be a process id");
            return new ReadyFile(instance, http, peer, pid);
        }
        catch (JsonException e)
        {
            throw new InvalidDataException($"{path}: not valid JSON: {e.Message}", e);
        }
    }

    private static Uri Address(string text, string path, string name) =>
        Uri.TryCreate(text, UriKind.Absolute, out var uri) && (uri.Scheme == Uri.UriSchemeHttp || uri.Scheme == Uri.UriSchemeHttps)
            ? uri
            : throw new InvalidDataException($"{path}: {name} must be an absolute http(s) URL, not \"{text}\"");
}
