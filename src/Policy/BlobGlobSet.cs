using System.Diagnostics.CodeAnalysis;

namespace FaaST.Policy;

/// <summary>
/// Globs over a blob's <c>container/blob</c> path, compiled once: <c>*</c> matches any run of characters
/// within one path segment, <c>?</c> exactly one character (not <c>/</c>), a whole segment <c>**</c> any
/// number of segments (zero included), and <c>\</c> makes the next character literal. Matching is
/// ordinal and case-sensitive, like blob names. <c>[</c>, <c>{</c> and a leading <c>!</c> are reserved
/// (escape them to mean themselves).
/// </summary>
public sealed class BlobGlobSet : IEquatable<BlobGlobSet>
{
    /// <summary>No globs; matches nothing.</summary>
    public static BlobGlobSet Empty { get; } = new([], []);

    private readonly Glob[] _globs;

    private BlobGlobSet(string[] patterns, Glob[] globs)
    {
        Patterns = patterns;
        _globs = globs;
    }

    /// <summary>The patterns as written.</summary>
    public IReadOnlyList<string> Patterns { get; }

    /// <summary>Compiles patterns; an invalid one throws <see cref="ArgumentException"/> naming it and why.</summary>
    public static BlobGlobSet Create(IEnumerable<string> patterns)
    {
        ArgumentNullException.ThrowIfNull(patterns);
        var list = patterns.ToArray();
        if (list.Length == 0)
            return Empty;
        var globs = new Glob[list.Length];
        for (var i = 0; i < list.Length; i++)
        {
            if (!Glob.TryCompile(list[i], out var glob, out var error))
                throw new ArgumentException($"bad glob \"{list[i]}\": {error}", nameof(patterns));
            globs[i] = glob;
        }
        return new BlobGlobSet(list, globs);
    }

    /// <summary>Whether <c>container/blob</c> matches any of the globs.</summary>
    public bool Matches(string container, string blob)
    {
        ArgumentNullException.ThrowIfNull(container);
        ArgumentNullException.ThrowIfNull(blob);
        if (_globs.Length == 0)
            return false;
        var length = container.Length + 1 + blob.Length;
        Span<char> path = length <= 1200 ? stackalloc char[length] : new char[length];
        container.AsSpan().CopyTo(path);
        path[container.Length] = '/';
        blob.AsSpan().CopyTo(path[(container.Length + 1)..]);
        foreach (var glob in _globs)
        {
            if (glob.Matches(path))
                return true;
        }
        return false;
    }

    /// <summary>Checks one pattern without compiling a set; <paramref name="error"/> says why it is bad.</summary>
    internal static bool IsValid(string pattern, [NotNullWhen(false)] out string? error) => Glob.TryCompile(pattern, out _, out error);

    /// <inheritdoc/>
    public bool Equals(BlobGlobSet? other) =>
        other is not null && (ReferenceEquals(this, other) || Patterns.SequenceEqual(other.Patterns, StringComparer.Ordinal));

    /// <inheritdoc/>
    public override bool Equals(object? obj) => Equals(obj as BlobGlobSet);

    /// <inheritdoc/>
    public override int GetHashCode()
    {
        var hash = new HashCode();
        foreach (var p in Patterns)
            hash.Add(p, StringComparer.Ordinal);
        return hash.ToHashCode();
    }

    /// <inheritdoc/>
    public override string ToString() => "[" + string.Join(", ", Patterns.Select(p => "\"" + p + "\"")) + "]";

    /// <summary>One compiled pattern: a list of segments, each <c>**</c> (null) or a list of tokens.</summary>
    private sealed class Glob
    {
        private readonly Token[]?[] _segments;

        private Glob(Token[]?[] segments) => _segments = segments;

        public static bool TryCompile(string pattern, [NotNullWhen(true)] out Glob? glob, [NotNullWhen(false)] out string? error)
        {
            glob = null;
            error = Check(pattern);
            if (error is not null)
                return false;

            var segments = new List<Token[]?>();
            var tokens = new List<Token>();
            var literal = new System.Text.StringBuilder();
            var segmentStart = 0;
            for (var i = 0; i <= pattern.Length; i++)
            {
                if (i == pattern.Length || pattern[i] == '/')
                {
                    var raw = pattern.AsSpan(segmentStart, i - segmentStart);
                    if (raw.SequenceEqual("**"))
                    {
                        // Consecutive ** segments mean the same as one.
                        if (segments.Count == 0 || segments[^1] is not null)
                            segments.Add(null);
                    }
                    else
                    {
                        FlushLiteral();
                        segments.Add(tokens.ToArray());
                    }
                    tokens.Clear();
                    segmentStart = i + 1;
                    continue;
                }
                var c = pattern[i];
                if (c == '\\')
                {
                    literal.Append(pattern[++i]);
                }
                else if (c is '*' or '?')
                {
                    FlushLiteral();
                    // A run of stars within a segment means the same as one.
                    if (c == '?' || tokens.Count == 0 || tokens[^1].Kind != TokenKind.Star)
                        tokens.Add(new Token(c == '*' ? TokenKind.Star : TokenKind.One, null));
                }
                else
                {
                    literal.Append(c);
                }
            }
            glob = new Glob([.. segments]);
            return true;

            void FlushLiteral()
            {
                if (literal.Length > 0)
                {
                    tokens.Add(new Token(TokenKind.Literal, literal.ToString()));
                    literal.Clear();
                }
            }
        }

        /// <summary>Why a pattern is invalid, or null.</summary>
        private static string? Check(string pattern)
        {
            if (pattern.Length == 0)
                return "it is empty";
            if (pattern[0] == '/')
                return "it starts with \"/\"; globs match \"container/blob\" with no leading slash";
            if (pattern[0] == '!')
                return "a leading \"!\" is reserved (negation is not supported); write \"\\!\" for a literal \"!\"";
            if (pattern[^1] == '/')
                return "it ends with \"/\"; to match everything below a folder write \"" + pattern + "**\"";

            var hasSlash = false;
            var segmentStart = 0;
            for (var i = 0; i < pattern.Length; i++)
            {
                var c = pattern[i];
                switch (c)
                {
                    case '\\':
                        if (i + 1 == pattern.Length)
                            return "it ends with an unfinished escape \"\\\"";
                        if (pattern[i + 1] == '/')
                            return "\"/\" separates segments and cannot be escaped";
                        i++;
                        break;
                    case '[' or '{':
                        return $"\"{c}\" is reserved (character classes and alternatives are not supported); write \"\\{c}\" for a literal \"{c}\"";
                    case '/':
                        hasSlash = true;
                        if (!StarsOk(pattern.AsSpan(segmentStart, i - segmentStart)))
                            return DoubleStarError;
                        segmentStart = i + 1;
                        break;
                }
            }
            if (!StarsOk(pattern.AsSpan(segmentStart)))
                return DoubleStarError;
            if (!hasSlash && pattern != "**")
                return "it has no \"/\" but globs match \"container/blob\"; name the container (\"logs/*\", \"*/tmp/**\") or start with \"**/\"";
            return null;
        }

        private const string DoubleStarError = "\"**\" must be a whole path segment (\"logs/**\", \"**/x.tmp\"); use \"*\" within a segment";

        /// <summary>A segment may contain "**" only as the whole segment.</summary>
        private static bool StarsOk(ReadOnlySpan<char> segment)
        {
            if (segment.SequenceEqual("**"))
                return true;
            for (var i = 0; i < segment.Length; i++)
            {
                if (segment[i] == '\\')
                    i++;
                else if (segment[i] == '*' && i + 1 < segment.Length && segment[i + 1] == '*')
                    return false;
            }
            return true;
        }

        /// <summary>Segment-level wildcard match: "**" is the star, a segment pattern matches exactly one
        /// path segment. Greedy with backtracking to the last "**", which is exact for a single kind of star.</summary>
        public bool Matches(ReadOnlySpan<char> path)
        {
            var segments = _segments;
            int p = 0, t = 0;          // pattern segment index; start of the current path segment (> length: done)
            int starP = -1, starT = 0; // last "**" seen and the path segment it was resumed at
            while (t <= path.Length)
            {
                var end = path[t..].IndexOf('/');
                var segment = end < 0 ? path[t..] : path.Slice(t, end);
                var next = end < 0 ? path.Length + 1 : t + end + 1;
                if (p < segments.Length && segments[p] is { } tokens)
                {
                    if (MatchSegment(tokens, segment))
                    {
                        p++;
                        t = next;
                        continue;
                    }
                }
                else if (p < segments.Length)
                {
                    starP = p++;
                    starT = t;
                    continue;
                }
                if (starP < 0)
                    return false;
                // Let the last "**" swallow one more segment and retry from there.
                p = starP + 1;
                var starEnd = path[starT..].IndexOf('/');
                starT = starEnd < 0 ? path.Length + 1 : starT + starEnd + 1;
                t = starT;
            }
            while (p < segments.Length && segments[p] is null)
                p++;
            return p == segments.Length;
        }

        /// <summary>Character-level wildcard match within one segment, same greedy scheme with "*".</summary>
        private static bool MatchSegment(Token[] tokens, ReadOnlySpan<char> s)
        {
            int p = 0, i = 0;
            int starP = -1, starI = 0;
            while (true)
            {
                if (p < tokens.Length)
                {
                    var token = tokens[p];
                    switch (token.Kind)
                    {
                        case TokenKind.Star:
                            starP = p++;
                            starI = i;
                            continue;
                        case TokenKind.One when i < s.Length:
                            i += CharLength(s, i);
                            p++;
                            continue;
                        case TokenKind.Literal when s[i..].StartsWith(token.Literal, StringComparison.Ordinal):
                            i += token.Literal!.Length;
                            p++;
                            continue;
                    }
                }
                else if (i == s.Length)
                {
                    return true;
                }
                if (starP < 0 || starI >= s.Length)
                    return false;
                starI += CharLength(s, starI);
                i = starI;
                p = starP + 1;
            }
        }

        /// <summary>One character: a surrogate pair counts as one.</summary>
        private static int CharLength(ReadOnlySpan<char> s, int i) =>
            char.IsHighSurrogate(s[i]) && i + 1 < s.Length && char.IsLowSurrogate(s[i + 1]) ? 2 : 1;
    }

    private enum TokenKind : byte { Literal, Star, One }

    private readonly record struct Token(TokenKind Kind, string? Literal);
}
