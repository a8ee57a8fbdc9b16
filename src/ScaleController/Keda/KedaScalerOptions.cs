namespace FaaST.ScaleController.Keda;

/// <summary>The KEDA external scaler's limits and its client check, with their defaults (docs/scaling.md, "Kubernetes and KEDA").</summary>
public sealed record KedaScalerOptions
{
    /// <summary>
    /// Open StreamIsActive calls per app (default 16). KEDA opens one per ScaledObject trigger and operator
    /// replica; more are refused with RESOURCE_EXHAUSTED, so a client cannot hold the platform's memory and
    /// its change events with streams.
    /// </summary>
    public int MaxStreamsPerApp { get; init; } = 16;

    /// <summary>Open StreamIsActive calls in all (default 256); more are refused with RESOURCE_EXHAUSTED.</summary>
    public int MaxStreams { get; init; } = 256;

    /// <summary>
    /// True: every call must come over TLS with a client certificate the control port validated against its client
    /// CA (<c>--control-client-ca</c>; KEDA's caCert/tlsClientCert/tlsClientKey); others are UNAUTHENTICATED.
    /// The platform sets it when it is given a client CA. Default false.
    /// </summary>
    public bool RequireClientCertificate { get; init; }

    public static KedaScalerOptions Default { get; } = new();
}
