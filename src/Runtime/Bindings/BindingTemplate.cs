using System.Globalization;
using System.Text;
using System.Text.RegularExpressions;

namespace FaaST.Runtime.Bindings;

/// <summary>
/// A binding path such as "outcontainer/{name}-{rand-guid}.txt": literal text and {parameters}.
/// Parameters resolve from trigger data (route, query, blob-trigger path values) and the
/// built-ins {rand-guid}, {DateTime}, {sys.randguid}, {sys.utcnow}.
/// </summary>
public sealed partial class BindingTemplate
{
    private readonly (string Text, bool IsParameter)[] _parts;
    private Regex? _matcher;

    private BindingTemplate(string pattern, (string, bool)[] parts)
    {
        Pattern = pattern;
        _parts = parts;
    }

    public string Pattern { get; }

    public IEnumerable<string> ParameterNames => _parts.Where(p => p.IsParameter).Select(p => p.Text);

    /// <summary>The literal text before the first parameter ("container/prefix").</summary>
    public string LiteralPrefix => _parts.Length > 0 && !_parts[0].IsParameter ? _parts[0].Text : "";

    /// <summary>Parses a template; a stray brace or empty name throws, naming <paramref name="where"/>.</summary>
    public static BindingTemplate Parse(string pattern, string where)
    {
        var parts = new List<(string, bool)>();
        var literal = new StringBuilder();
        for (var i = 0; i < pattern.Length; i++)
        {
            var c = pattern[i];
            if (c == '{')
            {
                var end = pattern.IndexOf('}', i + 1);
                if (end < 0)
                    throw new FormatException($"{where}: \"{pattern}\" has a '{{' without a closing '}}'");
                var name = pattern[(i + 1)..end].Trim();
                if (name.Length == 0 || name.Contains('{'))
                    throw new FormatException($"{where}: \"{pattern}\" has an empty or nested {{}} expression");
                if (literal.Length > 0)
                    parts.Add((literal.ToString(), false));
                literal.Clear();
                parts.Add((name, true));
                i = end;
            }
            else if (c == '}')
            {
                throw new FormatException($"{where}: \"{pattern}\" has a '}}' without an opening '{{'");
            }
            else
            {
                literal.Append(c);
            }
        }
        if (literal.Length > 0)
            parts.Add((literal.ToString(), false));
        return new BindingTemplate(pattern, parts.ToArray());
    }

    public static bool IsBuiltIn(string name) =>
        name.Equals("rand-guid", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("DateTime", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("sys.randguid", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("sys.utcnow", StringComparison.OrdinalIgnoreCase);

    /// <summary>
    /// Fills the parameters from <paramref name="lookup"/>. Returns false and the first
    /// parameter that has no value when one cannot be resolved.
    /// </summary>
    public bool TryResolve(Func<string, string?> lookup, out string result, out string? missing)
    {
        var sb = new StringBuilder(Pattern.Length + 32);
        foreach (var (text, isParameter) in _parts)
        {
            if (!isParameter)
            {
                sb.Append(text);
                continue;
            }
            var value = ResolveBuiltIn(text) ?? lookup(text);
            if (value is null)
            {
                result = "";
                missing = text;
                return false;
            }
            sb.Append(value);
        }
        result = sb.ToString();
        missing = null;
        return true;
    }

    private static string? ResolveBuiltIn(string name)
    {
        if (name.Equals("rand-guid", StringComparison.OrdinalIgnoreCase) || name.Equals("sys.randguid", StringComparison.OrdinalIgnoreCase))
            return Guid.NewGuid().ToString();
        if (name.Equals("DateTime", StringComparison.OrdinalIgnoreCase))
            return DateTime.UtcNow.ToString("yyyy-MM-ddTHH-mm-ssZ", CultureInfo.InvariantCulture);
        if (name.Equals("sys.utcnow", StringComparison.OrdinalIgnoreCase))
            return DateTime.UtcNow.ToString("o", CultureInfo.InvariantCulture);
        return null;
    }

    /// <summary>
    /// Matches a concrete path (a blob-trigger candidate) against the template and collects
    /// the parameter values: "in/{name}.{ext}" on "in/a.b.txt" gives name=a.b, ext=txt.
    /// </summary>
    public bool TryMatch(string path, IDictionary<string, string> values)
    {
        _matcher ??= BuildMatcher();
        var m = _matcher.Match(path);
        if (!m.Success)
            return false;
        for (var i = 0; i < _parts.Length; i++)
            if (_parts[i].IsParameter)
                values[_parts[i].Text] = m.Groups["p" + i.ToString(CultureInfo.InvariantCulture)].Value;
        return true;
    }

    private Regex BuildMatcher()
    {
        var sb = new StringBuilder("^");
        for (var i = 0; i < _parts.Length; i++)
        {
            var (text, isParameter) = _parts[i];
            sb.Append(isParameter ? $"(?<p{i}>.+)" : Regex.Escape(text));
        }
        sb.Append('$');
        return new Regex(sb.ToString(), RegexOptions.CultureInvariant | RegexOptions.Singleline);
    }

    /// <summary>Replaces %setting% references with app settings (done once at load).</summary>
    public static string ExpandAppSettings(string text, Func<string, string?> setting, string where)
    {
        return AppSettingReference().Replace(text, m =>
            setting(m.Groups[1].Value) ?? throw new FormatException(
                $"{where}: \"{text}\" refers to app setting %{m.Groups[1].Value}%, which is not set"));
    }

    [GeneratedRegex("%([^%]+)%")]
    private static partial Regex AppSettingReference();

    public override string ToString() => Pattern;
}
