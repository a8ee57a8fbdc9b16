namespace FaaST.ScaleController.Deploy;

/// <summary>
/// A version whose package is stored (<see cref="DeploymentStore.StageAsync"/>) but which is not current yet:
/// <see cref="RecordETag"/> is app.json's ETag when it was staged (null: the app had none), which
/// <see cref="DeploymentStore.MakeCurrentAsync"/> replaces it If-Match on.
/// </summary>
public sealed record StagedDeployment(Deployment Deployment, string? RecordETag);
