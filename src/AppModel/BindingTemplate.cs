using System.Globalization;
using System.Text;
using System.Text.RegularExpressions;

namespace FaaST.AppModel;

/// <summary>
/// A binding path such as "outcontainer/{name}-{rand-guid}.txt": literal text and {expressions}.
/// Expressions resolve from trigger data (route, query, blob-trigger path values, a JSON body's
/// properties, also along a property path such as {location.country}) and the built-ins
/// {rand-guid}, {DateTime}, {sys.randguid}, {sys.utcnow}.
/// </summary>
public sealed partial class BindingTemplate
{
    // Literal text (Expression null) or an expression, parsed once at load.
    private readonly (string Text, BindingExpression? Expression)[] _parts;
    private Regex? _matcher;

    private BindingTemplate(string pattern, (string, BindingExpression?)[] parts)
    {
        Pattern = pattern;
        _parts = parts;
    }

    public string Pattern { get; }

    public IEnumerable<string> ParameterNames => _parts.Where(p => p.Expression is not null).Select(p => p.Text);

    /// <summary>The template's expressions, in order.</summary>
    public IEnumerable<BindingExpression> Expressions => _parts.Where(p => p.Expression is not null).Select(p => p.Expression!);

    /// <summary>The literal text before the first parameter ("container/prefix").</summary>
    public string LiteralPrefix => _parts.Length > 0 && _parts[0].Expression is null ? _parts[0].Text : "";

    /// <summary>Parses a template; a stray brace or empty name throws, naming <paramref name="where"/>.</summary>
    public static BindingTemplate Parse(string pattern, string where)
    {
        var parts = new List<(string, BindingExpression?)>();
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
                var expression = BindingExpression.Parse(name, pattern, where);
                if (literal.Length > 0)
                    parts.Add((literal.ToString(), null));
                literal.Clear();
                parts.Add((name, expression));
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
            parts.Add((literal.ToString(), null));
        return new BindingTemplate(pattern, parts.ToArray());
    }

    public static bool IsBuiltIn(string name) =>
        name.Equals("rand-guid", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("DateTime", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("sys.randguid", StringComparison.OrdinalIgnoreCase) ||
        name.Equals("sys.utcnow", StringComparison.OrdinalIgnoreCase);

    /// <summary>
    /// Fills the expressions from <paramref name="lookup"/>. Returns false, the first expression
    /// that has no value and why (e.g. which segment of a property path is missing) when one cannot
    /// be resolved.
    /// </summary>
    public bool TryResolve(BindingLookup lookup, out string result, out BindingExpression? missing, out string? why)
    {
        var sb = new StringBuilder(Pattern.Length + 32);
        foreach (var (text, expression) in _parts)
        {
            if (expression is null)
            {
                sb.Append(text);
                continue;
            }
            string? problem = null;
            var value = expression.IsBuiltIn ? ResolveBuiltIn(text) : lookup(expression, out problem);
            if (value is null)
            {
                result = "";
                missing = expression;
                why = problem;
                return false;
            }
            sb.Append(value);
        }
        result = sb.ToString();
        missing = null;
        why = null;
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
            if (_parts[i].Expression is not null)
                values[_parts[i].Text] = m.Groups["p" + i.ToString(CultureInfo.InvariantCulture)].Value;
        return true;
    }

    private Regex BuildMatcher()
    {
        var sb = new StringBuilder("^");
        for (var i = 0; i < _parts.Length; i++)
        {
            var (text, expression) = _parts[i];
            sb.Append(expression is not null ? $"(?<p{i}>.+)" : Regex.Escape(text));
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
