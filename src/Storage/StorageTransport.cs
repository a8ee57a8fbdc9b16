using System.Collections.Concurrent;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using Azure.Core;
using Azure.Core.Pipeline;
using Microsoft.Extensions.Logging;

namespace FaaST.Storage;

/// <summary>
/// The HTTP transport every <see cref="BlobStore"/> and managed-identity credential of the process shares:
/// one <see cref="SocketsHttpHandler"/> per distinct set of transport settings (normally exactly one), so
/// connections are pooled across stores and a store costs no sockets of its own.
/// </summary>
internal static class StorageTransport
{
    private static readonly ConcurrentDictionary<Key, HttpClientTransport> Transports = new();

    /// <summary>The shared transport for these options' connection settings.</summary>
    public static HttpClientTransport For(BlobStoreOptions options)
    {
        var key = new Key(options.MaxConnectionsPerServer, options.PooledConnectionLifetime, ConnectTimeout(options),
            options.TrustedCertificate?.Thumbprint);
        // Transports live as long as the process: stores come and go (tests make hundreds), the pool stays.
        return Transports.GetOrAdd(key, static (k, o) => new HttpClientTransport(CreateHandler(k, o.TrustedCertificate)), options);
    }

    /// <summary>
    /// The SDK options every client of the project gets (blobs, queues): logging, distributed tracing and the
    /// User-Agent telemetry off — they cost per request and are not used here; with them off, a HEAD through the SDK
    /// costs about what a raw request does — and retries as <see cref="BlobStoreOptions"/> promise, each failed try
    /// logged when a logger is given.
    /// </summary>
    public static T Configure<T>(T client, BlobStoreOptions options, ILogger? logger) where T : ClientOptions
    {
        client.Diagnostics.IsLoggingEnabled = false;
        client.Diagnostics.IsDistributedTracingEnabled = false;
        client.Diagnostics.IsTelemetryEnabled = false;
        client.Diagnostics.IsLoggingContentEnabled = false;
        client.Retry.Mode = RetryMode.Exponential;
        client.Retry.MaxRetries = options.MaxRetries;
        client.Retry.Delay = options.RetryBaseDelay;
        client.Retry.MaxDelay = options.RetryMaxDelay;
        client.Retry.NetworkTimeout = options.TryTimeout;
        if (logger is not null)
            client.AddPolicy(new RetryLoggingPolicy(logger, options.MaxRetries), HttpPipelinePosition.PerRetry);
        return client;
    }

    /// <summary>A handler configured as the shared transport's would be for <paramref name="options"/> (for tests and benchmarks).</summary>
    internal static SocketsHttpHandler CreateHandler(BlobStoreOptions options) =>
        CreateHandler(new Key(options.MaxConnectionsPerServer, options.PooledConnectionLifetime, ConnectTimeout(options),
            options.TrustedCertificate?.Thumbprint), options.TrustedCertificate);

    /// <summary>A connect that does not complete in this time fails the try (the try itself may be longer).</summary>
    private static TimeSpan ConnectTimeout(BlobStoreOptions options) =>
        options.TryTimeout < TimeSpan.FromSeconds(10) ? options.TryTimeout : TimeSpan.FromSeconds(10);

    private static SocketsHttpHandler CreateHandler(Key key, X509Certificate2? trusted)
    {
        var handler = new SocketsHttpHandler
        {
            PooledConnectionLifetime = key.PooledConnectionLifetime,
            MaxConnectionsPerServer = key.MaxConnectionsPerServer,
            AutomaticDecompression = DecompressionMethods.None,
            UseCookies = false,
            AllowAutoRedirect = false,
            ConnectTimeout = key.ConnectTimeout,
            Expect100ContinueTimeout = TimeSpan.Zero,
            // No proxy discovery from the environment: it costs a lookup per connection and must never
            // capture traffic to a local emulator or the managed-identity endpoint.
            UseProxy = false,
            ConnectCallback = ConnectRefusingMetadataAsync,
        };
        if (trusted is not null)
        {
            handler.SslOptions.RemoteCertificateValidationCallback = (_, certificate, chain, errors) =>
                errors == SslPolicyErrors.None || IsTrustedExtra(trusted, certificate, chain, errors);
        }

        return handler;
    }

    /// <summary>
    /// The extra certificate is trusted as a root (or as the very certificate the server shows), for a test's
    /// self-signed HTTPS Azurite; a name mismatch is never forgiven.
    /// </summary>
    private static bool IsTrustedExtra(X509Certificate2 trusted, X509Certificate? certificate, X509Chain? chain, SslPolicyErrors errors)
    {
        if ((errors & SslPolicyErrors.RemoteCertificateNameMismatch) != 0 || certificate is null)
        {
            return false;
        }

        using var leaf = new X509Certificate2(certificate);
        if (leaf.RawDataMemory.Span.SequenceEqual(trusted.RawDataMemory.Span))
        {
            return true;
        }

        using var custom = new X509Chain();
        custom.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
        custom.ChainPolicy.CustomTrustStore.Add(trusted);
        custom.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
        if (chain is not null)
        {
            custom.ChainPolicy.ExtraStore.AddRange(chain.ChainPolicy.ExtraStore);
        }

        return custom.Build(leaf);
    }

    /// <summary>
    /// Refuses the instance metadata service (169.254.169.254) and every other link-local address before a
    /// socket is opened: whatever a credential library decides to probe, this host never reaches it.
    /// </summary>
    internal static async ValueTask<Stream> ConnectRefusingMetadataAsync(SocketsHttpConnectionContext context, CancellationToken ct)
    {
        var endpoint = context.DnsEndPoint;
        var addresses = IPAddress.TryParse(endpoint.Host, out var literal)
            ? [literal]
            : await Dns.GetHostAddressesAsync(endpoint.Host, ct).ConfigureAwait(false);
        if (addresses.Length == 0)
        {
            throw new HttpRequestException($"{endpoint.Host} has no address.");
        }

        foreach (var address in addresses)
        {
            if (IsLinkLocal(address))
            {
                throw new HttpRequestException(
                    $"Refused to connect to {endpoint.Host} ({address}): link-local addresses such as the instance metadata " +
                    "service are never contacted by FaaST (managed identity goes through IDENTITY_ENDPOINT only).");
            }
        }

        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        try
        {
            await socket.ConnectAsync(addresses, endpoint.Port, ct).ConfigureAwait(false);
            return new NetworkStream(socket, ownsSocket: true);
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    internal static bool IsLinkLocal(IPAddress address)
    {
        if (address.IsIPv4MappedToIPv6)
        {
            address = address.MapToIPv4();
        }

        if (address.AddressFamily == AddressFamily.InterNetwork)
        {
            Span<byte> bytes = stackalloc byte[4];
            address.TryWriteBytes(bytes, out _);
            return bytes[0] == 169 && bytes[1] == 254;
        }

        return address.IsIPv6LinkLocal;
    }

    private readonly record struct Key(int MaxConnectionsPerServer, TimeSpan PooledConnectionLifetime, TimeSpan ConnectTimeout,
        string? TrustedThumbprint);
}
