namespace FaaST.ScaleController.Deploy;

/// <summary>
/// One published version of an app, as <c>faast-deployments/{app}/app.json</c> records it: the package is
/// <see cref="Blob"/>, <see cref="Size"/> bytes with SHA-256 <see cref="Sha256"/> (lowercase hex).
/// <see cref="Source"/> says where it came from (a folder, "upload", a user's words).
/// </summary>
public sealed record Deployment(string App, int Version, string Sha256, long Size, DateTimeOffset Deployed, string Source)
{
    /// <summary>The package's blob in <see cref="DeploymentStore.Container"/>: <c>{app}/v{N}.zip</c>.</summary>
    public string Blob => DeploymentStore.PackageBlob(App, Version);
}
