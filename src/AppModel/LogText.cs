using System.Buffers;
using System.Globalization;
using System.Text;

namespace FaaST.AppModel;

/// <summary>
/// Makes text from a request (paths, headers, blob names from routes, resolved binding expressions)
/// safe to put in a log line: a CR or LF from a client would otherwise start a forged log line, and
/// other control characters (ESC sequences) would rewrite the terminal.
/// </summary>
public static class LogText
{
    // C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators that some
    // viewers also break lines at.
    private static readonly SearchValues<char> Unsafe = SearchValues.Create(
        string.Concat(Enumerable.Range(0, 0x20).Select(i => (char)i)) + "\u007f" +
        string.Concat(Enumerable.Range(0x80, 0x20).Select(i => (char)i)) + "\u2028\u2029");

    /// <summary>
    /// <paramref name="text"/> with control characters written as escapes (\r, \n, \t, \x1B,
    /// \u2028). Returns the same string, without allocating, when there is nothing to escape,
    /// which is the common case on the request path.
    /// </summary>
    public static string Escape(string? text) => Escape(text, keepLines: false);

    /// <summary>As <see cref="Escape(string?)"/>, but keeps LF (a stack trace's lines); each line
    /// after the first is indented, so none can pass for a log line of its own.</summary>
    public static string EscapeKeepingLines(string? text) => Escape(text, keepLines: true);

    /// <summary>
    /// A line a process wrote (a worker's or an instance's output) as it may reach the operator's terminal: as
    /// <see cref="Escape(string?)"/>, but a tab stays a tab (it moves the cursor within the line, nothing more),
    /// while CR, ESC and every other control character is escaped, so a function's output cannot clear the
    /// screen, rewrite earlier lines or pass for the host's own.
    /// </summary>
    public static string EscapeOutput(string? text) => Escape(text, keepLines: false, keepTabs: true);

    private static string Escape(string? text, bool keepLines, bool keepTabs = false)
    {
        if (text is null)
            return "";
        var first = text.AsSpan().IndexOfAny(Unsafe);
        if (first < 0)
            return text;
        var sb = new StringBuilder(text.Length + 16);
        sb.Append(text, 0, first);
        foreach (var c in text.AsSpan(first))
        {
            if (!Unsafe.Contains(c))
            {
                sb.Append(c);
                continue;
            }
            switch (c)
            {
                case '\r': sb.Append("\\r"); break;
                case '\n': sb.Append(keepLines ? "\n    " : "\\n"); break;
                case '\t': sb.Append(keepTabs ? "\t" : "\\t"); break;
                default:
                    sb.Append(c <= 0xff ? "\\x" : "\\u").Append(((int)c).ToString(c <= 0xff ? "X2" : "X4", CultureInfo.InvariantCulture));
                    break;
            }
        }
        return sb.ToString();
    }
}
