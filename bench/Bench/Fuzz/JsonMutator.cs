using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// A seeded, structure-aware mutator of JSON documents: it parses a valid document, changes its tree
/// (deletes, duplicates, renames and retypes keys, swaps in values that matter to the key, huge and
/// negative numbers, long strings, control characters, deep nesting), writes it back, and sometimes
/// damages the bytes (invalid UTF-8, truncation, random bytes, BOMs). The same seed gives the same
/// inputs, so a finding reproduces with its seed and index.
/// </summary>
public sealed class JsonMutator(Random random, IReadOnlyDictionary<string, string[]> valuesByKey)
{
    // A string value starting with this marker is written raw (numbers JSON allows but a double
    // cannot hold, and tokens that are not JSON at all).
    private const string Raw = "\u0001raw:";

    private static readonly string[] RawNumbers =
    [
        "0", "-0", "1", "-1", "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
        "9223372036854775808", "-9223372036854775809", "99999999999999999999999999999", "1e308", "1e999", "-1e999",
        "0.5", "1.0", "1e-999", "0.000000000000000000001", "123456789012345678901234567890.5", "65535", "65536", "70000",
    ];

    private static readonly string[] RawTokens = ["NaN", "Infinity", "-Infinity", "undefined", "01", "+1", ".5", "0x10", "tru", "nul", "'x'"];

    private static readonly string[] GenericStrings =
    [
        "", " ", "\t", "\r\n", "\0", "a\0b", "\u001b[31m", "\u007f", "\u0085", "\u2028", "\uFEFF", "\uFFFF", "\uD800", "\uDC00x",
        "😀", "ü", "İ", "ß", "../../../../etc/passwd", "/etc/passwd", "..", ".", "%", "%00", "%ZZ", "%2F", "a%2Fb", "{", "}", "{}", "{{}}",
        "{x", "x}", "%x%", "%%", "$return", "null", "true", "0", "-1", "1e999", "\\", "\"", "'", "*", "**", "?", "#", "&", "=", ";",
        "UseDevelopmentStorage=true", "00:00:00", "-00:00:01", "99999999.00:00:00", "10675199.02:48:05.4775807",
    ];

    public byte[] Mutate(string seed)
    {
        var root = JsonNode.Parse(seed, documentOptions: new JsonDocumentOptions { CommentHandling = JsonCommentHandling.Skip, AllowTrailingCommas = true });
        var edits = 1 + random.Next(4);
        string? duplicateKey = null;
        for (var i = 0; i < edits; i++)
            root = MutateTree(root, ref duplicateKey);
        var text = new StringBuilder();
        Write(root, text, duplicateKey);
        var bytes = Encoding.UTF8.GetBytes(text.ToString());
        if (random.Next(4) == 0)
            bytes = MutateBytes(bytes);
        return bytes;
    }

    /// <summary>One change somewhere in the tree; returns the (possibly replaced) root.</summary>
    private JsonNode? MutateTree(JsonNode? root, ref string? duplicateKey)
    {
        var places = new List<(JsonNode? Node, JsonNode? Parent, string? Key, int Index)>();
        Collect(root, null, null, -1, places);
        var (node, parent, key, index) = places[random.Next(places.Count)];
        switch (random.Next(10))
        {
            case 0 when parent is not null: // delete
                if (parent is JsonObject po)
                    po.Remove(key!);
                else
                    ((JsonArray)parent).RemoveAt(index);
                return root;
            case 1 when parent is JsonObject: // duplicate this key when written
                duplicateKey = key;
                return root;
            case 2 when parent is JsonObject po2 && key is not null: // rename (case, typo, random)
                var value = node;
                po2.Remove(key);
                var renamed = random.Next(3) switch
                {
                    0 => key.ToUpperInvariant(),
                    1 => key.Length > 1 ? key[..^1] : key + "x",
                    _ => Pick(GenericStrings),
                };
                if (!po2.ContainsKey(renamed))
                    po2[renamed] = value;
                return root;
            case 3 when node is JsonObject obj: // add an unknown or known key
                var name = random.Next(2) == 0 && valuesByKey.Count > 0 ? valuesByKey.Keys.ElementAt(random.Next(valuesByKey.Count)) : Pick(GenericStrings);
                if (!obj.ContainsKey(name))
                    obj[name] = NewValue(name, 0);
                return root;
            case 4 when node is JsonArray arr: // grow an array with copies or new values
                var copies = random.Next(2) == 0 ? 1 : random.Next(1, 200);
                for (var i = 0; i < copies; i++)
                    arr.Add(arr.Count > 0 && random.Next(2) == 0 ? arr[random.Next(arr.Count)]?.DeepClone() : NewValue(null, 0));
                return root;
            default: // replace this value
                var replacement = NewValue(key ?? ParentKey(parent), 0);
                if (parent is null)
                    return replacement;
                if (parent is JsonObject p)
                    p[key!] = replacement;
                else
                    ((JsonArray)parent)[index] = replacement;
                return root;
        }
    }

    private static string? ParentKey(JsonNode? parent) => parent?.Parent is JsonObject ? parent.GetPropertyName() : null;

    private static void Collect(JsonNode? node, JsonNode? parent, string? key, int index, List<(JsonNode?, JsonNode?, string?, int)> places)
    {
        places.Add((node, parent, key, index));
        switch (node)
        {
            case JsonObject o:
                foreach (var (k, v) in o.ToList())
                    Collect(v, o, k, -1, places);
                break;
            case JsonArray a:
                for (var i = 0; i < a.Count; i++)
                    Collect(a[i], a, null, i, places);
                break;
        }
    }

    /// <summary>A value for <paramref name="key"/>: mostly the key's interesting values, else any type.</summary>
    private JsonNode? NewValue(string? key, int depth)
    {
        if (key is not null && valuesByKey.TryGetValue(key, out var known) && random.Next(3) != 0)
        {
            var s = Pick(known);
            return s.StartsWith(Raw, StringComparison.Ordinal) ? JsonValue.Create(s) : random.Next(6) == 0 ? MutateString(s) : JsonValue.Create(s);
        }
        switch (random.Next(depth > 2 ? 7 : 10))
        {
            case 0: return null;
            case 1: return JsonValue.Create(random.Next(2) == 0);
            case 2: return JsonValue.Create(Raw + Pick(RawNumbers));
            case 3: return JsonValue.Create(Raw + Pick(RawTokens));
            case 4: return JsonValue.Create(MutateString(Pick(GenericStrings)));
            case 5: return JsonValue.Create(LongString());
            case 6: return JsonValue.Create(Pick(GenericStrings));
            case 7: return new JsonArray(NewValue(key, depth + 1), NewValue(null, depth + 1));
            case 8: return new JsonObject { [Pick(GenericStrings)] = NewValue(null, depth + 1) };
            default: return Deep(random.Next(2) == 0 ? random.Next(2, 70) : random.Next(70, 5000));
        }
    }

    private static JsonNode Deep(int depth)
    {
        // Written as raw text: a JsonNode tree this deep would itself be refused when written.
        var open = new StringBuilder();
        for (var i = 0; i < depth; i++)
            open.Append(i % 2 == 0 ? "[" : "{\"a\":");
        open.Append('1');
        for (var i = depth - 1; i >= 0; i--)
            open.Append(i % 2 == 0 ? "]" : "}");
        return JsonValue.Create(Raw + open)!;
    }

    private string LongString()
    {
        var length = random.Next(3) switch { 0 => random.Next(256, 4096), 1 => random.Next(4096, 70_000), _ => random.Next(70_000, 1_100_000) };
        var c = "aZ0/{%é😀\0"[random.Next(10)];
        return new string(c, length);
    }

    private string MutateString(string s)
    {
        var chars = new StringBuilder(s);
        var changes = 1 + random.Next(3);
        for (var i = 0; i < changes; i++)
        {
            var at = chars.Length == 0 ? 0 : random.Next(chars.Length + 1);
            switch (random.Next(5))
            {
                case 0: chars.Insert(at, (char)random.Next(0, 32)); break;                  // control character
                case 1: chars.Insert(at, Pick(GenericStrings)); break;
                case 2 when chars.Length > 0: chars.Remove(random.Next(chars.Length), 1); break;
                case 3: chars.Insert(at, (char)random.Next(0xD800, 0xE000)); break;         // lone surrogate
                default: chars.Insert(at, new string(chars.Length > 0 ? chars[random.Next(chars.Length)] : 'x', random.Next(1, 64))); break;
            }
        }
        return chars.ToString();
    }

    private static readonly byte[][] InvalidUtf8 =
    [
        [0xFF], [0xFE], [0x80], [0xC0, 0x80], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80],
        [0xEF, 0xBB, 0xBF], [0xFE, 0xFF], [0x00], [0xC1, 0xBF],
    ];

    private byte[] MutateBytes(byte[] bytes)
    {
        var list = new List<byte>(bytes);
        switch (random.Next(7))
        {
            case 0: // truncate
                list = list.Take(random.Next(list.Count + 1)).ToList();
                break;
            case 1: // invalid UTF-8 inside a string (after a quote) or anywhere
            {
                var quotes = Enumerable.Range(0, list.Count).Where(i => list[i] == (byte)'"').ToList();
                var at = quotes.Count > 0 && random.Next(4) != 0 ? quotes[random.Next(quotes.Count)] + 1 : random.Next(list.Count + 1);
                list.InsertRange(Math.Min(at, list.Count), Pick(InvalidUtf8));
                break;
            }
            case 2: // flip bytes
                for (var i = random.Next(1, 8); i > 0 && list.Count > 0; i--)
                    list[random.Next(list.Count)] ^= (byte)(1 << random.Next(8));
                break;
            case 3: // random bytes somewhere
            {
                var junk = new byte[random.Next(1, 64)];
                random.NextBytes(junk);
                list.InsertRange(random.Next(list.Count + 1), junk);
                break;
            }
            case 4: // a byte order mark, UTF-8 or not
                list.InsertRange(0, random.Next(2) == 0 ? [0xEF, 0xBB, 0xBF] : random.Next(2) == 0 ? [0xFF, 0xFE] : [0xFE, 0xFF]);
                break;
            case 5: // comments and trailing commas (allowed) or an unterminated comment
                list.InsertRange(random.Next(list.Count + 1), Encoding.UTF8.GetBytes(Pick(["/* c */", "// c\n", ",", "/*", "\n", "\u0000"])));
                break;
            default: // nothing of the original left
                var noise = new byte[random.Next(0, 256)];
                random.NextBytes(noise);
                return noise;
        }
        return list.ToArray();
    }

    private T Pick<T>(IReadOnlyList<T> items) => items[random.Next(items.Count)];

    /// <summary>Writes the tree; <paramref name="duplicateKey"/>'s property is written twice.</summary>
    private static void Write(JsonNode? node, StringBuilder text, string? duplicateKey)
    {
        switch (node)
        {
            case null:
                text.Append("null");
                break;
            case JsonObject o:
                text.Append('{');
                var first = true;
                foreach (var (k, v) in o)
                {
                    for (var n = k == duplicateKey ? 2 : 1; n > 0; n--)
                    {
                        if (!first)
                            text.Append(", ");
                        first = false;
                        WriteString(k, text);
                        text.Append(": ");
                        Write(v, text, duplicateKey);
                    }
                }
                text.Append('}');
                break;
            case JsonArray a:
                text.Append('[');
                for (var i = 0; i < a.Count; i++)
                {
                    if (i > 0)
                        text.Append(", ");
                    Write(a[i], text, duplicateKey);
                }
                text.Append(']');
                break;
            case JsonValue v when v.TryGetValue<string>(out var s):
                if (s.StartsWith(Raw, StringComparison.Ordinal))
                    text.Append(s, Raw.Length, s.Length - Raw.Length);
                else
                    WriteString(s, text);
                break;
            default:
                text.Append(node.ToJsonString());
                break;
        }
    }

    private static void WriteString(string s, StringBuilder text)
    {
        text.Append('"');
        for (var i = 0; i < s.Length; i++)
        {
            var c = s[i];
            if (char.IsHighSurrogate(c) && i + 1 < s.Length && char.IsLowSurrogate(s[i + 1]))
            {
                text.Append(c).Append(s[++i]);
                continue;
            }
            switch (c)
            {
                case '"': text.Append("\\\""); break;
                case '\\': text.Append("\\\\"); break;
                case < ' ': text.Append("\\u").Append(((int)c).ToString("x4", System.Globalization.CultureInfo.InvariantCulture)); break;
                // A lone surrogate cannot be written as UTF-8: escape it, as JSON allows.
                case >= '\uD800' and <= '\uDFFF': text.Append("\\u").Append(((int)c).ToString("x4", System.Globalization.CultureInfo.InvariantCulture)); break;
                default: text.Append(c); break;
            }
        }
        text.Append('"');
    }
}
