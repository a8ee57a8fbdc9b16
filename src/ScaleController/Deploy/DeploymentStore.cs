using System.Globalization;
using System.Security.Cryptography;
using System.Text.Json;
using FaaST.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// Deployed apps in blob storage, the way Run-From-Package keeps them (issue 13, item 2): in container
/// <see cref="Container"/>, <c>{app}/v{N}.zip</c> (immutable, written create-only) and <c>{app}/app.json</c>, the
/// current version: <c>{"app","version","sha256","size","deployed","source"}</c>, replaced If-Match on the ETag read
/// before (If-None-Match * for the first), so of two deployers racing for one version exactly one wins and the other
/// takes the next. All state is in storage: a restarted platform lists every app and its version
/// (<see cref="ListAppsAsync"/>), and an instance on any machine extracts the same bytes (<see cref="ExtractAsync"/>).
/// </summary>
public sealed class DeploymentStore
{
    /// <summary>The container of every app's packages and records.</summary>
    public const string Container = "faast-deployments";

    /// <summary>The file that marks a complete extraction (it holds the package's SHA-256), written last.</summary>
    internal const string CompleteMarker = ".complete";

    private const string RecordName = "app.json";

    private readonly IBlobStore _store;
    private readonly DeployOptions _options;
    private readonly TimeProvider _time;
    private readonly ILogger _logger;

    public DeploymentStore(IBlobStore store, DeployOptions? options = null, TimeProvider? time = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        _store = store;
        _options = options ?? DeployOptions.Default;
        _time = time ?? TimeProvider.System;
        _logger = logger ?? NullLogger.Instance;
    }

    /// <summary>The blob of version <paramref name="version"/>'s package.</summary>
    public static string PackageBlob(string app, int version) => $"{app}/v{version.ToString(CultureInfo.InvariantCulture)}.zip";

    /// <summary>The blob of the app's record.</summary>
    public static string RecordBlob(string app) => $"{app}/{RecordName}";

    /// <summary>
    /// Publishes <paramref name="zip"/> (read from its position to its end) as the app's next version and makes it
    /// current. Losing the race for a version to another deployer takes the next one, up to
    /// <see cref="DeployOptions.PublishAttempts"/> times, then throws <see cref="DeployConflictException"/>.
    /// The package is stored as given: validate it first (<see cref="DeployService"/> does).
    /// It is <see cref="StageAsync"/> and <see cref="MakeCurrentAsync"/> with nothing between them.
    /// </summary>
    public async Task<Deployment> PublishAsync(string app, Stream zip, string source, CancellationToken ct = default)
    {
        AppNames.Validate(app);
        ArgumentNullException.ThrowIfNull(zip);
        ArgumentNullException.ThrowIfNull(source);
        var (content, spool) = await SeekableAsync(zip, ct).ConfigureAwait(false);
        try
        {
            var (start, sha256, size) = await MeasureAsync(content, ct).ConfigureAwait(false);
            for (var attempt = 1; attempt <= _options.PublishAttempts; attempt++)
            {
                if (await TryStageAsync(app, content, start, sha256, size, source, attempt, ct).ConfigureAwait(false) is not { } staged)
                    continue;
                if (await TryMakeCurrentAsync(staged.Deployment, staged.RecordETag, ct).ConfigureAwait(false))
                    return staged.Deployment;
                Log.PublishRaceLost(_logger, app, staged.Deployment.Version, attempt);
                await DeleteUnpublishedAsync(staged.Deployment.Blob).ConfigureAwait(false);
            }

            throw new DeployConflictException(
                $"app {app}: other deploys took every version this deploy tried ({_options.PublishAttempts} tries); nothing of it is current, try again");
        }
        finally
        {
            if (spool is not null)
                await spool.DisposeAsync().ConfigureAwait(false);
        }
    }

    /// <summary>
    /// Stores <paramref name="zip"/> (read from its position to its end) as the app's next version, <c>v{N}.zip</c>
    /// (create-only; losing the race for N to another deployer takes the next, as <see cref="PublishAsync"/> does),
    /// without making it current: app.json still names the running version, so a restarted platform and every other
    /// reader keep that one. The platform starts the new version's instances from it, then calls
    /// <see cref="MakeCurrentAsync"/> once one is ready, or <see cref="DiscardAsync"/> when none started.
    /// </summary>
    public async Task<StagedDeployment> StageAsync(string app, Stream zip, string source, CancellationToken ct = default)
    {
        AppNames.Validate(app);
        ArgumentNullException.ThrowIfNull(zip);
        ArgumentNullException.ThrowIfNull(source);
        var (content, spool) = await SeekableAsync(zip, ct).ConfigureAwait(false);
        try
        {
            var (start, sha256, size) = await MeasureAsync(content, ct).ConfigureAwait(false);
            for (var attempt = 1; attempt <= _options.PublishAttempts; attempt++)
            {
                if (await TryStageAsync(app, content, start, sha256, size, source, attempt, ct).ConfigureAwait(false) is { } staged)
                    return staged;
            }

            throw new DeployConflictException(
                $"app {app}: other deploys took every version this deploy tried ({_options.PublishAttempts} tries); nothing of it was stored, try again");
        }
        finally
        {
            if (spool is not null)
                await spool.DisposeAsync().ConfigureAwait(false);
        }
    }

    /// <summary>
    /// Makes a staged version current: app.json is replaced If-Match on the ETag read when it was staged (If-None-Match *
    /// for an app's first). When another deployer changed app.json meanwhile, it is read again: still an older version,
    /// and this one is made current over it (its number is above every package stored when it was staged); a newer
    /// one, and this deploy lost: its package is deleted and <see cref="DeployConflictException"/> says so.
    /// </summary>
    public async Task<Deployment> MakeCurrentAsync(StagedDeployment staged, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(staged);
        var deployment = staged.Deployment;
        var etag = staged.RecordETag;
        for (var attempt = 1; attempt <= _options.PublishAttempts; attempt++)
        {
            if (await TryMakeCurrentAsync(deployment, etag, ct).ConfigureAwait(false))
                return deployment;
            Log.PublishRaceLost(_logger, deployment.App, deployment.Version, attempt);
            var (current, now) = await ReadRecordAsync(deployment.App, ct).ConfigureAwait(false);
            if (current is not null && current.Version >= deployment.Version)
            {
                await DeleteUnpublishedAsync(deployment.Blob).ConfigureAwait(false);
                throw new DeployConflictException(
                    $"app {deployment.App}: another deploy made v{current.Version} current while v{deployment.Version} was starting; v{deployment.Version} is not current, try again");
            }

            etag = now;
        }

        await DeleteUnpublishedAsync(deployment.Blob).ConfigureAwait(false);
        throw new DeployConflictException(
            $"app {deployment.App}: app.json kept changing while v{deployment.Version} was made current ({_options.PublishAttempts} tries); it is not current, try again");
    }

    /// <summary>Deletes a staged version that will never be current (its instances did not start); app.json is untouched.</summary>
    public Task DiscardAsync(StagedDeployment staged)
    {
        ArgumentNullException.ThrowIfNull(staged);
        return DeleteUnpublishedAsync(staged.Deployment.Blob);
    }

    /// <summary>Each try re-sends the package, so it must be readable again: a stream that cannot seek goes to a file first.</summary>
    private async Task<(Stream Content, FileStream? Spool)> SeekableAsync(Stream zip, CancellationToken ct)
    {
        if (zip.CanSeek)
            return (zip, null);
        var spool = NewTempFile(_options);
        try
        {
            await zip.CopyToAsync(spool, ct).ConfigureAwait(false);
        }
        catch
        {
            await spool.DisposeAsync().ConfigureAwait(false);
            throw;
        }

        spool.Position = 0;
        return (spool, spool);
    }

    private async Task<(long Start, string Sha256, long Size)> MeasureAsync(Stream content, CancellationToken ct)
    {
        var start = content.Position;
        var sha256 = Convert.ToHexStringLower(await SHA256.HashDataAsync(content, ct).ConfigureAwait(false));
        var size = content.Position - start;
        await _store.CreateContainerIfNotExistsAsync(Container, ct).ConfigureAwait(false);
        return (start, sha256, size);
    }

    /// <summary>One try at storing the package as the next version; null when another deployer took that version.</summary>
    private async Task<StagedDeployment?> TryStageAsync(string app, Stream content, long start, string sha256, long size, string source, int attempt,
        CancellationToken ct)
    {
        var (current, etag) = await ReadRecordAsync(app, ct).ConfigureAwait(false);
        // Above the current version and above any package a deployer still racing (or one that died) wrote.
        var version = Math.Max(current?.Version ?? 0, await HighestPackageAsync(app, ct).ConfigureAwait(false)) + 1;
        content.Position = start;
        try
        {
            await _store.UploadAsync(Container, PackageBlob(app, version), content, size, "application/zip",
                ifNoneMatch: "*", ct: ct).ConfigureAwait(false);
        }
        catch (BlobConditionFailedException)
        {
            Log.PublishRaceLost(_logger, app, version, attempt);
            return null;
        }

        return new StagedDeployment(new Deployment(app, version, sha256, size, _time.GetUtcNow(), source), etag);
    }

    /// <summary>Replaces app.json with <paramref name="deployment"/> If-Match <paramref name="etag"/>; false when it changed since.</summary>
    private async Task<bool> TryMakeCurrentAsync(Deployment deployment, string? etag, CancellationToken ct)
    {
        try
        {
            await _store.UploadAsync(Container, RecordBlob(deployment.App), Serialize(deployment), "application/json",
                ifMatch: etag, ifNoneMatch: etag is null ? "*" : null, ct: ct).ConfigureAwait(false);
        }
        catch (BlobConditionFailedException)
        {
            return false;
        }

        Log.Published(_logger, deployment.App, deployment.Version, deployment.Size, deployment.Sha256, deployment.Source);
        return true;
    }

    /// <summary>The app's current deployment, or null when it was never deployed.</summary>
    public async Task<Deployment?> CurrentAsync(string app, CancellationToken ct = default)
    {
        AppNames.Validate(app);
        return (await ReadRecordAsync(app, ct).ConfigureAwait(false)).Deployment;
    }

    /// <summary>Every deployed app with its current version, by name: what a restarted platform serves. An app.json
    /// that is not a deployment record is logged and left out; the others still load.</summary>
    public async Task<IReadOnlyList<Deployment>> ListAppsAsync(CancellationToken ct = default)
    {
        var apps = new List<string>();
        try
        {
            await foreach (var item in _store.ListAsync(Container, null, ct).ConfigureAwait(false))
            {
                var slash = item.Name.IndexOf('/', StringComparison.Ordinal);
                if (slash > 0 && item.Name.AsSpan(slash + 1).SequenceEqual(RecordName) && AppNames.Problem(item.Name[..slash]) is null)
                    apps.Add(item.Name[..slash]);
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            return []; // nothing was ever deployed to this account
        }

        var deployments = new List<Deployment>(apps.Count);
        foreach (var app in apps.Order(StringComparer.Ordinal))
        {
            try
            {
                if ((await ReadRecordAsync(app, ct).ConfigureAwait(false)).Deployment is { } d)
                    deployments.Add(d);
            }
            catch (DeploymentStoreException e)
            {
                Log.BadAppRecord(_logger, RecordBlob(app), e.Message);
            }
        }

        return deployments;
    }

    /// <summary>
    /// The folder of <paramref name="deployment"/>'s app extracted under <paramref name="stateDirectory"/>:
    /// <c>{state}/apps/{app}/v{N}/{app}</c> (the last folder is named after the app: the runtime names the app, its
    /// peers' view and its workers' user after it). A complete extraction (its marker holds the same SHA-256) is
    /// reused; otherwise the package is downloaded, its size and SHA-256 checked against the record, extracted into
    /// a private folder, marked complete, and renamed into place, so a crash never leaves a half folder that looks done.
    /// </summary>
    public async Task<string> ExtractAsync(Deployment deployment, string stateDirectory, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(deployment);
        ArgumentNullException.ThrowIfNull(stateDirectory);
        AppNames.Validate(deployment.App, nameof(deployment));
        var appRoot = Path.Combine(Path.GetFullPath(stateDirectory), "apps", deployment.App);
        var versionDir = Path.Combine(appRoot, "v" + deployment.Version.ToString(CultureInfo.InvariantCulture));
        var target = Path.Combine(versionDir, deployment.App);
        if (IsComplete(versionDir, target, deployment))
            return target;

        Directory.CreateDirectory(appRoot);
        var work = Path.Combine(appRoot, $".v{deployment.Version.ToString(CultureInfo.InvariantCulture)}-{Guid.NewGuid():N}");
        Directory.CreateDirectory(work);
        try
        {
            var package = Path.Combine(work, "package.zip");
            await using (var file = new FileStream(package, FileMode.CreateNew, FileAccess.ReadWrite, FileShare.None, 1 << 16, useAsync: true))
            {
                if (await _store.DownloadToAsync(Container, deployment.Blob, file, ct: ct).ConfigureAwait(false) is null)
                    throw new DeploymentStoreException($"{Container}/{deployment.Blob}: the package of {deployment.App} v{deployment.Version} is missing");
                file.Position = 0;
                var sha256 = Convert.ToHexStringLower(await SHA256.HashDataAsync(file, ct).ConfigureAwait(false));
                if (file.Length != deployment.Size || !sha256.Equals(deployment.Sha256, StringComparison.OrdinalIgnoreCase))
                    throw new DeploymentStoreException(
                        $"{Container}/{deployment.Blob}: the package is {file.Length} bytes with SHA-256 {sha256}, but app.json promises " +
                        $"{deployment.Size} bytes with SHA-256 {deployment.Sha256}; refusing to run it");
                file.Position = 0;
                try
                {
                    Packager.Extract(file, Path.Combine(work, deployment.App), _options);
                }
                catch (PackageException e)
                {
                    throw new DeploymentStoreException($"{Container}/{deployment.Blob}: the stored package cannot be extracted: {e.Message}", e);
                }
            }

            File.Delete(package);
            await File.WriteAllTextAsync(Path.Combine(work, CompleteMarker), deployment.Sha256, ct).ConfigureAwait(false);
            if (Directory.Exists(versionDir))
            {
                if (IsComplete(versionDir, target, deployment))
                    return target; // another extraction finished first
                Directory.Delete(versionDir, recursive: true); // a different package under the same version (another account)
            }

            try
            {
                Directory.Move(work, versionDir);
            }
            catch (IOException) when (IsComplete(versionDir, target, deployment))
            {
                return target; // raced with another extraction of the same version, which won
            }

            Log.Extracted(_logger, deployment.App, deployment.Version, target);
            return target;
        }
        finally
        {
            if (Directory.Exists(work))
                TryDelete(work, _logger);
        }
    }

    private static bool IsComplete(string versionDir, string target, Deployment deployment)
    {
        var marker = Path.Combine(versionDir, CompleteMarker);
        return File.Exists(marker) && Directory.Exists(target) &&
            File.ReadAllText(marker).Trim().Equals(deployment.Sha256, StringComparison.OrdinalIgnoreCase);
    }

    /// <summary>The highest N of the app's <c>v{N}.zip</c> packages, 0 without any.</summary>
    private async Task<int> HighestPackageAsync(string app, CancellationToken ct)
    {
        var highest = 0;
        var prefix = app + "/v";
        await foreach (var item in _store.ListAsync(Container, prefix, ct).ConfigureAwait(false))
        {
            var name = item.Name.AsSpan(prefix.Length);
            if (name.EndsWith(".zip", StringComparison.Ordinal) &&
                int.TryParse(name[..^4], NumberStyles.None, CultureInfo.InvariantCulture, out var n))
                highest = Math.Max(highest, n);
        }

        return highest;
    }

    private async Task<(Deployment? Deployment, string? ETag)> ReadRecordAsync(string app, CancellationToken ct)
    {
        BlobContent? content;
        try
        {
            content = await _store.DownloadAsync(Container, RecordBlob(app), ct).ConfigureAwait(false);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            return (null, null); // no container yet
        }

        return content is null ? (null, null) : (Parse(app, content.Data), content.Properties.ETag);
    }

    private async Task DeleteUnpublishedAsync(string blob)
    {
        try
        {
            await _store.DeleteAsync(Container, blob).ConfigureAwait(false);
        }
        catch (Exception e) when (e is BlobStorageException or StorageUnavailableException)
        {
            Log.OrphanNotDeleted(_logger, e, blob);
        }
    }

    internal static byte[] Serialize(Deployment d)
    {
        using var buffer = new MemoryStream();
        using (var json = new Utf8JsonWriter(buffer, new JsonWriterOptions { Indented = true }))
        {
            json.WriteStartObject();
            json.WriteString("app", d.App);
            json.WriteNumber("version", d.Version);
            json.WriteString("sha256", d.Sha256);
            json.WriteNumber("size", d.Size);
            json.WriteString("deployed", d.Deployed);
            json.WriteString("source", d.Source);
            json.WriteEndObject();
        }

        return buffer.ToArray();
    }

    internal static Deployment Parse(string app, byte[] data)
    {
        var blob = $"{Container}/{RecordBlob(app)}";
        try
        {
            using var doc = JsonDocument.Parse(data);
            var root = doc.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new DeploymentStoreException($"{blob}: the top level must be a JSON object");
            var name = String(root, "app", blob);
            if (name != app)
                throw new DeploymentStoreException($"{blob}: app is \"{name}\", not \"{app}\"");
            var version = Property(root, "version", blob);
            if (!version.TryGetInt32(out var v) || v < 1)
                throw new DeploymentStoreException($"{blob}: version must be a whole number from 1");
            var sha = String(root, "sha256", blob);
            if (sha.Length != 64 || !sha.All(char.IsAsciiHexDigit))
                throw new DeploymentStoreException($"{blob}: sha256 must be 64 hex digits");
            var size = Property(root, "size", blob);
            if (!size.TryGetInt64(out var s) || s < 0)
                throw new DeploymentStoreException($"{blob}: size must be a whole number of bytes");
            var deployed = Property(root, "deployed", blob);
            if (deployed.ValueKind != JsonValueKind.String || !deployed.TryGetDateTimeOffset(out var when))
                throw new DeploymentStoreException($"{blob}: deployed must be an ISO 8601 time");
            return new Deployment(app, v, sha, s, when, String(root, "source", blob));
        }
        catch (JsonException e)
        {
            throw new DeploymentStoreException($"{blob}: not valid JSON: {e.Message}", e);
        }
    }

    private static JsonElement Property(JsonElement root, string name, string blob) =>
        root.TryGetProperty(name, out var value) ? value : throw new DeploymentStoreException($"{blob}: {name} is missing");

    private static string String(JsonElement root, string name, string blob)
    {
        var value = Property(root, name, blob);
        return value.ValueKind == JsonValueKind.String ? value.GetString()! : throw new DeploymentStoreException($"{blob}: {name} must be a string");
    }

    internal static FileStream NewTempFile(DeployOptions options)
    {
        var dir = options.WorkDirectory ?? Path.GetTempPath();
        Directory.CreateDirectory(dir);
        return new FileStream(Path.Combine(dir, $"faast-deploy-{Guid.NewGuid():N}.zip"), FileMode.CreateNew, FileAccess.ReadWrite,
            FileShare.None, 1 << 16, FileOptions.DeleteOnClose | FileOptions.Asynchronous);
    }

    internal static void TryDelete(string directory, ILogger logger)
    {
        try
        {
            Directory.Delete(directory, recursive: true);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            Log.TempNotDeleted(logger, e, directory);
        }
    }
}
