using System.Text.Json;

namespace FaaST.AppModel;

/// <summary>
/// Finds the value of <paramref name="expression"/> in an invocation's data; null when there is none,
/// with <paramref name="why"/> saying what is missing (null: the trigger supplied no such name at all).
/// </summary>
public delegate string? BindingLookup(BindingExpression expression, out string? why);

/// <summary>
/// One {expression} of a binding template: a name ({name}) or a property path into a JSON value
/// ({location.country}). As in Azure Functions, every name along the path matches case-insensitively,
/// a path names object properties only (no array elements: {items[0]} and {items.0} have no value),
/// and it must end at a string, number or boolean.
/// </summary>
public sealed class BindingExpression
{
    private BindingExpression(string text, string[] segments, bool isBuiltIn = false)
    {
        Text = text;
        Segments = segments;
        IsBuiltIn = isBuiltIn;
    }

    /// <summary>{rand-guid}, {DateTime}, {sys.randguid} or {sys.utcnow}: made fresh, not looked up.</summary>
    public bool IsBuiltIn { get; }

    /// <summary>The expression as written between the braces, e.g. "location.country".</summary>
    public string Text { get; }

    /// <summary>The names along the path: ["location", "country"]; one name for a plain {name}.</summary>
    public IReadOnlyList<string> Segments { get; }

    /// <summary>The first name: what the trigger's data must supply ("location").</summary>
    public string Name => Segments[0];

    /// <summary>Whether this is a property path (has a dot), not a plain name.</summary>
    public bool IsPath => Segments.Count > 1;

    /// <summary>Parses the text between braces; a malformed path throws, naming <paramref name="where"/>.</summary>
    internal static BindingExpression Parse(string text, string pattern, string where)
    {
        // The built-ins have dots or dashes of their own and are no property paths.
        if (BindingTemplate.IsBuiltIn(text))
            return new BindingExpression(text, [text], isBuiltIn: true);
        if (text.AsSpan().IndexOfAny('[', ']') >= 0)
            throw new FormatException(
                $"{where}: \"{pattern}\" has the expression {{{text}}}: binding expressions name object properties ({{a.b}}), " +
                "not array elements, as in Azure Functions");
        var segments = text.Split('.');
        foreach (var segment in segments)
            if (segment.Trim().Length == 0 || segment.Trim().Length != segment.Length)
                throw new FormatException(
                    $"{where}: \"{pattern}\" has the expression {{{text}}} with an empty or blank-edged property name; a property path is {{name.name}}");
        return new BindingExpression(text, segments);
    }

    /// <summary>
    /// The value of the path from segment <paramref name="start"/> on, read in <paramref name="value"/>
    /// (what segment <paramref name="start"/> - 1 named, or the payload's root for 0); null, and why,
    /// when a segment is missing or the path ends at no value. <paramref name="source"/> names where
    /// <paramref name="value"/> came from in messages ("the JSON body").
    /// </summary>
    public string? Walk(JsonElement value, int start, string source, out string? why)
    {
        var current = value;
        for (var i = start; i < Segments.Count; i++)
        {
            if (current.ValueKind != JsonValueKind.Object)
            {
                why = current.ValueKind == JsonValueKind.Array
                    ? $"{Place(source, i)} is an array; binding expressions name object properties, not array elements"
                    : $"{Place(source, i)} is {KindOf(current.ValueKind)}, which has no property \"{Segments[i]}\"";
                return null;
            }
            if (!TryGetProperty(current, Segments[i], out var next))
            {
                why = $"{Place(source, i)} has no property \"{Segments[i]}\"";
                return null;
            }
            current = next;
        }
        switch (current.ValueKind)
        {
            case JsonValueKind.String:
                try
                {
                    why = null;
                    return current.GetString()!;
                }
                catch (InvalidOperationException)
                {
                    // JsonDocument lets invalid UTF-8 inside a string through and throws only when it is read.
                    why = $"{Place(source, Segments.Count)} is not valid UTF-8 text";
                    return null;
                }
            case JsonValueKind.Number:
                why = null;
                return current.GetRawText();
            case JsonValueKind.True:
                why = null;
                return "true";
            case JsonValueKind.False:
                why = null;
                return "false";
            case JsonValueKind.Null:
                why = $"{Place(source, Segments.Count)} is null";
                return null;
            default:
                why = $"{Place(source, Segments.Count)} is {KindOf(current.ValueKind)}, not a value; name one of its properties";
                return null;
        }
    }

    /// <summary>
    /// Whether the path, read from <paramref name="root"/>, ends at a JSON <c>null</c> (every segment present, the last
    /// one's value null): what makes a blob binding's path null (FaaST: the input binds nothing, the output is not written).
    /// </summary>
    public bool WalksToNull(JsonElement root)
    {
        var current = root;
        foreach (var segment in Segments)
        {
            if (current.ValueKind != JsonValueKind.Object || !TryGetProperty(current, segment, out current))
                return false;
        }
        return current.ValueKind == JsonValueKind.Null;
    }

    /// <summary>
    /// The property named <paramref name="name"/>: the exact name first (no allocation), else the first
    /// whose name differs only in case, as Azure Functions matches them.
    /// </summary>
    public static bool TryGetProperty(JsonElement obj, string name, out JsonElement value)
    {
        if (obj.TryGetProperty(name, out value))
            return true;
        foreach (var property in obj.EnumerateObject())
        {
            string candidate;
            try
            {
                candidate = property.Name;
            }
            catch (InvalidOperationException)
            {
                continue; // a name that is not valid text matches nothing
            }
            if (string.Equals(candidate, name, StringComparison.OrdinalIgnoreCase))
            {
                value = property.Value;
                return true;
            }
        }
        value = default;
        return false;
    }

    /// <summary>"the JSON body" for the root, "the JSON body's "location.city"" for the value after <paramref name="count"/> segments.</summary>
    private string Place(string source, int count) =>
        count == 0 ? source : $"{source}'s \"{string.Join('.', Segments.Take(count))}\"";

    private static string KindOf(JsonValueKind kind) => kind switch
    {
        JsonValueKind.Object => "an object",
        JsonValueKind.Array => "an array",
        JsonValueKind.String => "a string",
        JsonValueKind.Number => "a number",
        JsonValueKind.True or JsonValueKind.False => "a boolean",
        _ => "null",
    };

    public override string ToString() => Text;
}
