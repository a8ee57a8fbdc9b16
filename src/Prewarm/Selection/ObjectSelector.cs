using FaaST.Prewarm.Records;

namespace FaaST.Prewarm.Selection;

/// <summary>
/// The Load Daemon's choice of objects (Faa$T §3.3): merge the unload records of a window sized by the app's
/// invocation frequency, and load what was hot (a local or remote hit rate above a threshold) or reused across
/// unload/load periods (accessed more than once across the merged records, like a model and its labels).
/// </summary>
public static class ObjectSelector
{
    private static readonly TimeSpan MinWindow = TimeSpan.FromHours(1);

    /// <summary>Spacings of unload times this many times over make the window (§3.3: "a window based on the
    /// app's invocation frequency"; 8 spans several periods of a regular app without reaching back weeks).</summary>
    private const int WindowSpacings = 8;

    /// <summary>
    /// Merges the records unloaded within <paramref name="window"/> before <paramref name="now"/> (per key the newest
    /// ETag and size, counts summed) and selects a key when its local or remote hit rate (hits / reads) exceeds
    /// <see cref="SelectionRules.HitRateThreshold"/> or it was accessed (read or produced) in more than one of the
    /// merged records (two instances unloading in one period count twice: the records do not say which period is
    /// which); excluded keys never. Ordered by accesses descending, then size ascending, then key, and
    /// cut at <see cref="SelectionRules.MaxBytes"/> (a key that does not fit is skipped; smaller ones after it may fit).
    /// </summary>
    public static IReadOnlyList<SelectedObject> Select(IEnumerable<UnloadRecord> history, DateTimeOffset now, TimeSpan window, SelectionRules rules)
    {
        ArgumentNullException.ThrowIfNull(history);
        ArgumentNullException.ThrowIfNull(rules);
        var from = now - window;
        var merged = new Dictionary<(string Account, string Container, string Blob), Merged>();
        foreach (var record in history)
        {
            if (record.UnloadedAt < from || record.UnloadedAt > now)
                continue;
            foreach (var o in record.Objects)
            {
                var key = (o.Account, o.Container, o.Blob);
                if (!merged.TryGetValue(key, out var m))
                    merged[key] = m = new Merged();
                m.Add(o, record.UnloadedAt);
            }
        }

        var chosen = new List<SelectedObject>();
        foreach (var (key, m) in merged)
        {
            if (rules.Excluded?.Invoke(key.Container, key.Blob) == true)
                continue;
            var hot = m.Reads > 0 && ((double)m.LocalHits / m.Reads > rules.HitRateThreshold
                                      || (double)m.RemoteHits / m.Reads > rules.HitRateThreshold);
            // "Accessed more than once across the merged records" (§3.3): in more than one of them, i.e. reused
            // across unload/load periods; repeats within one period are what the hit rate measures.
            if (hot || m.Records > 1)
                chosen.Add(new SelectedObject(key.Account, key.Container, key.Blob, m.Size, m.ETag, m.Reads + m.Produced));
        }
        chosen.Sort(static (a, b) =>
        {
            var c = b.Accesses.CompareTo(a.Accesses);
            if (c == 0) c = a.Size.CompareTo(b.Size);
            if (c == 0) c = string.CompareOrdinal(a.Account, b.Account);
            if (c == 0) c = string.CompareOrdinal(a.Container, b.Container);
            if (c == 0) c = string.CompareOrdinal(a.Blob, b.Blob);
            return c;
        });
        if (rules.MaxBytes is not { } cap)
            return chosen;
        var fitted = new List<SelectedObject>(chosen.Count);
        long total = 0;
        foreach (var s in chosen)
        {
            if (s.Size <= cap - total)
            {
                fitted.Add(s);
                total += s.Size;
            }
        }
        return fitted;
    }

    /// <summary>
    /// The window from the records themselves (the app's invocation frequency): 8 × the median spacing of
    /// consecutive unload times, at least 1 hour, at most <paramref name="maxAge"/>; <paramref name="maxAge"/> when
    /// there are fewer than 2 records.
    /// </summary>
    public static TimeSpan WindowFor(IEnumerable<UnloadRecord> history, TimeSpan maxAge)
    {
        ArgumentNullException.ThrowIfNull(history);
        var times = history.Select(static r => r.UnloadedAt.UtcTicks).ToArray();
        if (times.Length < 2)
            return maxAge;
        Array.Sort(times);
        var spacings = new long[times.Length - 1];
        for (var i = 1; i < times.Length; i++)
            spacings[i - 1] = times[i] - times[i - 1];
        Array.Sort(spacings);
        var mid = spacings.Length / 2;
        var median = spacings.Length % 2 == 1 ? spacings[mid] : spacings[mid - 1] / 2 + spacings[mid] / 2;
        var window = TimeSpan.FromTicks(median > long.MaxValue / WindowSpacings ? long.MaxValue : median * WindowSpacings);
        if (window < MinWindow)
            window = MinWindow;
        return window > maxAge ? maxAge : window;
    }

    private sealed class Merged
    {
        private DateTimeOffset _newest = DateTimeOffset.MinValue;
        public long Size;
        public string ETag = "";
        public long LocalHits, RemoteHits, Reads, Produced;
        public int Records;

        public void Add(ObjectRecord o, DateTimeOffset unloadedAt)
        {
            // The newest record knows the version storage had last; an older one's counts still say how it was used.
            if (unloadedAt >= _newest)
            {
                _newest = unloadedAt;
                Size = o.Size;
                ETag = o.ETag;
            }
            if (o.Reads + o.Produced > 0)
                Records++;
            LocalHits += o.LocalHits;
            RemoteHits += o.RemoteHits;
            Reads += o.Reads;
            Produced += o.Produced;
        }
    }
}
