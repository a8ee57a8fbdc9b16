using System.Text.Json;
using System.Text.Json.Serialization;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Providers;
using FaaST.Storage;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform's record of the instances it runs, in storage beside the deployments
/// (<c>faast-deployments/{app}/instances/{id}.json</c>): written when an instance is ready, deleted when it stops. A
/// platform that crashed leaves its records, so the next one finds the instances still running and takes them over
/// instead of starting new ones (a restart loses no running instance). Each record carries <c>"signature"</c>, the
/// platform's records key's HMAC of the record without it (<see cref="PlatformKeys.Sign"/>); a record without a valid
/// one is refused with a log line and deleted: never adopted, never used to stop a process.
/// </summary>
internal sealed class InstanceRegistry(IBlobStore store, PlatformKeys keys, ILogger logger)
{
    private static string Prefix(string app) => $"{app}/instances/";

    private static string BlobOf(string app, string id) => $"{Prefix(app)}{id}.json";

    public async Task RecordAsync(InstanceHandle instance, CancellationToken ct)
    {
        var record = new InstanceRecordJson(instance.Id, instance.App, instance.Version, instance.BaseAddress, instance.PeerAddress,
            instance.ProcessId, instance.Started, Environment.MachineName);
        try
        {
            await store.UploadAsync(DeploymentStore.Container, BlobOf(instance.App, instance.Id), Signed(record, keys), ct: ct);
        }
        catch (Exception e) when (e is BlobStorageException or StorageUnavailableException or IOException or HttpRequestException)
        {
            // Without its record a crash of the platform would leave the instance unadopted (stopped by hand); it serves anyway.
            Log.RegistryFailed(logger, instance.App, instance.Id, e.Message);
        }
    }

    public async Task ForgetAsync(InstanceHandle instance, CancellationToken ct)
    {
        try
        {
            await store.DeleteAsync(DeploymentStore.Container, BlobOf(instance.App, instance.Id), ct: ct);
        }
        catch (Exception e) when (e is BlobStorageException or StorageUnavailableException or IOException or HttpRequestException)
        {
            Log.RegistryFailed(logger, instance.App, instance.Id, e.Message);
        }
    }

    /// <summary>The instances a platform recorded for <paramref name="app"/> on this machine (records of other machines are left alone).</summary>
    public async Task<IReadOnlyList<InstanceHandle>> ListAsync(string app, CancellationToken ct)
    {
        var found = new List<InstanceHandle>();
        await foreach (var item in store.ListAsync(DeploymentStore.Container, Prefix(app), ct))
        {
            var content = await store.DownloadAsync(DeploymentStore.Container, item.Name, ct);
            if (content is null)
                continue;
            InstanceRecordJson? record;
            try
            {
                record = JsonSerializer.Deserialize(content.Data, RegistryJson.Default.InstanceRecordJson);
            }
            catch (JsonException e)
            {
                Log.RegistryFailed(logger, app, item.Name, $"not an instance record: {e.Message}");
                await store.DeleteAsync(DeploymentStore.Container, item.Name, ct: ct);
                continue;
            }
            if (record is null)
                continue;
            if (!keys.Verify(Canonical(record), record.Signature))
            {
                Log.RecordRefused(logger, app, item.Name, record.Signature is null ? "unsigned" : "its signature is not this platform's");
                await store.DeleteAsync(DeploymentStore.Container, item.Name, ct: ct);
                continue;
            }
            if (record.Host != Environment.MachineName || record.App != app)
                continue;
            found.Add(new InstanceHandle(record.Id, record.App, record.Version, record.BaseAddress, record.PeerAddress, record.ProcessId, record.Started));
        }
        return found;
    }

    /// <summary>The canonical bytes of a record: what its signature covers (the record without its signature).</summary>
    internal static byte[] Canonical(InstanceRecordJson record) =>
        JsonSerializer.SerializeToUtf8Bytes(record with { Signature = null }, RegistryJson.Default.InstanceRecordJson);

    /// <summary>The record as stored: signed with the platform's records key.</summary>
    internal static byte[] Signed(InstanceRecordJson record, PlatformKeys keys) =>
        JsonSerializer.SerializeToUtf8Bytes(record with { Signature = keys.Sign(Canonical(record)) }, RegistryJson.Default.InstanceRecordJson);
}

internal sealed record InstanceRecordJson(string Id, string App, int Version, Uri BaseAddress, Uri? PeerAddress, int ProcessId, DateTimeOffset Started, string Host,
    string? Signature = null);

[JsonSourceGenerationOptions(PropertyNamingPolicy = JsonKnownNamingPolicy.CamelCase, DefaultIgnoreCondition = JsonIgnoreCondition.WhenWritingNull)]
[JsonSerializable(typeof(InstanceRecordJson))]
internal sealed partial class RegistryJson : JsonSerializerContext;
