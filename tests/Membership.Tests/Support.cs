using System.Runtime.CompilerServices;
using FaaST.Storage;
using Microsoft.Extensions.Time.Testing;

namespace FaaST.Membership.Tests;

/// <summary>The membership tests share one Azurite (FaaST.TestSupport.AzuriteFixture) and run one at a time (they measure liveness by clocks).</summary>
[CollectionDefinition(Name)]
public sealed class MembershipCollection : ICollectionFixture<AzuriteFixture>
{
    public const string Name = "Membership on Azurite";
}

/// <summary>
/// A fake clock for membership services and observers: the test steps it one heartbeat interval (plus the jitter)
/// at a time, and only once every loop waits for its next round, so that each loop runs exactly one round per step
/// whatever the machine's speed. Liveness then depends on steps, not on how fast storage answered.
/// </summary>
internal sealed class Clock(TimeSpan interval) : FakeTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero))
{
    /// <summary>Steps <paramref name="count"/> times, each once every loop waits.</summary>
    public async Task StepAsync(int count, IReadOnlyList<MembershipService> services, IReadOnlyList<MembershipObserver>? observers = null)
    {
        for (var i = 0; i < count; i++)
        {
            await AllWaitingAsync(services, observers);
            Advance(interval * 1.1);
        }

        await AllWaitingAsync(services, observers);
    }

    /// <summary>Steps until <paramref name="condition"/> holds (checked between steps); returns the steps it took.</summary>
    public async Task<int> StepUntilAsync(IReadOnlyList<MembershipService> services, Func<bool> condition, string what,
        IReadOnlyList<MembershipObserver>? observers = null, int maxSteps = 40)
    {
        for (var steps = 0; ; steps++)
        {
            await AllWaitingAsync(services, observers);
            if (condition())
            {
                return steps;
            }

            if (steps == maxSteps)
            {
                Assert.Fail($"Not within {maxSteps} heartbeat intervals: {what}.");
            }

            Advance(interval * 1.1); // the longest jittered wait: every loop runs once per step
        }
    }

    private static Task AllWaitingAsync(IReadOnlyList<MembershipService> services, IReadOnlyList<MembershipObserver>? observers) =>
        Eventually.TrueAsync(() => services.All(s => s.Waiting) && (observers ?? []).All(o => o.Waiting),
            "every membership loop waits for its next round");
}

/// <summary>A store that can be made unreachable for a while (like a wrong endpoint or a network cut).</summary>
internal sealed class SwitchableStore(IBlobStore inner) : IBlobStore
{
    public volatile bool Broken;

    public Uri Endpoint => inner.Endpoint;

    public Uri GetBlobUri(string container, string blob) => inner.GetBlobUri(container, blob);

    public Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default) =>
        Check() ?? inner.CreateContainerIfNotExistsAsync(container, ct);

    public Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default) =>
        Check<BlobProperties?>() ?? inner.GetPropertiesAsync(container, blob, ct);

    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination, BlobRange? range = null,
        string? ifMatch = null, CancellationToken ct = default) =>
        Check<BlobProperties?>() ?? inner.DownloadToAsync(container, blob, destination, range, ifMatch, ct);

    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default) =>
        Check<BlobProperties?>() ?? inner.DownloadToAsync(container, blob, destinationFactory, ifMatch, ct);

    public Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default) =>
        Check<BlobContent?>() ?? inner.DownloadAsync(container, blob, ct);

    public Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default) =>
        Check<BlobProperties>() ?? inner.UploadAsync(container, blob, content, contentType, ifMatch, ifNoneMatch, ct);

    public Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default) =>
        Check<BlobProperties>() ?? inner.UploadAsync(container, blob, content, length, contentType, ifMatch, ifNoneMatch, ct);

    public Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default) =>
        Check<bool>() ?? inner.DeleteAsync(container, blob, ifMatch, ct);

    public async IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null,
        [EnumeratorCancellation] CancellationToken ct = default)
    {
        if (Check() is { } failed)
        {
            await failed;
        }

        await foreach (var item in inner.ListAsync(container, prefix, ct))
        {
            yield return item;
        }
    }

    public Task<BlobLeaseInfo?> TryAcquireLeaseAsync(string container, string blob, TimeSpan duration, CancellationToken ct = default) =>
        Check<BlobLeaseInfo?>() ?? inner.TryAcquireLeaseAsync(container, blob, duration, ct);

    public Task<BlobLeaseInfo> RenewLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        Check<BlobLeaseInfo>() ?? inner.RenewLeaseAsync(container, blob, leaseId, ct);

    public Task<bool> ReleaseLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        Check<bool>() ?? inner.ReleaseLeaseAsync(container, blob, leaseId, ct);

    public Task<BlobProperties> UploadUnderLeaseAsync(string container, string blob, ReadOnlyMemory<byte> content, string leaseId,
        CancellationToken ct = default) =>
        Check<BlobProperties>() ?? inner.UploadUnderLeaseAsync(container, blob, content, leaseId, ct);

    private Task? Check() => Broken ? Task.FromException(Unavailable()) : null;

    private Task<T>? Check<T>() => Broken ? Task.FromException<T>(Unavailable()) : null;

    private static StorageUnavailableException Unavailable() => new("storage is switched off for this test", null);
}
