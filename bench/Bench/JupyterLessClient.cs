using System.Net.Http.Json;
using System.Security.Cryptography;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace FaaST.Bench;

/// <summary>
/// What the JupyterLess kernel does, for the bench: one notebook session against the executor app's
/// <c>api/execute</c> (apps/jupyterless/README.md has the contract). It keeps the session id, the large-object
/// inputs the last reply named, makes fresh names for the large outputs of each cell (or takes them from
/// <see cref="OutputNames"/>, so the bench can choose names an instance owns), and resends a cell once when the
/// executor answers <c>stale</c>. Any instance of the app can be asked: the session's state is in the cache.
/// </summary>
public sealed partial class JupyterLessSession(HttpClient http, string key)
{
    public const int Slots = 32;

    public string Id { get; } = Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(16));

    private readonly Dictionary<string, string?> _inputs = Enumerable.Range(0, Slots).ToDictionary(i => $"in{i}", _ => (string?)null);

    /// <summary>The large-output names for the next cell (default: 8 random bytes in hex and the slot).</summary>
    public Func<int, string> OutputNames { get; set; } = slot => $"{Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(8))}-{slot}";

    /// <summary>Runs <paramref name="code"/> on the instance at <paramref name="instance"/>; the reply (status ok or error).
    /// Throws naming the cell when the executor fails it otherwise (HTTP error, stale twice, a conflict).</summary>
    public async Task<JsonObject> ExecuteAsync(Uri instance, string code, CancellationToken ct = default)
    {
        for (var attempt = 0; ; attempt++)
        {
            var body = Body(code, all: attempt > 0); // after a stale reply: everything the state names
            using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(instance, "api/execute")) { Content = JsonContent.Create(body) };
            request.Headers.Add("x-functions-key", key);
            using var response = await http.SendAsync(request, ct);
            var text = await response.Content.ReadAsStringAsync(ct);
            if (!response.IsSuccessStatusCode)
                throw new InvalidOperationException($"{instance}api/execute answered {(int)response.StatusCode} to a cell ({Describe(code)}): {text}");
            var reply = JsonNode.Parse(text) as JsonObject ?? throw new InvalidOperationException($"{instance}api/execute answered a non-object: {text}");
            if (reply["large"] is JsonObject large)
                foreach (var (slot, name) in large)
                    _inputs[slot] = name?.GetValue<string>();
            if (reply["needs"] is JsonObject needs && reply["dynamic"] is JsonArray dynamic)
            {
                _needs = needs.ToDictionary(n => n.Key, n => n.Value?.AsArray().Select(b => b!.GetValue<string>()).ToArray() ?? []);
                _dynamic = [.. dynamic.Select(d => d!.GetValue<string>())];
            }
            else
                _needs = null;
            var status = reply["status"]?.GetValue<string>();
            if (status == "stale")
            {
                if (attempt == 0)
                    continue;
                throw new InvalidOperationException($"{instance}api/execute answered stale twice for a cell ({Describe(code)})");
            }
            return reply;
        }
    }

    /// <summary>The request the kernel posts for <paramref name="code"/> now: of the inputs the last reply named, those
    /// the cell needs (every one with <paramref name="all"/>), fresh output names.</summary>
    public JsonObject Body(string code, bool all = false)
    {
        var body = new JsonObject { ["session"] = Id, ["code"] = code, ["silent"] = false, ["store_history"] = true };
        var wanted = all ? null : Wanted(code);
        foreach (var (slot, name) in _inputs)
            body[slot] = wanted is null || name is not null && wanted.Contains(name) ? name : null;
        for (var i = 0; i < Slots; i++)
            body[$"out{i}"] = OutputNames(i);
        return body;
    }

    /// <summary>The large blobs <paramref name="code"/> needs, as the kernel finds them (apps/jupyterless: each
    /// identifier-like word brings what the executor's <c>needs</c> map gives its name; a <c>dynamic</c> word, or no map
    /// yet, means all: null).</summary>
    private HashSet<string>? Wanted(string code)
    {
        if (_needs is null)
            return null;
        var wanted = new HashSet<string>();
        foreach (System.Text.RegularExpressions.Match word in Word().Matches(code))
        {
            if (_dynamic.Contains(word.Value))
                return null;
            if (_needs.TryGetValue(word.Value, out var blobs))
                wanted.UnionWith(blobs);
        }
        return wanted;
    }

    private Dictionary<string, string[]>? _needs;
    private HashSet<string> _dynamic = [];

    [System.Text.RegularExpressions.GeneratedRegex("[A-Za-z_][A-Za-z0-9_]*")]
    private static partial System.Text.RegularExpressions.Regex Word();

    /// <summary>Runs a cell that must succeed; its reply.</summary>
    public async Task<JsonObject> RunAsync(Uri instance, string code, CancellationToken ct = default)
    {
        var reply = await ExecuteAsync(instance, code, ct);
        if (reply["status"]?.GetValue<string>() != "ok")
            throw new InvalidOperationException($"a cell failed ({Describe(code)}): {reply["ename"]}: {reply["evalue"]}\n{string.Join("\n", reply["traceback"]?.AsArray().Select(t => t?.ToString()) ?? [])}");
        return reply;
    }

    /// <summary>Clears the session's state (the kernel's restart).</summary>
    public async Task ResetAsync(Uri instance, CancellationToken ct = default)
    {
        using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(instance, "api/reset")) { Content = JsonContent.Create(new JsonObject { ["session"] = Id }) };
        request.Headers.Add("x-functions-key", key);
        using var response = await http.SendAsync(request, ct);
        response.EnsureSuccessStatusCode();
        foreach (var slot in _inputs.Keys.ToArray())
            _inputs[slot] = null;
        _needs = null;
    }

    /// <summary>The blob names (under sessions/ID/large/) the session's state names now.</summary>
    public IEnumerable<string> LargeBlobs => _inputs.Values.OfType<string>();

    private static string Describe(string code) => code.Length <= 60 ? code.ReplaceLineEndings(" ") : code[..60].ReplaceLineEndings(" ") + "...";

    /// <summary>The code cells of a notebook file (nbformat 4: each cell's source, a string or a list of lines).</summary>
    public static IReadOnlyList<string> CodeCells(string notebook)
    {
        using var doc = JsonDocument.Parse(File.ReadAllText(notebook));
        var cells = new List<string>();
        foreach (var cell in doc.RootElement.GetProperty("cells").EnumerateArray())
        {
            if (cell.GetProperty("cell_type").GetString() != "code")
                continue;
            var source = cell.GetProperty("source");
            cells.Add(source.ValueKind == JsonValueKind.Array ? string.Concat(source.EnumerateArray().Select(l => l.GetString())) : source.GetString() ?? "");
        }
        return cells;
    }
}
