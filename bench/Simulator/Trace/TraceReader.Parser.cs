using System.Globalization;

namespace FaaST.Simulator.Trace;

public static partial class TraceReader
{
    /// <summary>
    /// The line scanner and row parser. The public trace has tens of millions of rows (Faa$T §2.1: 44.3 M accesses), so
    /// the common, unquoted line is cut on a buffer with spans: the only allocations per row are the strings a
    /// <see cref="TraceAccess"/> keeps, and not even those when a row repeats its predecessor's invocation, blob or
    /// ETag (an invocation's accesses are adjacent) or its app (interned: few apps make millions of rows).
    /// </summary>
    private sealed class Parser(TextReader reader, string name, Action<TraceProblem> onProblem)
    {
        private const int MaxShownValue = 40;

        private char[] _buffer = new char[1 << 16];
        private int _start, _end;
        private bool _eof;
        private long _line;

        // Where each field of the current line starts and how long it is, in the line or, for a quoted line, in _unquoted.
        private int[] _fieldStart = new int[16], _fieldLength = new int[16];
        private char[] _unquoted = new char[256];
        private char[] _appKey = new char[128];

        private int _columns, _timestamp, _region, _user, _app, _invocation, _blob, _etag, _bytes, _read, _write;

        private readonly Dictionary<string, string> _apps = new(StringComparer.Ordinal);
        private string _lastInvocation = "", _lastBlob = "", _lastETag = "";

        public IEnumerable<TraceAccess> Rows()
        {
            if (!NextLine(out var start, out var length))
            {
                throw new TraceFormatException(name, 0, "is empty: a trace starts with a header line naming its columns");
            }
            ReadHeader(start, length);
            while (NextLine(out start, out length))
            {
                if (length > 0 && TryParse(_buffer.AsSpan(start, length), out var access))
                {
                    yield return access;
                }
            }
        }

        /// <summary>The next line (without its line break) as a range of the buffer, valid until the next call.</summary>
        private bool NextLine(out int start, out int length)
        {
            var searchFrom = _start;
            while (true)
            {
                var newline = _buffer.AsSpan(searchFrom, _end - searchFrom).IndexOf('\n');
                if (newline >= 0)
                {
                    start = _start;
                    var stop = searchFrom + newline;
                    _start = stop + 1;
                    length = stop > start && _buffer[stop - 1] == '\r' ? stop - start - 1 : stop - start;
                    _line++;
                    return true;
                }
                if (_eof)
                {
                    start = _start;
                    length = _end - _start;
                    _start = _end;
                    if (length == 0)
                    {
                        return false;
                    }
                    if (_buffer[start + length - 1] == '\r')
                    {
                        length--;
                    }
                    _line++;
                    return true;
                }
                searchFrom = _end - _start;
                Fill();
            }
        }

        /// <summary>Moves the unread part to the front (growing the buffer for a line longer than it) and reads more.</summary>
        private void Fill()
        {
            var pending = _end - _start;
            if (pending == _buffer.Length)
            {
                Array.Resize(ref _buffer, _buffer.Length * 2);
            }
            else if (_start > 0)
            {
                Array.Copy(_buffer, _start, _buffer, 0, pending);
            }
            _start = 0;
            _end = pending;
            int read;
            try
            {
                read = reader.Read(_buffer, _end, _buffer.Length - _end);
            }
            catch (Exception e) when (IsCorruptInput(e))
            {
                throw new TraceFormatException(name, _line + 1, $"the compressed trace is truncated or corrupt ({e.Message})", e);
            }
            if (read == 0)
            {
                _eof = true;
            }
            _end += read;
        }

        private void ReadHeader(int start, int length)
        {
            var line = _buffer.AsSpan(start, length);
            if (line.Length > 0 && line[0] == '\uFEFF')
            {
                line = line[1..];
            }
            var columns = Split(line, out var source);
            var names = new List<string>(Math.Max(columns, 0));
            for (var i = 0; i < columns; i++)
            {
                names.Add(source.Slice(_fieldStart[i], _fieldLength[i]).Trim().ToString());
            }
            int Find(string column) => names.FindIndex(n => n.Equals(column, StringComparison.OrdinalIgnoreCase));
            var missing = RequiredColumns.Where(c => Find(c) < 0).ToList();
            if (missing.Count == RequiredColumns.Count)
            {
                throw new TraceFormatException(name, 1, $"has no header: line 1 is '{Shown(line)}', but a trace starts with "
                    + $"a header naming its columns ({string.Join(',', RequiredColumns)})");
            }
            if (missing.Count > 0)
            {
                throw new TraceFormatException(name, 1, $"the header lacks the column{(missing.Count > 1 ? "s" : "")} "
                    + $"{string.Join(", ", missing)} (it has {string.Join(',', names)})");
            }
            _columns = columns;
            (_timestamp, _region, _user, _app) = (Find("Timestamp"), Find("AnonRegion"), Find("AnonUserId"), Find("AnonAppName"));
            (_invocation, _blob, _etag) = (Find("AnonFunctionInvocationId"), Find("AnonBlobName"), Find("AnonBlobETag"));
            (_bytes, _read, _write) = (Find("BlobBytes"), Find("Read"), Find("Write"));
        }

        private bool TryParse(ReadOnlySpan<char> line, out TraceAccess access)
        {
            access = default;
            var fields = Split(line, out var source);
            if (fields < 0)
            {
                return Problem($"a quoted field is not closed or is followed by more than a comma: '{Shown(line)}'");
            }
            if (fields != _columns)
            {
                return Problem($"has {fields} fields, the header has {_columns}");
            }
            var stamp = Field(source, _timestamp);
            if (!long.TryParse(stamp, NumberStyles.Integer, CultureInfo.InvariantCulture, out var timestampMs))
            {
                return Problem($"Timestamp '{Shown(stamp)}' is not an integer (milliseconds since the epoch)");
            }
            var size = Field(source, _bytes);
            if (!double.TryParse(size, NumberStyles.Float, CultureInfo.InvariantCulture, out var bytes) || !double.IsFinite(bytes))
            {
                return Problem($"BlobBytes '{Shown(size)}' is not a number");
            }
            if (bytes < 0 || bytes >= long.MaxValue)
            {
                return Problem($"BlobBytes '{Shown(size)}' is {(bytes < 0 ? "negative" : "too large")}");
            }
            if (!TryBool(Field(source, _read), "Read", out var read) || !TryBool(Field(source, _write), "Write", out var write))
            {
                return false;
            }
            if (!read && !write)
            {
                return Problem("neither Read nor Write is True");
            }
            var appName = Field(source, _app);
            var blob = Field(source, _blob);
            if (appName.IsEmpty || blob.IsEmpty)
            {
                return Problem($"{(appName.IsEmpty ? "AnonAppName" : "AnonBlobName")} is empty");
            }
            var app = InternApp(Field(source, _region), Field(source, _user), appName);
            access = new TraceAccess(timestampMs, app, Reuse(ref _lastInvocation, Field(source, _invocation)), Reuse(ref _lastBlob, blob),
                Reuse(ref _lastETag, Field(source, _etag)), (long)Math.Round(bytes), read, write);
            return true;
        }

        private bool TryBool(ReadOnlySpan<char> value, string column, out bool result)
        {
            var trimmed = value.Trim();
            if (trimmed.Equals("True", StringComparison.OrdinalIgnoreCase))
            {
                result = true;
                return true;
            }
            result = false;
            return trimmed.Equals("False", StringComparison.OrdinalIgnoreCase) || Problem($"{column} '{Shown(value)}' is neither True nor False");
        }

        /// <summary>Reports the current line and returns false, so a check reads <c>return Problem(...)</c>.</summary>
        private bool Problem(string reason)
        {
            onProblem(new TraceProblem(name, _line, reason));
            return false;
        }

        private ReadOnlySpan<char> Field(ReadOnlySpan<char> source, int index) => source.Slice(_fieldStart[index], _fieldLength[index]);

        /// <summary>The previous row's string when this field repeats it, else a new one (which becomes the previous).</summary>
        private static string Reuse(ref string last, ReadOnlySpan<char> value)
        {
            if (!value.SequenceEqual(last))
            {
                last = value.ToString();
            }
            return last;
        }

        /// <summary>Region/user/app as one shared string per app, looked up without building the string first.</summary>
        private string InternApp(ReadOnlySpan<char> region, ReadOnlySpan<char> user, ReadOnlySpan<char> app)
        {
            var length = region.Length + user.Length + app.Length + 2;
            if (_appKey.Length < length)
            {
                _appKey = new char[Math.Max(length, _appKey.Length * 2)];
            }
            region.CopyTo(_appKey);
            _appKey[region.Length] = '/';
            user.CopyTo(_appKey.AsSpan(region.Length + 1));
            _appKey[region.Length + 1 + user.Length] = '/';
            app.CopyTo(_appKey.AsSpan(region.Length + user.Length + 2));
            var key = _appKey.AsSpan(0, length);
            var lookup = _apps.GetAlternateLookup<ReadOnlySpan<char>>();
            if (!lookup.TryGetValue(key, out var interned))
            {
                interned = key.ToString();
                _apps.Add(interned, interned);
            }
            return interned;
        }

        /// <summary>
        /// Cuts a line into fields and returns their count (-1 for a broken quote). An unquoted line is cut in place;
        /// a line with a quote is unescaped into a scratch buffer, which <paramref name="source"/> then is.
        /// </summary>
        private int Split(ReadOnlySpan<char> line, out ReadOnlySpan<char> source)
        {
            if (line.IndexOf('"') >= 0)
            {
                var count = SplitQuoted(line);
                source = _unquoted;
                return count;
            }
            source = line;
            var fields = 0;
            var start = 0;
            while (true)
            {
                var comma = line[start..].IndexOf(',');
                var length = comma < 0 ? line.Length - start : comma;
                AddField(fields++, start, length);
                if (comma < 0)
                {
                    return fields;
                }
                start += comma + 1;
            }
        }

        private int SplitQuoted(ReadOnlySpan<char> line)
        {
            if (_unquoted.Length < line.Length)
            {
                _unquoted = new char[Math.Max(line.Length, _unquoted.Length * 2)];
            }
            var output = 0;
            var fields = 0;
            var i = 0;
            while (true)
            {
                var fieldStart = output;
                if (i < line.Length && line[i] == '"')
                {
                    i++;
                    while (true)
                    {
                        if (i >= line.Length)
                        {
                            return -1;
                        }
                        if (line[i] == '"')
                        {
                            if (i + 1 < line.Length && line[i + 1] == '"')
                            {
                                _unquoted[output++] = '"';
                                i += 2;
                                continue;
                            }
                            i++;
                            break;
                        }
                        _unquoted[output++] = line[i++];
                    }
                    if (i < line.Length && line[i] != ',')
                    {
                        return -1;
                    }
                }
                else
                {
                    while (i < line.Length && line[i] != ',')
                    {
                        _unquoted[output++] = line[i++];
                    }
                }
                AddField(fields++, fieldStart, output - fieldStart);
                if (i >= line.Length)
                {
                    return fields;
                }
                i++;
            }
        }

        private void AddField(int index, int start, int length)
        {
            if (index == _fieldStart.Length)
            {
                Array.Resize(ref _fieldStart, index * 2);
                Array.Resize(ref _fieldLength, index * 2);
            }
            _fieldStart[index] = start;
            _fieldLength[index] = length;
        }

        private static string Shown(ReadOnlySpan<char> value) =>
            value.Length <= MaxShownValue ? value.ToString() : string.Concat(value[..MaxShownValue], "...");
    }
}
