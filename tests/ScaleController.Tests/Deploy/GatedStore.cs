using FaaST.Storage;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>
/// A real store whose first write of one blob waits at a gate the test opens: it holds a deployer between writing its
/// package and writing app.json, so that another deployer can win the race in between, every run.
/// </summary>
internal sealed class GatedStore(IBlobStore inner, string gatedBlob) : DelegatingStore(inner)
{
    private int _passed;

    /// <summary>Completes when the gated write arrives at the gate.</summary>
    public TaskCompletionSource Arrived { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Completed by the test to let the gated write through.</summary>
    public TaskCompletionSource Open { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public override async Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        if (blob == gatedBlob && Interlocked.Exchange(ref _passed, 1) == 0)
        {
            Arrived.TrySetResult();
            await Open.Task.WaitAsync(ct);
        }

        return await base.UploadAsync(container, blob, content, contentType, ifMatch, ifNoneMatch, ct);
    }
}
