using System.Globalization;

namespace FaaST.Policy;

/// <summary>Sizes in <c>faast.json</c>: a whole number of bytes, or a string such as <c>"512MiB"</c>,
/// <c>"1.5GB"</c> or <c>"12 KB"</c>. B, KB, MB, GB are powers of 1000; KiB, MiB, GiB powers of 1024;
/// units are case-sensitive; no unit means bytes; a fractional result is rounded down.</summary>
internal static class ByteSize
{
    /// <summary>The accepted string form; the schema uses the same pattern.</summary>
    public const string Pattern = "^[0-9]+(\\.[0-9]+)?( ?(B|KB|MB|GB|KiB|MiB|GiB))?$";

    public const long KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

    private static readonly (string Unit, long Factor)[] Units =
        [("B", 1), ("KB", 1000), ("MB", 1000_000), ("GB", 1000_000_000), ("KiB", KiB), ("MiB", MiB), ("GiB", GiB)];

    /// <summary>Parses the string form; <paramref name="error"/> says why it is not a size.</summary>
    public static bool TryParse(string s, out long bytes, out string? error)
    {
        bytes = 0;
        error = null;
        var i = 0;
        while (i < s.Length && (char.IsAsciiDigit(s[i]) || s[i] == '.'))
            i++;
        var number = s.AsSpan(0, i);
        var rest = s.AsSpan(i);
        if (rest.Length > 1 && rest[0] == ' ')
            rest = rest[1..];

        long factor = -1;
        if (rest.IsEmpty)
        {
            factor = 1;
        }
        else
        {
            foreach (var (unit, f) in Units)
            {
                if (rest.SequenceEqual(unit))
                    factor = f;
            }
        }

        var wellFormed = number.Length > 0 && char.IsAsciiDigit(number[0]) && char.IsAsciiDigit(number[^1])
            && number.Count('.') <= 1;
        if (!wellFormed || factor < 0)
        {
            error = $"\"{s}\" is not a size; write a number of bytes or a number and a unit, like \"512MiB\" or \"12KB\" "
                + "(units, case-sensitive: B, KB, MB, GB = powers of 1000; KiB, MiB, GiB = powers of 1024)";
            return false;
        }
        if (!decimal.TryParse(number, NumberStyles.AllowDecimalPoint, CultureInfo.InvariantCulture, out var value)
            || value > long.MaxValue / factor)
        {
            error = $"\"{s}\" is too large";
            return false;
        }
        bytes = (long)decimal.Floor(value * factor);
        return true;
    }

    /// <summary>A size for messages: <c>1GiB</c>, <c>12KB</c> or <c>12345B</c>.</summary>
    public static string Format(long bytes)
    {
        if (bytes == 0)
            return "0B";
        foreach (var (unit, factor) in new[] { ("GiB", GiB), ("MiB", MiB), ("KiB", KiB), ("GB", 1000_000_000L), ("MB", 1000_000L), ("KB", 1000L) })
        {
            if (bytes % factor == 0)
                return (bytes / factor).ToString(CultureInfo.InvariantCulture) + unit;
        }
        return bytes.ToString(CultureInfo.InvariantCulture) + "B";
    }
}
