using System.Buffers;
using System.Text;

namespace FaaST.Storage;

/// <summary>Validation and URL encoding of container and blob names.</summary>
public static class BlobNames
{
    private static readonly SearchValues<char> Unreserved =
        SearchValues.Create("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/");

    /// <summary>
    /// Container names: 3-63 characters of lowercase letters, digits and '-', starting with a letter or
    /// digit, every '-' between two letters or digits; or one of $root, $logs, $web.
    /// </summary>
    public static void ValidateContainer(string container, string paramName = "container")
    {
        ArgumentNullException.ThrowIfNull(container, paramName);
        if (container is "$root" or "$logs" or "$web")
        {
            return;
        }

        string? rule = null;
        if (container.Length is < 3 or > 63)
        {
            rule = "it must be 3 to 63 characters long";
        }
        else
        {
            for (var i = 0; i < container.Length && rule is null; i++)
            {
                var c = container[i];
                if (c == '-')
                {
                    if (i == 0 || i == container.Length - 1 || container[i - 1] == '-')
                    {
                        rule = "it must start and end with a letter or digit, and a '-' must stand between letters or digits";
                    }
                }
                else if (!char.IsAsciiLetterLower(c) && !char.IsAsciiDigit(c))
                {
                    rule = "it may only contain lowercase letters a-z, digits and '-'";
                }
            }
        }

        if (rule is not null)
        {
            throw new ArgumentException($"Invalid container name '{Printable(container)}': {rule}.", paramName);
        }
    }

    /// <summary>Blob names: 1-1024 characters, not only slashes, no "." or ".." path segment (HTTP would collapse them), no control characters.</summary>
    public static void ValidateBlob(string blob, string paramName = "blob")
    {
        ArgumentNullException.ThrowIfNull(blob, paramName);
        string? rule = null;
        if (blob.Length is 0 or > 1024)
        {
            rule = "it must be 1 to 1024 characters long";
        }
        else if (blob.AsSpan().IndexOfAnyInRange('\0', '\u001f') >= 0 || blob.Contains('\u007f', StringComparison.Ordinal))
        {
            rule = "it must not contain control characters";
        }
        else if (blob.AsSpan().IndexOfAnyExcept('/') < 0)
        {
            // "/" resolves to the container's own URL ("container//"), which storage answers 400.
            rule = "it must have a character other than '/'";
        }
        else if (HasDotSegment(blob))
        {
            rule = "it must not have a '.' or '..' path segment";
        }
        else if (!IsWellFormedUtf16(blob))
        {
            rule = "it must be valid Unicode (no lone surrogates)";
        }

        if (rule is not null)
        {
            throw new ArgumentException($"Invalid blob name '{Printable(blob)}': {rule}.", paramName);
        }
    }

    /// <summary>Percent-encodes each '/'-separated segment of a blob name (UTF-8), keeping the slashes.</summary>
    public static string EncodePath(string blob)
    {
        if (blob.AsSpan().IndexOfAnyExcept(Unreserved) < 0)
        {
            return blob; // common case: nothing to encode, no allocation
        }

        var sb = new StringBuilder(blob.Length + 16);
        var start = 0;
        while (true)
        {
            var slash = blob.IndexOf('/', start);
            var segment = slash < 0 ? blob[start..] : blob[start..slash];
            sb.Append(Uri.EscapeDataString(segment));
            if (slash < 0)
            {
                break;
            }

            sb.Append('/');
            start = slash + 1;
        }

        return sb.ToString();
    }

    /// <summary>Validates a content type or ETag that goes into a header (no CR/LF smuggling).</summary>
    public static void ValidateHeaderValue(string? value, string paramName)
    {
        if (value is not null && (value.Length == 0 || value.AsSpan().IndexOfAnyInRange('\0', '\u001f') >= 0))
        {
            throw new ArgumentException($"'{paramName}' must be non-empty and must not contain control characters.", paramName);
        }
    }

    private static bool HasDotSegment(string blob)
    {
        var start = 0;
        while (start <= blob.Length)
        {
            var slash = blob.IndexOf('/', start);
            var end = slash < 0 ? blob.Length : slash;
            var segment = blob.AsSpan(start, end - start);
            if (segment is "." or "..")
            {
                return true;
            }

            if (slash < 0)
            {
                return false;
            }

            start = slash + 1;
        }

        return false;
    }

    private static bool IsWellFormedUtf16(string s)
    {
        for (var i = 0; i < s.Length; i++)
        {
            if (char.IsHighSurrogate(s[i]))
            {
                if (i + 1 >= s.Length || !char.IsLowSurrogate(s[i + 1]))
                {
                    return false;
                }

                i++;
            }
            else if (char.IsLowSurrogate(s[i]))
            {
                return false;
            }
        }

        return true;
    }

    /// <summary>The name as shown in messages: shortened, with control characters and lone surrogates escaped.</summary>
    internal static string Printable(string s)
    {
        var shown = s.Length > 80 ? s[..80] : s;
        var sb = new StringBuilder(shown.Length + 2);
        for (var i = 0; i < shown.Length; i++)
        {
            var c = shown[i];
            var pairOk = char.IsHighSurrogate(c) && i + 1 < shown.Length && char.IsLowSurrogate(shown[i + 1]);
            if (pairOk)
            {
                sb.Append(c).Append(shown[++i]);
            }
            else if (char.IsControl(c) || char.IsSurrogate(c))
            {
                sb.Append("\\u").Append(((int)c).ToString("x4", System.Globalization.CultureInfo.InvariantCulture));
            }
            else
            {
                sb.Append(c);
            }
        }

        if (s.Length > 80)
        {
            sb.Append('…');
        }

        return sb.ToString();
    }
}
