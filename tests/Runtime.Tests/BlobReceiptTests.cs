using System.Text;
using FaaST.Runtime.Triggers;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The receipt state machine of blob triggers (<see cref="BlobReceipts"/>) against a real Azurite: what several
/// instances racing for one blob version, failed attempts and dead instances leave in the shared receipt.
/// </summary>
[Collection("azurite")]
public sealed class BlobReceiptTests(AzuriteFixture azurite) : IDisposable
{
    private static readonly TimeSpan Lease = TimeSpan.FromSeconds(15);

    private readonly BlobStore _store = new(azurite.ConnectionString);
    private readonly CapturingLoggerProvider _logs = new();

    public void Dispose()
    {
        _store.Dispose();
        _logs.Dispose();
    }

    /// <summary>Receipts of a host id of their own (one per test), as every instance of one app would make them.</summary>
    private BlobReceipts Receipts(string hostId, int maxAttempts = 5) =>
        new(_store, hostId, Lease, maxAttempts, _logs.CreateLogger("test"));

    private static string NewHostId() => "receipts-" + Guid.NewGuid().ToString("N")[..10];

    private static string NameIn(BlobReceipts receipts) => receipts.NameOf("Process", "\"0x8DC0FFEE\"", "in", "a/b.txt");

    [Fact]
    public void The_receipt_is_named_as_Azure_Functions_names_it()
    {
        var receipts = Receipts("myapp");
        Assert.Equal("blobreceipts/myapp/Process/0x8DC0FFEE/in/a/b.txt", NameIn(receipts));
    }

    [Fact]
    public async Task Of_two_instances_claiming_one_blob_version_one_runs_it_and_the_other_is_told_it_is_busy()
    {
        var hostId = NewHostId();
        var (a, b) = (Receipts(hostId), Receipts(hostId));
        var name = NameIn(a);
        var results = await Task.WhenAll(a.TryClaimAsync(name, fresh: true, default), b.TryClaimAsync(name, fresh: false, default));

        Assert.Single(results, r => r.Outcome == ClaimOutcome.Claimed);
        Assert.Single(results, r => r.Outcome == ClaimOutcome.Busy);
        var claim = results.Single(r => r.Claim is not null).Claim!;
        Assert.Equal(1, claim.Attempt);
        await claim.StopRenewingAsync();
        await claim.Receipts.CompleteAsync(claim);

        // Complete: an empty receipt, and nobody runs it again.
        Assert.Empty((await _store.DownloadAsync(BlobReceipts.Container, name))!.Data);
        Assert.Equal(ClaimOutcome.Done, (await b.TryClaimAsync(name, fresh: false, default)).Outcome);
        Assert.Equal(ClaimOutcome.Done, (await a.TryClaimAsync(name, fresh: true, default)).Outcome);
    }

    [Fact]
    public async Task A_failed_attempt_frees_the_blob_for_a_retry_and_the_last_allowed_failure_marks_it_poison()
    {
        var hostId = NewHostId();
        var receipts = Receipts(hostId, maxAttempts: 3);
        var name = NameIn(receipts);
        for (var attempt = 1; attempt <= 3; attempt++)
        {
            // Another instance each time: the count lives in the receipt, not in the instance.
            var result = await Receipts(hostId, maxAttempts: 3).TryClaimAsync(name, fresh: attempt == 1, default);
            Assert.Equal(ClaimOutcome.Claimed, result.Outcome);
            var claim = result.Claim!;
            Assert.Equal(attempt, claim.Attempt);
            await claim.StopRenewingAsync();
            Assert.Equal(attempt == 3, await receipts.FailAsync(claim));
        }

        var poison = await receipts.ReadAsync(name, default);
        Assert.Equal(new Receipt(ReceiptState.Poison, 3, poison!.Value.ETag), poison);
        Assert.Equal(ClaimOutcome.Done, (await receipts.TryClaimAsync(name, fresh: false, default)).Outcome);
    }

    [Fact]
    public async Task Attempts_whose_instances_died_count_and_the_claim_after_the_last_marks_the_receipt_poison_without_running()
    {
        var hostId = NewHostId();
        var name = NameIn(Receipts(hostId));
        for (var attempt = 1; attempt <= 2; attempt++)
        {
            var claim = (await Receipts(hostId, maxAttempts: 2).TryClaimAsync(name, fresh: false, default)).Claim!;
            Assert.Equal(attempt, claim.Attempt);
            await claim.StopRenewingAsync();
            // The instance "dies": it never completes nor fails; its lease is gone (released here instead of waiting 15 s to expire).
            await claim.Receipts.AbandonAsync(claim);
        }

        var result = await Receipts(hostId, maxAttempts: 2).TryClaimAsync(name, fresh: false, default);
        Assert.Equal(ClaimOutcome.Poisoned, result.Outcome);
        Assert.Equal(2, result.Attempts);
        Assert.Equal(ReceiptState.Poison, (await Receipts(hostId).ReadAsync(name, default))!.Value.State);
    }

    [Fact]
    public async Task A_receipt_completed_before_leases_existed_an_empty_blob_still_counts_as_complete()
    {
        var hostId = NewHostId();
        var receipts = Receipts(hostId);
        var name = NameIn(receipts);
        await _store.CreateContainerIfNotExistsAsync(BlobReceipts.Container);
        await _store.UploadAsync(BlobReceipts.Container, name, ReadOnlyMemory<byte>.Empty);
        Assert.Equal(ClaimOutcome.Done, (await receipts.TryClaimAsync(name, fresh: true, default)).Outcome);
        Assert.Equal(ClaimOutcome.Done, (await receipts.TryClaimAsync(name, fresh: false, default)).Outcome);
    }

    [Fact]
    public async Task An_unreadable_receipt_is_logged_by_name_and_treated_as_pending()
    {
        var hostId = NewHostId();
        var receipts = Receipts(hostId);
        var name = NameIn(receipts);
        await _store.CreateContainerIfNotExistsAsync(BlobReceipts.Container);
        await _store.UploadAsync(BlobReceipts.Container, name, Encoding.UTF8.GetBytes("{not json"));

        var result = await receipts.TryClaimAsync(name, fresh: false, default);
        Assert.Equal(ClaimOutcome.Claimed, result.Outcome);
        Assert.Equal(1, result.Claim!.Attempt);
        await result.Claim.StopRenewingAsync();
        await receipts.CompleteAsync(result.Claim);
        Assert.Contains($"Receipt {name} holds unreadable content", _logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_claim_whose_lease_was_taken_by_another_holder_cannot_mark_the_receipt_complete()
    {
        var hostId = NewHostId();
        var receipts = Receipts(hostId);
        var name = NameIn(receipts);
        var claim = (await receipts.TryClaimAsync(name, fresh: true, default)).Claim!;
        await claim.StopRenewingAsync();
        await receipts.AbandonAsync(claim);
        var other = (await Receipts(hostId).TryClaimAsync(name, fresh: false, default)).Claim!;
        Assert.Equal(2, other.Attempt);

        await Assert.ThrowsAsync<BlobConditionFailedException>(() => receipts.CompleteAsync(claim));
        Assert.Equal(new Receipt(ReceiptState.Pending, 2, ""), (await receipts.ReadAsync(name, default))!.Value with { ETag = "" });
        await other.StopRenewingAsync();
        await other.Receipts.CompleteAsync(other);
    }
}
