using System.Text;
using System.Text.Json;

namespace FaaST.Common;

/// <summary>
/// A JSON syntax error of a configuration file (faast.json here; host.json, function.json and
/// local.settings.json in the runtime) as one place and one reason: "(line L, position P): reason".
/// </summary>
public static class JsonSyntaxError
{
    /// <summary>
    /// " (line L, position P): reason" for <paramref name="e"/>, raised while parsing
    /// <paramref name="utf8"/>. L and P count from 1 and P counts characters, as an editor shows the
    /// place (the reader counts bytes from 0, and its message repeats that count as
    /// "LineNumber: L | BytePositionInLine: P", which is cut off).
    /// </summary>
    public static string Describe(JsonException e, ReadOnlySpan<byte> utf8)
    {
        var where = e.LineNumber is { } line && e.BytePositionInLine is { } position
            ? $" (line {line + 1}, position {CharacterColumn(utf8, line, position)})"
            : "";
        return $"{where}: {Reason(e.Message)}";
    }

    /// <summary>
    /// Null when <paramref name="utf8"/> is valid UTF-8; else " (line L, position P): byte 0xNN is
    /// not UTF-8", counted as <see cref="Describe"/> counts. JsonDocument accepts invalid UTF-8
    /// inside strings and fails only when such a value is read, and a text reader would turn it into
    /// U+FFFD without a word: a configuration file is checked whole, first.
    /// </summary>
    public static string? InvalidUtf8(ReadOnlySpan<byte> utf8)
    {
        if (System.Text.Unicode.Utf8.IsValid(utf8))
            return null;
        int offset = 0, line = 1, column = 1;
        while (offset < utf8.Length)
        {
            if (Rune.DecodeFromUtf8(utf8[offset..], out var rune, out var used) != System.Buffers.OperationStatus.Done)
                break;
            if (rune.Value == '\n')
            {
                line++;
                column = 1;
            }
            else
            {
                column += rune.Utf16SequenceLength;
            }
            offset += used;
        }
        return $" (line {line}, position {column}): byte 0x{utf8[offset]:X2} is not UTF-8";
    }

    /// <summary>The 1-based character column of byte <paramref name="bytePosition"/> of 0-based line <paramref name="line"/>.</summary>
    private static long CharacterColumn(ReadOnlySpan<byte> utf8, long line, long bytePosition)
    {
        var start = 0;
        for (long l = 0; l < line; l++)
        {
            var next = utf8[start..].IndexOf((byte)'\n');
            if (next < 0)
                return bytePosition + 1; // not the text the reader saw: keep its count
            start += next + 1;
        }
        var length = (int)Math.Min(bytePosition, utf8.Length - start);
        // Invalid UTF-8 counts one character per bad byte, as the replacement character would show.
        return Encoding.UTF8.GetCharCount(utf8.Slice(start, length)) + 1;
    }

    /// <summary>The reader's reason alone, on one line (it may quote lines of the file).</summary>
    private static string Reason(string message)
    {
        var i = message.IndexOf(" LineNumber:", StringComparison.Ordinal);
        if (i < 0)
            i = message.IndexOf(" Path:", StringComparison.Ordinal);
        var text = i > 0 ? message[..i] : message;
        return string.Join(' ', text.Split(['\r', '\n'], StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries));
    }
}
