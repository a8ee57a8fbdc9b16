using System.Buffers;
using System.Globalization;
using System.Text.Json;

namespace FaaST.Prewarm.Timing;

/// <summary>
/// An app's idle times (from the end of its activity to the next invocation) in fixed-width bins over a range, plus the
/// ones beyond it (ATC'20 §4.2's range-limited histogram). Recording is lock-free (one interlocked add on the bin), so
/// the frontend can record on its request path; an idle time out of bounds (hours: rare) also updates the forecast
/// under a small lock. Reading (<see cref="Counts"/>, the policy) takes a consistent-enough copy: a count that races a
/// record is off by that one idle time.
/// </summary>
public sealed class IdleTimeHistogram
{
    /// <summary>The state format <see cref="Write"/> emits and <see cref="Read"/> accepts.</summary>
    public const int FormatVersion = 1;

    /// <summary>The forecast's smoothing: each out-of-bounds idle time weighs this much against the history.</summary>
    public const double ForecastWeight = 0.5;

    private readonly long[] _counts;
    private readonly long _binTicks;
    private readonly long _rangeTicks;
    private readonly Lock _forecastLock = new();
    private long _outOfBounds;
    private double _forecastTicks;

    /// <summary>An empty histogram with <paramref name="options"/>' bins.</summary>
    public IdleTimeHistogram(HistogramOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        Options = options;
        _binTicks = options.BinWidth.Ticks;
        _rangeTicks = options.Range.Ticks;
        _counts = new long[options.BinCount];
    }

    /// <summary>The bins' width and range.</summary>
    public HistogramOptions Options { get; }

    /// <summary>Idle times recorded within the range.</summary>
    public long InRange
    {
        get
        {
            long n = 0;
            for (var i = 0; i < _counts.Length; i++)
                n += Volatile.Read(ref _counts[i]);
            return n;
        }
    }

    /// <summary>Idle times recorded beyond the range.</summary>
    public long OutOfBounds => Volatile.Read(ref _outOfBounds);

    /// <summary>Every idle time recorded.</summary>
    public long Total => InRange + OutOfBounds;

    /// <summary>The smoothed forecast of the next out-of-bounds idle time; null before the first.</summary>
    public TimeSpan? Forecast
    {
        get
        {
            lock (_forecastLock)
                return _forecastTicks > 0 ? TimeSpan.FromTicks((long)_forecastTicks) : null;
        }
    }

    /// <summary>A copy of the bin counts (bin i holds idle times in [i, i+1) × the bin width).</summary>
    public long[] Counts()
    {
        var copy = new long[_counts.Length];
        for (var i = 0; i < copy.Length; i++)
            copy[i] = Volatile.Read(ref _counts[i]);
        return copy;
    }

    /// <summary>Counts one idle time; a negative one (a clock step) counts as zero.</summary>
    public void Record(TimeSpan idle)
    {
        var ticks = Math.Max(0, idle.Ticks);
        if (ticks < _rangeTicks)
        {
            Interlocked.Increment(ref _counts[Math.Min(_counts.Length - 1, (int)(ticks / _binTicks))]);
            return;
        }
        lock (_forecastLock)
        {
            // A stand-in for ATC'20's ARIMA (see HybridHistogramPolicy): exponential smoothing of the out-of-bounds idle
            // times, in the order they came.
            _forecastTicks = _forecastTicks <= 0 ? ticks : (ForecastWeight * ticks) + ((1 - ForecastWeight) * _forecastTicks);
            Interlocked.Increment(ref _outOfBounds);
        }
    }

    /// <summary>The state as UTF-8 JSON (format <see cref="FormatVersion"/>): bins, out-of-bounds count, forecast.</summary>
    public byte[] Write()
    {
        var buffer = new ArrayBufferWriter<byte>(256);
        using (var json = new Utf8JsonWriter(buffer))
        {
            json.WriteStartObject();
            json.WriteNumber("format", FormatVersion);
            json.WriteNumber("binWidthSeconds", Options.BinWidth.TotalSeconds);
            json.WriteNumber("rangeSeconds", Options.Range.TotalSeconds);
            json.WriteNumber("outOfBounds", OutOfBounds);
            var forecast = Forecast;
            if (forecast is { } f)
                json.WriteNumber("forecastSeconds", f.TotalSeconds);
            // Sparse: most of an app's 240 bins are empty.
            json.WriteStartObject("bins");
            var counts = Counts();
            for (var i = 0; i < counts.Length; i++)
                if (counts[i] != 0)
                    json.WriteNumber(i.ToString(CultureInfo.InvariantCulture), counts[i]);
            json.WriteEndObject();
            json.WriteEndObject();
        }
        return buffer.WrittenSpan.ToArray();
    }

    /// <summary>
    /// Reads a state <see cref="Write"/> wrote into a histogram with <paramref name="options"/>' bins. A state kept with other
    /// bins is re-binned (each old bin's count goes to the new bin holding its middle; counts beyond the new range become
    /// out of bounds), so changing <c>prewarm.histogram</c> keeps what was learnt.
    /// </summary>
    /// <param name="source">Names the state in errors (a blob or file name).</param>
    /// <exception cref="FormatException">Corrupt JSON, another format, or a value out of range; the message names <paramref name="source"/>.</exception>
    public static IdleTimeHistogram Read(ReadOnlySpan<byte> utf8, string source, HistogramOptions options)
    {
        var histogram = new IdleTimeHistogram(options);
        try
        {
            using var doc = JsonDocument.Parse(utf8.ToArray());
            var root = doc.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new FormatException($"{source}: an idle-time histogram state must be a JSON object, not {root.ValueKind}");
            var format = Property(root, "format", source).GetInt32();
            if (format != FormatVersion)
                throw new FormatException($"{source}: idle-time histogram state format {format} is not the supported {FormatVersion}");
            var binSeconds = Property(root, "binWidthSeconds", source).GetDouble();
            var rangeSeconds = Property(root, "rangeSeconds", source).GetDouble();
            if (!(binSeconds > 0) || !(rangeSeconds >= binSeconds) || double.IsInfinity(rangeSeconds))
                throw new FormatException($"{source}: binWidthSeconds {binSeconds} and rangeSeconds {rangeSeconds} do not make a histogram");
            var outOfBounds = Property(root, "outOfBounds", source).GetInt64();
            if (outOfBounds < 0)
                throw new FormatException($"{source}: outOfBounds must be >= 0, not {outOfBounds}");
            var oldBin = TimeSpan.FromSeconds(binSeconds);
            foreach (var bin in Property(root, "bins", source).EnumerateObject())
            {
                if (!int.TryParse(bin.Name, NumberStyles.None, CultureInfo.InvariantCulture, out var index) || index * binSeconds >= rangeSeconds)
                    throw new FormatException($"{source}: bins: \"{bin.Name}\" is not a bin of a {rangeSeconds} s range of {binSeconds} s bins");
                var count = bin.Value.GetInt64();
                if (count < 0)
                    throw new FormatException($"{source}: bins.{bin.Name}: a count must be >= 0, not {count}");
                histogram.Add(TimeSpan.FromTicks((oldBin.Ticks * index) + (oldBin.Ticks / 2)), count);
            }
            histogram._outOfBounds += outOfBounds;
            if (root.TryGetProperty("forecastSeconds", out var forecast))
            {
                var seconds = forecast.GetDouble();
                if (!(seconds > 0) || double.IsInfinity(seconds))
                    throw new FormatException($"{source}: forecastSeconds must be a positive number, not {seconds}");
                histogram._forecastTicks = TimeSpan.FromSeconds(seconds).Ticks;
            }
            return histogram;
        }
        catch (JsonException e)
        {
            throw new FormatException($"{source}: not an idle-time histogram state: {e.Message}", e);
        }
        catch (InvalidOperationException e)
        {
            throw new FormatException($"{source}: a value of the wrong kind: {e.Message}", e);
        }
    }

    private void Add(TimeSpan idle, long count)
    {
        if (idle.Ticks < _rangeTicks)
            _counts[Math.Min(_counts.Length - 1, (int)(idle.Ticks / _binTicks))] += count;
        else
            _outOfBounds += count;
    }

    private static JsonElement Property(JsonElement root, string name, string source) =>
        root.TryGetProperty(name, out var value) ? value : throw new FormatException($"{source}: \"{name}\" is missing");
}
