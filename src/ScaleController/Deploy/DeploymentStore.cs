using System.Globalization;
using System.Runtime.InteropServices;
using System.Security.Cryptography;
using System.Text.Json;
using FaaST.ScaleController.Platform;
using FaaST.Storage;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// Deployed apps in blob storage, the way Run-From-Package keeps them (issue 13, item 2): in container
/// <see cref="Container"/>, <c>{app}/v{N}.zip</c> (immutable, written create-only) and <c>{app}/app.json</c>, the
/// current version: <c>{"app","version","sha256","size","deployed","source"}</c>, replaced If-Match on the ETag read
/// before (If-None-Match * for the first), so of two deployers racing for one version exactly one wins and the other
/// takes the next. All state is in storage: a restarted platform lists every app and its version
/// (<see cref="ListAppsAsync"/>), and an instance on any machine extracts the same bytes (<see cref="ExtractAsync"/>).
/// The app's local.settings.json never travels in the package: a deploy stores it apart as
/// <c>{app}/v{N}.settings.json</c>, signed with the platform's records key (<see cref="PlatformKeys.Sign"/>), and the
/// extraction writes it back into the app folder readable only by the platform's user (0600).
/// </summary>
public sealed class DeploymentStore
{
    /// <summary>The container of every app's packages and records.</summary>
    public const string Container = "faast-deployments";

    /// <summary>The file that marks a complete extraction (it holds the package's SHA-256), written last.</summary>
    internal const string CompleteMarker = ".complete";

    private const string RecordName = "app.json";

    private readonly IBlobStore _store;
    private readonly PlatformKeys _keys;
    private readonly DeployOptions _options;
    private readonly TimeProvider _time;
    private readonly ILogger _logger;

    /// <param name="keys">The platform's keys: records are signed with them and refused unless signed with them.</param>
    public DeploymentStore(IBlobStore store, PlatformKeys keys, DeployOptions? options = null, TimeProvider? time = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        ArgumentNullException.ThrowIfNull(keys);
        _store = store;
        _keys = keys;
        _options = options ?? DeployOptions.Default;
        _time = time ?? TimeProvider.System;
        _logger = logger ?? NullLogger.Instance;
    }

    /// <summary>The blob of version <paramref name="version"/>'s package.</summary>
    public static string PackageBlob(string app, int version) => $"{app}/v{version.ToString(CultureInfo.InvariantCulture)}.zip";

    /// <summary>The blob of the app's record.</summary>
    public static string RecordBlob(string app) => $"{app}/{RecordName}";

    /// <summary>The blob of version <paramref name="version"/>'s settings (its local.settings.json, signed), if it had any.</summary>
    public static string SettingsBlob(string app, int version) => $"{app}/v{version.ToString(CultureInfo.InvariantCulture)}.settings.json";

    /// <summary>Publishes a package without settings (see the overload).</summary>
    public Task<Deployment> PublishAsync(string app, Stream zip, string source, CancellationToken ct = default) =>
        PublishAsync(app, zip, settings: null, source, ct);

    /// <summary>
    /// Publishes <paramref name="zip"/> (read from its position to its end) as the app's next version and makes it
    /// current. Losing the race for a version to another deployer takes the next one, up to
    /// <see cref="DeployOptions.PublishAttempts"/> times, then throws <see cref="DeployConflictException"/>.
    /// The package is stored as given: validate it first (<see cref="DeployService"/> does), and leave the settings
    /// out of it (<see cref="Packager.Zip"/> does): <paramref name="settings"/> (the bytes of the app's
    /// local.settings.json, or null) are stored apart, signed, in <see cref="SettingsBlob"/>.
    /// It is <see cref="StageAsync"/> and <see cref="MakeCurrentAsync"/> with nothing between them.
    /// </summary>
    public async Task<Deployment> PublishAsync(string app, Stream zip, byte[]? settings, string source, CancellationToken ct = default)
    {
        var published = await StageNextVersionAsync(app, zip, settings, source, "nothing of it is current", async (staged, attempt) =>
        {
            if (await TryMakeCurrentAsync(staged.Deployment, staged.RecordETag, ct).ConfigureAwait(false))
                return true;
            // Another deployer made a version current after this one was staged: give this number up, try the next.
            Log.PublishRaceLost(_logger, app, staged.Deployment.Version, attempt);
            await DeleteStagedAsync(staged.Deployment).ConfigureAwait(false);
            return false;
        }, ct).ConfigureAwait(false);
        return published.Deployment;
    }

    /// <summary>
    /// Stores <paramref name="zip"/> (read from its position to its end) as the app's next version, <c>v{N}.zip</c>
    /// (create-only; losing the race for N to another deployer takes the next, as <c>PublishAsync</c> does),
    /// without making it current: app.json still names the running version, so a restarted platform and every other
    /// reader keep that one. The platform starts the new version's instances from it, then calls
    /// <see cref="MakeCurrentAsync"/> once one is ready, or <see cref="DiscardAsync"/> when none started.
    /// </summary>
    public Task<StagedDeployment> StageAsync(string app, Stream zip, byte[]? settings, string source, CancellationToken ct = default) =>
        StageNextVersionAsync(app, zip, settings, source, "nothing of it was stored", static (_, _) => Task.FromResult(true), ct);

    /// <summary>
    /// What <c>PublishAsync</c> and <see cref="StageAsync"/> share: stores the package as the app's next version,
    /// taking the next one when another deployer took it, until <paramref name="accept"/> keeps a staged version (it is
    /// given the version and the try's number; false means that version was given up and the next is tried), up to
    /// <see cref="DeployOptions.PublishAttempts"/> times; then <see cref="DeployConflictException"/>, whose message ends
    /// with <paramref name="outcome"/>.
    /// </summary>
    private async Task<StagedDeployment> StageNextVersionAsync(string app, Stream zip, byte[]? settings, string source, string outcome,
        Func<StagedDeployment, int, Task<bool>> accept, CancellationToken ct)
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
                if (await TryStageAsync(app, content, start, sha256, size, settings, source, attempt, ct).ConfigureAwait(false) is { } staged &&
                    await accept(staged, attempt).ConfigureAwait(false))
                    return staged;
            }

            throw new DeployConflictException(
                $"app {app}: other deploys took every version this deploy tried ({_options.PublishAttempts} tries); {outcome}, try again");
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
            var (current, now) = await ReadRecordAsync(deployment.App, ct, verify: false).ConfigureAwait(false);
            if (current is not null && current.Version >= deployment.Version)
            {
                await DeleteStagedAsync(deployment).ConfigureAwait(false);
                throw new DeployConflictException(
                    $"app {deployment.App}: another deploy made v{current.Version} current while v{deployment.Version} was starting; v{deployment.Version} is not current, try again");
            }

            etag = now;
        }

        await DeleteStagedAsync(deployment).ConfigureAwait(false);
        throw new DeployConflictException(
            $"app {deployment.App}: app.json kept changing while v{deployment.Version} was made current ({_options.PublishAttempts} tries); it is not current, try again");
    }

    /// <summary>Deletes a staged version that will never be current (its instances did not start); app.json is untouched.</summary>
    public Task DiscardAsync(StagedDeployment staged)
    {
        ArgumentNullException.ThrowIfNull(staged);
        return DeleteStagedAsync(staged.Deployment);
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
    private async Task<StagedDeployment?> TryStageAsync(string app, Stream content, long start, string sha256, long size, byte[]? settings,
        string source, int attempt, CancellationToken ct)
    {
        // The version number only: an unsigned app.json (an older platform's) is replaced by this signed one.
        var (current, etag) = await ReadRecordAsync(app, ct, verify: false).ConfigureAwait(false);
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

        if (settings is not null)
        {
            // Ours to write: this deployer created v{N}.zip, so v{N} is its version.
            await _store.UploadAsync(Container, SettingsBlob(app, version), SerializeSettings(app, version, settings), "application/json",
                ct: ct).ConfigureAwait(false);
        }

        return new StagedDeployment(new Deployment(app, version, sha256, size, _time.GetUtcNow(), source), etag);
    }

    /// <summary>Replaces app.json with <paramref name="deployment"/> If-Match <paramref name="etag"/>; false when it changed since.</summary>
    private async Task<bool> TryMakeCurrentAsync(Deployment deployment, string? etag, CancellationToken ct)
    {
        try
        {
            await _store.UploadAsync(Container, RecordBlob(deployment.App), SerializeSigned(deployment), "application/json",
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
        var access = AppAccess.For(deployment.App, _logger);
        access.PrepareRoot(Path.GetFullPath(stateDirectory), appRoot);
        if (IsComplete(versionDir, target, deployment))
        {
            access.Apply(versionDir); // an extraction of an older platform may have looser modes
            return target;
        }

        var work = Path.Combine(appRoot, $".v{deployment.Version.ToString(CultureInfo.InvariantCulture)}-{Guid.NewGuid():N}");
        // Private while it is written: nothing of it is readable until its modes are set.
        if (OperatingSystem.IsWindows())
            Directory.CreateDirectory(work);
        else
            Directory.CreateDirectory(work, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
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
            await WriteSettingsAsync(deployment, Path.Combine(work, deployment.App), ct).ConfigureAwait(false);
            await File.WriteAllTextAsync(Path.Combine(work, CompleteMarker), deployment.Sha256, ct).ConfigureAwait(false);
            access.Apply(work);
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

    /// <summary>
    /// Removes the app's extractions under <paramref name="stateDirectory"/> but <paramref name="current"/> and the
    /// newest one below it (the version it replaced, kept to go back to), and work folders a crash left: without this
    /// every `./faast start` and every deploy left a whole copy of the app behind (915 MB after 31 starts). Call it only
    /// once no instance runs an older version (the platform does after a load or a completed roll).
    /// </summary>
    public void Prune(string app, string stateDirectory, int current)
    {
        AppNames.Validate(app);
        var appRoot = Path.Combine(Path.GetFullPath(stateDirectory), "apps", app);
        if (!Directory.Exists(appRoot))
            return;
        var versions = new List<(int Version, string Path)>();
        foreach (var dir in Directory.EnumerateDirectories(appRoot))
        {
            var name = Path.GetFileName(dir);
            if (name.StartsWith(".v", StringComparison.Ordinal))
                TryDelete(dir, _logger); // a work folder an extraction that crashed left (extractions of an app are serialised)
            else if (name.Length > 1 && name[0] == 'v' && int.TryParse(name.AsSpan(1), NumberStyles.None, CultureInfo.InvariantCulture, out var v))
                versions.Add((v, dir));
        }
        var previous = versions.Where(v => v.Version < current).Select(v => v.Version).DefaultIfEmpty(0).Max();
        foreach (var (version, dir) in versions)
        {
            if (version == current || version == previous)
                continue;
            TryDelete(dir, _logger);
            Log.Pruned(_logger, app, version, dir);
        }
    }

    /// <summary>
    /// Writes the version's settings (stored apart, signed) into the extracted app as local.settings.json, 0600: the
    /// host (the platform's user) reads it and hands the values to its workers as their environment; the workers' user
    /// cannot read the file. A package from before settings were kept apart may still hold its own; the stored one wins.
    /// </summary>
    private async Task WriteSettingsAsync(Deployment deployment, string appFolder, CancellationToken ct)
    {
        var blob = SettingsBlob(deployment.App, deployment.Version);
        var content = await _store.DownloadAsync(Container, blob, ct).ConfigureAwait(false);
        var target = Path.Combine(appFolder, Packager.SettingsFile);
        if (content is null)
        {
            if (File.Exists(target) && !OperatingSystem.IsWindows())
                File.SetUnixFileMode(target, UnixFileMode.UserRead | UnixFileMode.UserWrite);
            return;
        }
        var settings = ParseSettings(deployment.App, deployment.Version, content.Data);
        File.Delete(target);
        var create = new FileStreamOptions { Mode = FileMode.CreateNew, Access = FileAccess.Write };
        if (!OperatingSystem.IsWindows())
            create.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
        await using var file = new FileStream(target, create);
        await file.WriteAsync(settings, ct).ConfigureAwait(false);
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

    private async Task<(Deployment? Deployment, string? ETag)> ReadRecordAsync(string app, CancellationToken ct, bool verify = true)
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

        if (content is null)
            return (null, null);
        var deployment = Parse(app, content.Data);
        if (verify)
            Verify(app, deployment, content.Data);
        return (deployment, content.Properties.ETag);
    }

    /// <summary>Refuses (logged) an app.json this platform did not sign: never loaded, never extracted, never run.</summary>
    private void Verify(string app, Deployment deployment, byte[] data)
    {
        string? signature = null;
        try
        {
            using var doc = JsonDocument.Parse(data);
            if (doc.RootElement.TryGetProperty("signature", out var s) && s.ValueKind == JsonValueKind.String)
                signature = s.GetString();
        }
        catch (JsonException)
        {
            // Parse accepted it, so it is JSON
        }
        if (_keys.Verify(Serialize(deployment), signature))
            return;
        var blob = $"{Container}/{RecordBlob(app)}";
        var problem = signature is null ? "unsigned" : "its signature is not this platform's";
        Log.RecordRefused(_logger, blob, problem);
        throw new DeploymentStoreException($"{blob}: {problem}; refusing to load it (only the platform that holds the master key writes app.json)");
    }

    /// <summary>Deletes a version that is not current: its package and its settings.</summary>
    private async Task DeleteStagedAsync(Deployment deployment)
    {
        await DeleteUnpublishedAsync(deployment.Blob).ConfigureAwait(false);
        await DeleteUnpublishedAsync(SettingsBlob(deployment.App, deployment.Version)).ConfigureAwait(false);
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

    /// <summary>A version's settings record: app, version and the file's bytes (base64), then the signature of those.</summary>
    private byte[] SerializeSettings(string app, int version, byte[] settings)
    {
        var unsigned = SettingsJson(app, version, settings, signature: null);
        return SettingsJson(app, version, settings, _keys.Sign(unsigned));
    }

    private static byte[] SettingsJson(string app, int version, byte[] settings, string? signature)
    {
        using var buffer = new MemoryStream();
        using (var json = new Utf8JsonWriter(buffer))
        {
            json.WriteStartObject();
            json.WriteString("app", app);
            json.WriteNumber("version", version);
            json.WriteBase64String("settings", settings);
            if (signature is not null)
                json.WriteString("signature", signature);
            json.WriteEndObject();
        }

        return buffer.ToArray();
    }

    /// <summary>The settings' bytes of a record this platform signed for exactly this app and version; otherwise it
    /// is refused (logged, and the version does not load: an app never runs with settings the platform did not store).</summary>
    internal byte[] ParseSettings(string app, int version, byte[] data)
    {
        var blob = $"{Container}/{SettingsBlob(app, version)}";
        try
        {
            using var doc = JsonDocument.Parse(data);
            var root = doc.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new DeploymentStoreException($"{blob}: the top level must be a JSON object");
            var name = String(root, "app", blob);
            var v = Property(root, "version", blob);
            var settings = Property(root, "settings", blob);
            if (name != app || !v.TryGetInt32(out var n) || n != version || settings.ValueKind != JsonValueKind.String || !settings.TryGetBytesFromBase64(out var bytes))
                throw new DeploymentStoreException($"{blob}: not the settings record of {app} v{version}");
            var signature = root.TryGetProperty("signature", out var s) && s.ValueKind == JsonValueKind.String ? s.GetString() : null;
            if (!_keys.Verify(SettingsJson(app, version, bytes, signature: null), signature))
            {
                var problem = signature is null ? "unsigned" : "its signature is not this platform's";
                Log.RecordRefused(_logger, blob, problem);
                throw new DeploymentStoreException($"{blob}: {problem}; refusing to use it");
            }
            return bytes;
        }
        catch (JsonException e)
        {
            throw new DeploymentStoreException($"{blob}: not valid JSON: {e.Message}", e);
        }
    }

    /// <summary>app.json as stored: the record's fields, then <c>"signature"</c> = the records key's HMAC of
    /// <c>Serialize</c> (the same fields without it).</summary>
    internal byte[] SerializeSigned(Deployment d) => Serialize(d, _keys.Sign(Serialize(d)));

    /// <summary>The canonical bytes of a record: what its signature covers.</summary>
    internal static byte[] Serialize(Deployment d) => Serialize(d, signature: null);

    private static byte[] Serialize(Deployment d, string? signature)
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
            if (signature is not null)
                json.WriteString("signature", signature);
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

/// <summary>
/// Who may read an extracted app (issue 19): the platform's user, and, when the platform runs as root, the app's own
/// worker user through its group (<see cref="WorkerIdentity.UserNameFor"/> of the app's name, the name the runtime
/// derives from the extracted folder, which is named after the app). As root: STATE/apps 0711 (no listing), the app's
/// folder and each version owned by root with the app user's group, folders 0750, files 0640 (0750 when executable),
/// local.settings.json 0600 (root only). Not root: 0700/0600, the platform's user alone. No other app's user, and no
/// other local user, reads an app's code or settings.
/// </summary>
internal sealed partial class AppAccess
{
    private const UnixFileMode Owner = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
    private const UnixFileMode GroupReadEnter = UnixFileMode.GroupRead | UnixFileMode.GroupExecute;

    private AppAccess(int? groupId) => GroupId = groupId;

    /// <summary>The app user's group, or null when no other user may read the app (the platform is not root).</summary>
    public int? GroupId { get; }

    private UnixFileMode Folder => GroupId is null ? Owner : Owner | GroupReadEnter;

    private UnixFileMode File(bool executable) => (executable ? Owner : UnixFileMode.UserRead | UnixFileMode.UserWrite) |
        (GroupId is null ? 0 : UnixFileMode.GroupRead | (executable ? UnixFileMode.GroupExecute : 0));

    public static AppAccess For(string app, ILogger logger)
    {
        if (OperatingSystem.IsWindows() || !Environment.IsPrivilegedProcess)
            return new AppAccess(null);
        var user = WorkerIdentity.UserNameFor(app);
        try
        {
            return new AppAccess(WorkerIdentity.Ensure(user).GroupId);
        }
        catch (Exception e) when (e is InvalidOperationException or System.ComponentModel.Win32Exception)
        {
            // Then only root reads the app: the runtime finds the app user cannot, and --isolation required refuses.
            Log.AppUserUnavailable(logger, app, user, e.Message);
            return new AppAccess(null);
        }
    }

    /// <summary>STATE/apps (0711 as root: app users pass through it without listing it; else 0700) and the app's folder.</summary>
    public void PrepareRoot(string stateDirectory, string appRoot)
    {
        var apps = Path.GetDirectoryName(appRoot)!;
        Directory.CreateDirectory(appRoot);
        if (OperatingSystem.IsWindows())
            return;
        if (GroupId is not null)
        {
            // The app users must pass through the state folder the operator gave (never list it).
            var mode = System.IO.File.GetUnixFileMode(stateDirectory);
            if ((mode & UnixFileMode.OtherExecute) == 0)
                System.IO.File.SetUnixFileMode(stateDirectory, mode | UnixFileMode.OtherExecute);
        }
        System.IO.File.SetUnixFileMode(apps, GroupId is null ? Owner : Owner | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute);
        Give(appRoot);
        System.IO.File.SetUnixFileMode(appRoot, Folder);
    }

    /// <summary>Sets the owner and modes of everything under <paramref name="versionDir"/> (links are never extracted).</summary>
    public void Apply(string versionDir)
    {
        if (OperatingSystem.IsWindows())
            return;
        foreach (var entry in new DirectoryInfo(versionDir).EnumerateFileSystemInfos("*", new EnumerationOptions { RecurseSubdirectories = true, AttributesToSkip = 0 }))
        {
            if (entry.LinkTarget is not null)
                continue;
            if (entry is DirectoryInfo)
            {
                Give(entry.FullName);
                System.IO.File.SetUnixFileMode(entry.FullName, Folder);
            }
            else if (entry.Name == Packager.SettingsFile && Path.GetDirectoryName(Path.GetDirectoryName(entry.FullName)) == versionDir)
            {
                System.IO.File.SetUnixFileMode(entry.FullName, UnixFileMode.UserRead | UnixFileMode.UserWrite); // the platform's user alone
            }
            else
            {
                Give(entry.FullName);
                System.IO.File.SetUnixFileMode(entry.FullName, File((System.IO.File.GetUnixFileMode(entry.FullName) & UnixFileMode.UserExecute) != 0));
            }
        }
        Give(versionDir);
        System.IO.File.SetUnixFileMode(versionDir, Folder);
    }

    private void Give(string path)
    {
        if (GroupId is { } group && LChown(path, uint.MaxValue, (uint)group) != 0)
            throw new IOException($"cannot give {path} to group {group}: {Marshal.GetPInvokeErrorMessage(Marshal.GetLastPInvokeError())}");
    }

    // uid -1: the owner stays the platform's user.
    [DllImport("libc", EntryPoint = "lchown", SetLastError = true)]
    private static extern int LChown([MarshalAs(UnmanagedType.LPUTF8Str)] string path, uint owner, uint group);
}
