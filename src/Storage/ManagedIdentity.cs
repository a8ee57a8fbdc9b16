using Azure.Core;
using Azure.Identity;

namespace FaaST.Storage;

/// <summary>
/// The managed-identity credential of an identity-based storage connection: Azure.Identity's
/// <see cref="ManagedIdentityCredential"/>, driven by the hosting environment's token endpoint
/// (App Service / Functions / Container Apps: IDENTITY_ENDPOINT + IDENTITY_HEADER; older hosts: MSI_ENDPOINT).
/// It can never probe the instance metadata service: without such an endpoint it is not created at all
/// (never DefaultAzureCredential, which would fall back to 169.254.169.254), and its transport refuses
/// link-local addresses before a socket opens (<see cref="StorageTransport"/>).
/// </summary>
public static class ManagedIdentity
{
    /// <summary>The App Service token endpoint variable.</summary>
    public const string EndpointVariable = "IDENTITY_ENDPOINT";

    /// <summary>The App Service token endpoint's secret header variable.</summary>
    public const string HeaderVariable = "IDENTITY_HEADER";

    /// <summary>The older token endpoint variable (Cloud Shell, Azure ML).</summary>
    public const string LegacyEndpointVariable = "MSI_ENDPOINT";

    /// <summary>
    /// What is missing for a managed identity here, or null when the environment has a token endpoint.
    /// <paramref name="environment"/> reads a variable (default: the process environment, which the credential reads too).
    /// </summary>
    public static string? Problem(Func<string, string?>? environment = null)
    {
        environment ??= Environment.GetEnvironmentVariable;
        var endpoint = environment(EndpointVariable);
        if (!string.IsNullOrWhiteSpace(endpoint))
        {
            if (!Uri.TryCreate(endpoint, UriKind.Absolute, out var uri) || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps))
            {
                return $"{EndpointVariable} is not an absolute http(s) URI";
            }

            return string.IsNullOrWhiteSpace(environment(HeaderVariable))
                ? $"{EndpointVariable} is set but {HeaderVariable} (the token endpoint's secret) is not"
                : null;
        }

        if (!string.IsNullOrWhiteSpace(environment(LegacyEndpointVariable)))
        {
            return null;
        }

        return $"no managed identity token endpoint: neither {EndpointVariable} (with {HeaderVariable}) nor {LegacyEndpointVariable} " +
            "is set in the environment (the hosting platform sets them when the app has a managed identity; FaaST never falls back " +
            "to the instance metadata service)";
    }

    /// <summary>
    /// The credential for the system-assigned identity, or the user-assigned one with <paramref name="clientId"/>.
    /// Token requests are retried and time-limited as <paramref name="options"/> says (MaxRetries, delays, TryTimeout).
    /// </summary>
    /// <exception cref="InvalidOperationException">The environment has no token endpoint (see <see cref="Problem"/>).</exception>
    public static TokenCredential Create(string? clientId, BlobStoreOptions? options = null, Func<string, string?>? environment = null) =>
        Create(clientId, options, environment, transport: null);

    /// <summary>As <see cref="Create(string?, BlobStoreOptions?, Func{string, string?}?)"/>, over another transport (tests).</summary>
    internal static TokenCredential Create(string? clientId, BlobStoreOptions? options, Func<string, string?>? environment,
        Azure.Core.Pipeline.HttpPipelineTransport? transport)
    {
        if (Problem(environment) is { } problem)
        {
            throw new InvalidOperationException(problem);
        }

        var o = options?.Clone() ?? new BlobStoreOptions();
        o.Validate();
        var id = string.IsNullOrWhiteSpace(clientId)
            ? ManagedIdentityId.SystemAssigned
            : ManagedIdentityId.FromUserAssignedClientId(clientId);
        // The token endpoint gets what every storage client gets: no SDK diagnostics, the retry promise.
        var credentialOptions = StorageTransport.Configure(
            new ManagedIdentityCredentialOptions(id) { Transport = transport ?? StorageTransport.For(o) }, o, logger: null);
        return new ManagedIdentityCredential(credentialOptions);
    }
}
