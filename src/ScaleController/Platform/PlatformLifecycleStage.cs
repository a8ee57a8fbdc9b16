namespace FaaST.ScaleController.Platform;

/// <summary>
/// The numbered stages of the platform process's lifecycle, on the host's mechanism (src/Hosting
/// <see cref="FaaST.Hosting.HostLifecycle"/>, Orleans' silo lifecycle): components subscribe to a stage; stages start
/// in ascending order and stop in descending order, so what a stage needs is up before it and down after it. The gaps
/// leave room for a later component (prewarm at <c>Controller + 100</c>, after the apps are loaded).
/// </summary>
/// <remarks>
/// The issue lists the stages as storage, deployments, frontend, controller, providers, KEDA. The provider is placed
/// before the controller here: the controller's apps get their instances from it, so it must stop after every app has
/// drained its instances (a provider stopped first would kill instances with requests in flight). The frontend is two
/// stages, as the host's endpoints and admission are: Kestrel binds at <see cref="Frontend"/> (instances are given the
/// control port's address, so it must be bound before any starts) and stops taking requests at <see cref="Serving"/>,
/// first of all at stop, so that nothing new arrives while the apps drain.
/// </remarks>
public static class PlatformLifecycleStage
{
    /// <summary>The platform's meter and trace exporters: first up, so every later stage is observed; last down.</summary>
    public const int Telemetry = 1000;

    /// <summary>The platform's storage (faast-deployments) and the apps' own Azurites; the Azurites stop last.</summary>
    public const int Storage = 2000;

    /// <summary>Deploy: STATE/work emptied of what a crash left, the deployment store and the deploy service.</summary>
    public const int Deployments = 3000;

    /// <summary>Kestrel binds the frontend's port and the control port; the admin credential is published for the CLI.</summary>
    public const int Frontend = 4000;

    /// <summary>The instance provider: stopping it ends any instance process still running.</summary>
    public const int Providers = 5000;

    /// <summary>Every app deployed in storage is loaded again (its instances, taken over or started, and its scale loop);
    /// stopping it stops the loops and drains every instance.</summary>
    public const int Controller = 6000;

    /// <summary>The controller's decisions reach KEDA's open StreamIsActive calls.</summary>
    public const int Keda = 7000;

    /// <summary>
    /// The platform serves. Stopping it withdraws the admin credential and stops Kestrel taking requests (those in
    /// flight finish): the first step of a stop, the platform's draining (<see cref="FaaST.Hosting.LifecycleState.Draining"/>).
    /// </summary>
    public const int Serving = 8000;
}
