namespace FaaST.ScaleController.Keda;

/// <summary>
/// What the KEDA external scaler needs from the scale controller: the controller's current decision for an
/// app, and a signal when it changes. The controller implements it; <see cref="ExternalScalerService"/> only
/// translates it into KEDA's contract, so that KEDA scales a Kubernetes Deployment to exactly the count the
/// controller decided from the instances' votes (Faa$T §4) — the same decisions the local provider acts on.
/// </summary>
internal interface IScaleDecisions
{
    /// <summary>The decision for <paramref name="app"/>; false when no app of that name is deployed.</summary>
    /// <remarks>Called on every KEDA request (a few a minute per ScaledObject): cheap, no I/O, thread-safe.</remarks>
    bool TryGetApp(string app, out AppScaleState state);

    /// <summary>
    /// Raised with the app's name after its decision changed (desired count, activity or removal). Handlers must
    /// not block: the scaler only wakes its open streams from it.
    /// </summary>
    event Action<string>? Changed;
}

/// <summary>The controller's decision for one app.</summary>
/// <param name="DesiredInstances">How many instances the app should have now, cool-downs, band and
/// min/max applied; 0 when the app is unloaded (idle for its keep-alive, docs/scaling.md).</param>
/// <param name="Reason">One line on why (the deciding vote), for logs.</param>
internal readonly record struct AppScaleState(int DesiredInstances, string Reason)
{
    /// <summary>At least one instance wanted: what KEDA's IsActive asks (scale from and to zero).</summary>
    public bool Active => DesiredInstances > 0;
}
