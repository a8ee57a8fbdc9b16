using System.Buffers;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace FaaST.Storage;

/// <summary>
/// Everything one Blob REST request consists of, before it becomes an <see cref="HttpRequestMessage"/>.
/// The fields mirror the string-to-sign, so the signer needs no header collection and no sorting:
/// the x-ms-* headers and query parameters we use are listed here in canonical (sorted) order.
/// </summary>
internal struct RequestParts
{
    public string Method;           // "GET", "PUT", ...
    public string Container;
    public string? EncodedBlob;     // already percent-encoded per segment

    // Standard headers that take part in the signature.
    public long ContentLength;      // 0 => empty in the string-to-sign (version 2015-02-21+)
    public string? IfMatch;
    public string? IfNoneMatch;

    // x-ms-* headers, sorted by name (x-ms-date and x-ms-version are added by the signer's caller).
    public string? BlobContentType; // x-ms-blob-content-type
    public string? BlobType;        // x-ms-blob-type
    public string? DeleteSnapshots; // x-ms-delete-snapshots
    public string? Range;           // x-ms-range

    // Query parameters, sorted by name; values unencoded.
    public string? BlockId;         // blockid
    public string? Comp;            // comp
    public string? Marker;          // marker
    public int MaxResults;          // maxresults (0 = absent)
    public string? Prefix;          // prefix
    public string? Restype;         // restype
}

/// <summary>
/// Azure Storage SharedKey authentication: HMAC-SHA256 of the canonical string-to-sign
/// (https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key), computed without
/// heap allocations except the final header value.
/// </summary>
internal static class SharedKeySigner
{
    /// <summary>Writes the string-to-sign of <paramref name="p"/> into <paramref name="sb"/>.</summary>
    /// <param name="resourcePrefix">"/" + account + the endpoint's path, e.g. "/devstoreaccount1/devstoreaccount1".</param>
    public static void WriteStringToSign(ref CharBuffer sb, in RequestParts p, string resourcePrefix, string date, string version)
    {
        sb.Append(p.Method);
        sb.Append('\n');
        sb.Append('\n'); // Content-Encoding
        sb.Append('\n'); // Content-Language
        if (p.ContentLength > 0)
        {
            sb.Append(p.ContentLength);
        }

        sb.Append('\n');
        sb.Append('\n'); // Content-MD5
        sb.Append('\n'); // Content-Type (we never send one; blob content types go in x-ms-blob-content-type)
        sb.Append('\n'); // Date (x-ms-date is used instead)
        sb.Append('\n'); // If-Modified-Since
        sb.Append(p.IfMatch);
        sb.Append('\n');
        sb.Append(p.IfNoneMatch);
        sb.Append('\n');
        sb.Append('\n'); // If-Unmodified-Since
        sb.Append('\n'); // Range (x-ms-range is used instead)

        // Canonicalized headers, in lexicographic order of their names.
        AppendHeader(ref sb, "x-ms-blob-content-type:", p.BlobContentType);
        AppendHeader(ref sb, "x-ms-blob-type:", p.BlobType);
        AppendHeader(ref sb, "x-ms-date:", date);
        AppendHeader(ref sb, "x-ms-delete-snapshots:", p.DeleteSnapshots);
        AppendHeader(ref sb, "x-ms-range:", p.Range);
        AppendHeader(ref sb, "x-ms-version:", version);

        // Canonicalized resource: /account/encoded-path, then each query parameter as \nname:decoded-value, sorted.
        sb.Append(resourcePrefix);
        sb.Append('/');
        sb.Append(p.Container);
        if (p.EncodedBlob is not null)
        {
            sb.Append('/');
            sb.Append(p.EncodedBlob);
        }

        AppendQuery(ref sb, "\nblockid:", p.BlockId);
        AppendQuery(ref sb, "\ncomp:", p.Comp);
        AppendQuery(ref sb, "\nmarker:", p.Marker);
        if (p.MaxResults > 0)
        {
            sb.Append("\nmaxresults:");
            sb.Append(p.MaxResults);
        }

        AppendQuery(ref sb, "\nprefix:", p.Prefix);
        AppendQuery(ref sb, "\nrestype:", p.Restype);
    }

    /// <summary>The string-to-sign as a string (tests and diagnostics).</summary>
    public static string BuildStringToSign(in RequestParts p, string resourcePrefix, string date, string version)
    {
        var sb = new CharBuffer(stackalloc char[512]);
        try
        {
            WriteStringToSign(ref sb, p, resourcePrefix, date, version);
            return sb.Written.ToString();
        }
        finally
        {
            sb.Dispose();
        }
    }

    /// <summary>"SharedKey {account}:{base64(HMAC-SHA256(key, UTF-8(stringToSign)))}".</summary>
    /// <param name="authorizationPrefix">"SharedKey {account}:".</param>
    public static string CreateAuthorization(ReadOnlySpan<char> stringToSign, byte[] key, string authorizationPrefix)
    {
        Span<char> signature = stackalloc char[44];
        var length = ComputeSignature(stringToSign, key, signature);
        return string.Concat(authorizationPrefix.AsSpan(), signature[..length]);
    }

    /// <summary>Writes base64(HMAC-SHA256(key, UTF-8(stringToSign))) into <paramref name="destination"/> (44 chars).</summary>
    public static int ComputeSignature(ReadOnlySpan<char> stringToSign, byte[] key, Span<char> destination)
    {
        var maxBytes = Encoding.UTF8.GetMaxByteCount(stringToSign.Length);
        byte[]? rented = null;
        var bytes = maxBytes <= 1024 ? stackalloc byte[1024] : (rented = ArrayPool<byte>.Shared.Rent(maxBytes));
        try
        {
            var count = Encoding.UTF8.GetBytes(stringToSign, bytes);
            Span<byte> hash = stackalloc byte[HMACSHA256.HashSizeInBytes];
            HMACSHA256.HashData(key, bytes[..count], hash);
            if (!Convert.TryToBase64Chars(hash, destination, out var written))
            {
                throw new InvalidOperationException("Signature buffer too small.");
            }

            return written;
        }
        finally
        {
            if (rented is not null)
            {
                ArrayPool<byte>.Shared.Return(rented);
            }
        }
    }

    private static void AppendHeader(ref CharBuffer sb, string nameAndColon, string? value)
    {
        if (value is not null)
        {
            sb.Append(nameAndColon);
            sb.Append(value.AsSpan().Trim());
            sb.Append('\n');
        }
    }

    private static void AppendQuery(ref CharBuffer sb, string newlineNameColon, string? value)
    {
        if (!string.IsNullOrEmpty(value))
        {
            sb.Append(newlineNameColon);
            sb.Append(value);
        }
    }
}

/// <summary>A minimal growable char buffer over a stack span, renting from the pool when it outgrows it.</summary>
internal ref struct CharBuffer
{
    private char[]? _rented;
    private Span<char> _span;
    private int _length;

    public CharBuffer(Span<char> initial)
    {
        _rented = null;
        _span = initial;
        _length = 0;
    }

    public readonly ReadOnlySpan<char> Written => _span[.._length];

    public void Append(char c)
    {
        if (_length == _span.Length)
        {
            Grow(1);
        }

        _span[_length++] = c;
    }

    public void Append(string? s) => Append(s.AsSpan());

    public void Append(ReadOnlySpan<char> s)
    {
        if (_length + s.Length > _span.Length)
        {
            Grow(s.Length);
        }

        s.CopyTo(_span[_length..]);
        _length += s.Length;
    }

    public void Append(long value)
    {
        int written;
        while (!value.TryFormat(_span[_length..], out written, default, CultureInfo.InvariantCulture))
        {
            Grow(20);
        }

        _length += written;
    }

    /// <summary>Appends <paramref name="value"/> percent-encoded as a URI data string (RFC 3986 unreserved kept).</summary>
    public void AppendEscaped(ReadOnlySpan<char> value)
    {
        int written;
        while (!Uri.TryEscapeDataString(value, _span[_length..], out written))
        {
            Grow((value.Length * 12) + 16);
        }

        _length += written;
    }

    public void Dispose()
    {
        if (_rented is not null)
        {
            ArrayPool<char>.Shared.Return(_rented);
            _rented = null;
        }
    }

    private void Grow(int needed)
    {
        var next = ArrayPool<char>.Shared.Rent(Math.Max(_span.Length * 2, _length + needed));
        _span[.._length].CopyTo(next);
        if (_rented is not null)
        {
            ArrayPool<char>.Shared.Return(_rented);
        }

        _rented = next;
        _span = next;
    }
}
