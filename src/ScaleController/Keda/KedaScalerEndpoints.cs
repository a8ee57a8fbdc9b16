namespace FaaST.ScaleController.Keda;

/// <summary>
/// Wires the KEDA external scaler into a platform's web application. KEDA dials it with gRPC over cleartext
/// HTTP/2 (prior knowledge), so it must be mapped on a Kestrel listener whose protocols are
/// <c>HttpProtocols.Http2</c> — the platform's control port, which serves ScaleControl the same way.
/// </summary>
internal static class KedaScalerEndpoints
{
    /// <summary>Registers gRPC, <paramref name="decisions"/>, the scaler's options and the scaler (one instance: it holds a
    /// log gate and the count of open streams).</summary>
    public static IServiceCollection AddKedaExternalScaler(this IServiceCollection services, IScaleDecisions decisions, KedaScalerOptions? options = null)
    {
        ArgumentNullException.ThrowIfNull(decisions);
        services.AddGrpc();
        services.AddSingleton(decisions);
        services.AddSingleton(options ?? KedaScalerOptions.Default);
        services.AddSingleton<ExternalScalerService>();
        return services;
    }

    /// <summary>Maps <c>/externalscaler.ExternalScaler/*</c>.</summary>
    public static GrpcServiceEndpointConventionBuilder MapKedaExternalScaler(this IEndpointRouteBuilder endpoints)
        => endpoints.MapGrpcService<ExternalScalerService>();
}
