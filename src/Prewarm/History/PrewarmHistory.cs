using System.Globalization;
using FaaST.Prewarm.Records;
using FaaST.Storage;
using Microsoft.Extensions.Logging;

namespace FaaST.Prewarm.History;

/// <summary>
/// An app's unload records (Faa$T §3.3: "the Load Daemon stores the metadata in blob storage"), kept in the app's own
/// storage account: container <see cref="Container"/>, one blob per instance and unload,
/// <c>&lt;app&gt;/&lt;unload time in UTC ticks, 19 digits&gt;-&lt;instance&gt;.json</c>, so that a listing sorts by unload
/// time and age is known from the name without a download. Reading never fails a start: a record that is missing,
/// unreadable, corrupt or of another format is skipped with a warning.
/// </summary>
public sealed class PrewarmHistory
{
    /// <summary>The container of every app's records.</summary>
    public const string Container = "faast-prewarm";

    private readonly IBlobStore _store;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;

    public PrewarmHistory(IBlobStore store, ILogger logger, TimeProvider? time = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        ArgumentNullException.ThrowIfNull(logger);
        _store = store;
        _logger = logger;
        _time = time ?? TimeProvider.System;
    }

    /// <summary>The blob a record is kept in.</summary>
    public static string BlobName(string app, string instance, DateTimeOffset unloadedAt) =>
        string.Create(CultureInfo.InvariantCulture, $"{app}/{unloadedAt.UtcTicks:D19}-{instance}.json");

    /// <summary>Writes <paramref name="record"/> (replacing one of the same app, instance and time); returns its blob name.</summary>
    public async Task<string> WriteAsync(UnloadRecord record, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(record);
        var blob = BlobName(record.App, record.Instance, record.UnloadedAt);
        var bytes = UnloadRecordFormat.Write(record);
        try
        {
            await _store.UploadAsync(Container, blob, bytes, "application/json", ct: ct).ConfigureAwait(false);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // The first record of the account: the container is made once, not before every write.
            await _store.CreateContainerIfNotExistsAsync(Container, ct).ConfigureAwait(false);
            await _store.UploadAsync(Container, blob, bytes, "application/json", ct: ct).ConfigureAwait(false);
        }
        Log.RecordWritten(_logger, Container, blob, record.Objects.Count);
        return blob;
    }

    /// <summary>
    /// The app's records unloaded within <paramref name="maxAge"/> of now, newest first, at most
    /// <paramref name="maxRecords"/>; a record that cannot be used is skipped with a warning (8700, 8701), and a
    /// missing container is an empty history. A failure to list throws (the caller starts without prewarm).
    /// </summary>
    public async Task<IReadOnlyList<UnloadRecord>> ReadAsync(string app, TimeSpan maxAge, int maxRecords, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(app);
        var from = _time.GetUtcNow() - maxAge;
        var records = new List<UnloadRecord>();
        foreach (var (blob, _) in (await ListAsync(app, ct).ConfigureAwait(false)).Where(b => b.UnloadedAt >= from).Take(maxRecords))
        {
            BlobContent? content;
            try
            {
                content = await _store.DownloadAsync(Container, blob, ct).ConfigureAwait(false);
            }
            catch (Exception e) when (e is BlobStorageException or StorageUnavailableException)
            {
                Log.RecordUnreadable(_logger, e, Container, blob, e.Message);
                continue;
            }
            if (content is null)
            {
                Log.RecordSkipped(_logger, Container, blob, "deleted after it was listed");
                continue;
            }
            try
            {
                var record = UnloadRecordFormat.Read(content.Data, $"{Container}/{blob}");
                if (record.App != app)
                {
                    Log.RecordSkipped(_logger, Container, blob, $"it is app \"{record.App}\"'s, not \"{app}\"'s");
                    continue;
                }
                records.Add(record);
            }
            catch (PrewarmRecordException e)
            {
                Log.RecordSkipped(_logger, Container, blob, e.Reason);
            }
        }
        return records;
    }

    /// <summary>Deletes the app's records unloaded more than <paramref name="maxAge"/> ago and all but the newest
    /// <paramref name="maxRecords"/>; returns how many went. Blobs whose names are not records are left alone.</summary>
    public async Task<int> TrimAsync(string app, TimeSpan maxAge, int maxRecords, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(app);
        var from = _time.GetUtcNow() - maxAge;
        var deleted = 0;
        var kept = 0;
        foreach (var (blob, at) in await ListAsync(app, ct).ConfigureAwait(false))
        {
            if (at >= from && kept < maxRecords)
            {
                kept++;
                continue;
            }
            if (await _store.DeleteAsync(Container, blob, ct: ct).ConfigureAwait(false))
                deleted++;
        }
        if (deleted > 0)
            Log.Trimmed(_logger, deleted, app, maxAge, maxRecords);
        return deleted;
    }

    /// <summary>The app's record blobs, newest first, each with the unload time its name says.</summary>
    private async Task<List<(string Blob, DateTimeOffset UnloadedAt)>> ListAsync(string app, CancellationToken ct)
    {
        var prefix = app + "/";
        var found = new List<(string, DateTimeOffset)>();
        try
        {
            await foreach (var item in _store.ListAsync(Container, prefix, ct).ConfigureAwait(false))
            {
                var name = item.Name.AsSpan(prefix.Length);
                if (name.Length > 20 && name[19] == '-' && name.EndsWith(".json", StringComparison.Ordinal)
                    && long.TryParse(name[..19], NumberStyles.None, CultureInfo.InvariantCulture, out var ticks)
                    && ticks <= DateTimeOffset.MaxValue.UtcTicks)
                {
                    found.Add((item.Name, new DateTimeOffset(ticks, TimeSpan.Zero)));
                }
                else if (!name.Contains('/'))
                {
                    Log.RecordSkipped(_logger, Container, item.Name, "its name is not <unload ticks, 19 digits>-<instance>.json");
                }
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            return []; // no app has written a record yet
        }
        found.Sort(static (a, b) => b.Item2.CompareTo(a.Item2) is var c and not 0 ? c : string.CompareOrdinal(b.Item1, a.Item1));
        return found;
    }
}
