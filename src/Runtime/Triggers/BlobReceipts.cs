using System.Text;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Triggers;

/// <summary>What a receipt says about one blob version for one function.</summary>
internal enum ReceiptState
{
    /// <summary>Not finished: no attempt yet, or attempts that failed or whose instance died.</summary>
    Pending,

    /// <summary>The function ran for this version (or the blob was gone): never again.</summary>
    Complete,

    /// <summary>Every attempt failed (maxDequeueCount): never again, logged as poison.</summary>
    Poison,
}

/// <summary>A receipt as read: its state, the attempts started so far, and the receipt blob's ETag.</summary>
internal readonly record struct Receipt(ReceiptState State, int Attempts, string ETag)
{
    public bool IsFinal => State is ReceiptState.Complete or ReceiptState.Poison;
}

internal enum ClaimOutcome
{
    /// <summary>This instance holds the lease and runs attempt <see cref="ClaimResult.Claim"/>.Attempt.</summary>
    Claimed,

    /// <summary>The receipt is complete or poison: nothing to run.</summary>
    Done,

    /// <summary>Another instance holds the lease (it is running the function now).</summary>
    Busy,

    /// <summary>The attempts ran out before this claim (instances died mid-invocation): marked poison now.</summary>
    Poisoned,
}

/// <summary>A claim's outcome; <paramref name="Attempts"/> is the attempts the receipt counts (for a poison log line).</summary>
internal readonly record struct ClaimResult(ClaimOutcome Outcome, ReceiptClaim? Claim, int Attempts = 0);

/// <summary>
/// Blob receipts shared by every instance of an app (one host id), as Azure Functions keeps them:
/// azure-webjobs-hosts/blobreceipts/{hostId}/{function}/{etag}/{container}/{blob}. A function runs for a blob
/// version only under a lease on its receipt: create the receipt (create-only), acquire its lease, count the
/// attempt in it, invoke while renewing the lease, then mark it complete (an empty receipt, which is also what
/// receipts written before leases look like) and release the lease. A failed attempt releases the lease for a
/// retry; after maxDequeueCount attempts the receipt is marked poison. An instance that dies holding a lease
/// stops renewing it, the lease expires, and the next instance to scan takes the blob (its killed attempt counts).
/// Pending and poison receipts hold a small JSON document: {"state":"pending","attempts":N}.
/// </summary>
internal sealed class BlobReceipts(IBlobStore store, string hostId, TimeSpan leaseDuration, int maxAttempts, ILogger logger)
{
    public const string Container = "azure-webjobs-hosts";

    public TimeSpan LeaseDuration => leaseDuration;

    public int MaxAttempts => maxAttempts;

    /// <summary>The folder of one function's receipts.</summary>
    public string PrefixOf(string function) => $"blobreceipts/{hostId}/{function}/";

    /// <summary>The receipt blob of one function for one version (ETag) of one blob.</summary>
    public string NameOf(string function, string etag, string container, string blob) =>
        string.Concat(PrefixOf(function), etag.Trim('"'), "/", container, "/", blob);

    /// <summary>
    /// Takes the receipt for one attempt, or says why not. <paramref name="fresh"/>: the blob was just written by
    /// this runtime, so its receipt most likely does not exist yet (the first read is skipped).
    /// </summary>
    public async Task<ClaimResult> TryClaimAsync(string name, bool fresh, CancellationToken ct)
    {
        Receipt? seen = null;
        if (!fresh)
        {
            seen = await ReadAsync(name, ct).ConfigureAwait(false);
            if (seen is { IsFinal: true })
                return new ClaimResult(ClaimOutcome.Done, null);
        }
        if (seen is null)
            await TryCreateAsync(name, ct).ConfigureAwait(false);
        var lease = await store.TryAcquireLeaseAsync(Container, name, leaseDuration, ct).ConfigureAwait(false);
        if (lease is null)
            return new ClaimResult(ClaimOutcome.Busy, null);
        try
        {
            // Read again under the lease: only now can nobody else change it (a write needs the lease). One GET more
            // than comparing the lease's ETag with what was read or created, and it does not depend on that ETag.
            var current = await ReadAsync(name, ct).ConfigureAwait(false) ?? new Receipt(ReceiptState.Pending, 0, lease.ETag);

            if (current.IsFinal)
            {
                await ReleaseQuietlyAsync(name, lease.LeaseId).ConfigureAwait(false);
                return new ClaimResult(ClaimOutcome.Done, null);
            }
            if (current.Attempts >= maxAttempts)
            {
                // Earlier holders started every allowed attempt and none finished (their instances died).
                await store.UploadUnderLeaseAsync(Container, name, Document(ReceiptState.Poison, current.Attempts), lease.LeaseId, ct).ConfigureAwait(false);
                await ReleaseQuietlyAsync(name, lease.LeaseId).ConfigureAwait(false);
                return new ClaimResult(ClaimOutcome.Poisoned, null, current.Attempts);
            }
            // Counted before the function runs, so an attempt whose instance dies still counts.
            var claim = new ReceiptClaim(this, name, lease.LeaseId, current.Attempts + 1);
            await store.UploadUnderLeaseAsync(Container, name, Document(ReceiptState.Pending, claim.Attempt), lease.LeaseId, ct).ConfigureAwait(false);
            claim.StartRenewing();
            return new ClaimResult(ClaimOutcome.Claimed, claim);
        }
        catch
        {
            await ReleaseQuietlyAsync(name, lease.LeaseId).ConfigureAwait(false);
            throw;
        }
    }

    /// <summary>The receipt, or null when there is none.</summary>
    public async Task<Receipt?> ReadAsync(string name, CancellationToken ct)
    {
        var content = await store.DownloadAsync(Container, name, ct).ConfigureAwait(false);
        if (content is null)
            return null;
        if (content.Data.Length == 0)
            return new Receipt(ReceiptState.Complete, 0, content.Properties.ETag);
        try
        {
            using var json = JsonDocument.Parse(content.Data);
            var root = json.RootElement;
            var state = root.GetProperty("state").GetString() switch
            {
                "pending" => ReceiptState.Pending,
                "poison" => ReceiptState.Poison,
                var other => throw new FormatException($"unknown state \"{other}\""),
            };
            var attempts = root.GetProperty("attempts").GetInt32();
            return new Receipt(state, Math.Max(0, attempts), content.Properties.ETag);
        }
        catch (Exception e) when (e is JsonException or FormatException or KeyNotFoundException or InvalidOperationException)
        {
            Log.BlobReceiptUnreadable(logger, LogText.Escape(name), LogText.Escape(e.Message));
            return new Receipt(ReceiptState.Pending, 0, content.Properties.ETag);
        }
    }

    /// <summary>Creates a pending receipt; its ETag, or null when it already exists.</summary>
    private async Task<string?> TryCreateAsync(string name, CancellationToken ct)
    {
        var document = Document(ReceiptState.Pending, 0);
        try
        {
            return (await store.UploadAsync(Container, name, document, "application/json", ifNoneMatch: "*", ct: ct).ConfigureAwait(false)).ETag;
        }
        catch (BlobConditionFailedException)
        {
            return null;
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            await store.CreateContainerIfNotExistsAsync(Container, ct).ConfigureAwait(false);
            try
            {
                return (await store.UploadAsync(Container, name, document, "application/json", ifNoneMatch: "*", ct: ct).ConfigureAwait(false)).ETag;
            }
            catch (BlobConditionFailedException)
            {
                return null;
            }
        }
    }

    internal async Task CompleteAsync(ReceiptClaim claim)
    {
        // Not cancelled by shutdown: the function has run, and saying so is what keeps it from running again.
        await store.UploadUnderLeaseAsync(Container, claim.Name, ReadOnlyMemory<byte>.Empty, claim.LeaseId, CancellationToken.None).ConfigureAwait(false);
        await ReleaseQuietlyAsync(claim.Name, claim.LeaseId).ConfigureAwait(false);
    }

    /// <summary>Records a failed attempt: true when it was the last one (the receipt is now poison), else the lease is released for a retry.</summary>
    internal async Task<bool> FailAsync(ReceiptClaim claim)
    {
        var last = claim.Attempt >= maxAttempts;
        if (last)
            await store.UploadUnderLeaseAsync(Container, claim.Name, Document(ReceiptState.Poison, claim.Attempt), claim.LeaseId, CancellationToken.None).ConfigureAwait(false);
        await ReleaseQuietlyAsync(claim.Name, claim.LeaseId).ConfigureAwait(false);
        return last;
    }

    /// <summary>Gives an attempt up unfinished (the host is stopping): the lease is released, the attempt stays counted.</summary>
    internal Task AbandonAsync(ReceiptClaim claim) => ReleaseQuietlyAsync(claim.Name, claim.LeaseId);

    internal Task<BlobLeaseInfo> RenewAsync(ReceiptClaim claim, CancellationToken ct) => store.RenewLeaseAsync(Container, claim.Name, claim.LeaseId, ct);

    internal ILogger Logger => logger;

    /// <summary>Releases a lease; a failure only means it expires on its own (within the lease duration).</summary>
    private async Task ReleaseQuietlyAsync(string name, string leaseId)
    {
        try
        {
            await store.ReleaseLeaseAsync(Container, name, leaseId, CancellationToken.None).ConfigureAwait(false);
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            // It expires by itself.
        }
    }

    private static byte[] Document(ReceiptState state, int attempts) => state switch
    {
        ReceiptState.Complete => [],
        _ => Encoding.UTF8.GetBytes(
            $$"""{"state":"{{(state == ReceiptState.Poison ? "poison" : "pending")}}","attempts":{{attempts}}}"""),
    };
}

/// <summary>One attempt's hold on a receipt: the lease, renewed in the background until the attempt ends.</summary>
internal sealed class ReceiptClaim(BlobReceipts receipts, string name, string leaseId, int attempt)
{
    public BlobReceipts Receipts => receipts;

    public string Name => name;

    public string LeaseId => leaseId;

    /// <summary>Which attempt this is (1 = the first), as counted in the receipt.</summary>
    public int Attempt => attempt;

    private readonly CancellationTokenSource _stop = new();
    private Task _renewing = Task.CompletedTask;
    private volatile bool _lost;

    /// <summary>The lease was taken by someone else (or the receipt vanished) while the attempt ran.</summary>
    public bool Lost => _lost;

    internal void StartRenewing() => _renewing = RenewLoopAsync(_stop.Token);

    /// <summary>Stops renewing (the lease is still held until released or expired).</summary>
    public async Task StopRenewingAsync()
    {
        await _stop.CancelAsync().ConfigureAwait(false);
        await _renewing.ConfigureAwait(false);
        _stop.Dispose();
    }

    private async Task RenewLoopAsync(CancellationToken stop)
    {
        // A third of the lease: two renewals can fail (a storage hiccup) before it expires.
        using var timer = new PeriodicTimer(Receipts.LeaseDuration / 3);
        try
        {
            while (await timer.WaitForNextTickAsync(stop).ConfigureAwait(false))
            {
                try
                {
                    await Receipts.RenewAsync(this, stop).ConfigureAwait(false);
                }
                catch (BlobConditionFailedException)
                {
                    _lost = true;
                    return;
                }
                catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
                {
                    Log.BlobReceiptRenewFailed(Receipts.Logger, e, LogText.Escape(Name), LogText.Escape(e.Message));
                }
            }
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            // the attempt ended
        }
    }
}
