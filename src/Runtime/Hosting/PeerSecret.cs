using System.Net;
using System.Net.NetworkInformation;
using System.Net.Sockets;
using System.Security.Cryptography;
using FaaST.Storage;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// Where an app's peer secret comes from, and where its peer endpoint is advertised. The secret must
/// never be computable from public data: the emulator's account key is printed in every Azure
/// document, so a secret derived from it would let anyone who reaches the peer port read and write
/// the app's blobs.
/// </summary>
internal static class PeerSecret
{
    public const string Setting = "FAAST_PEER_SECRET";

    /// <summary>The file a loopback-only app keeps its generated secret in (0600).</summary>
    public static string LocalSecretFile(FunctionApp app) => Path.Combine(app.Directory, ".faast", "peer-secret");

    /// <summary>
    /// Refuses, before anything binds, a peer endpoint reachable beyond loopback whose secret would come
    /// from development storage: Azurite the runtime starts listens on loopback only, so instances on
    /// other machines could not share it anyway, and its key (or the emulator's public one) must not
    /// guard a port other machines reach.
    /// </summary>
    public static void CheckExposure(FunctionApp app, bool developmentStorage, string listenAddress, string peerListenAddress)
    {
        if (app.Settings[Setting] is { Length: > 0 } || !developmentStorage)
            return;
        var exposed = new[] { ("--listen", listenAddress), ("--peer-listen", peerListenAddress) }
            .FirstOrDefault(a => !IPAddress.IsLoopback(IPAddress.Parse(a.Item2)));
        if (exposed.Item1 is null)
            return;
        throw new AppConfigException(
            $"{exposed.Item1} {exposed.Item2} would expose the peer endpoint beyond loopback, but the app uses development storage " +
            $"(the Azurite the runtime starts, or the emulator's public key) and has no {Setting}: set {Setting} in " +
            $"{Path.Combine(app.Directory, "local.settings.json")} (Values) or the environment to a long random secret shared by the app's instances, " +
            "use a real storage account, listen on 127.0.0.1, or start with --no-peers");
    }

    /// <summary>
    /// The app's peer secret: <c>FAAST_PEER_SECRET</c>; else, for storage with a private credential
    /// (an account key other than the emulator's, a SAS), a key derived from it, which every instance
    /// sharing the storage holds; else (the emulator's public key, on loopback) a random secret kept in
    /// APP/.faast/peer-secret, which the app's instances on this machine share.
    /// </summary>
    public static byte[] Resolve(FunctionApp app, string? connectionString)
    {
        if (app.Settings[Setting] is { Length: > 0 } secret)
            return System.Text.Encoding.UTF8.GetBytes(secret);
        // An identity-based connection (a managed identity) has no key or SAS: nothing to derive a secret from.
        if (connectionString is null && StorageAccounts.IsIdentityBased(app.Settings, "AzureWebJobsStorage"))
            throw new AppConfigException($"the cooperative cache needs a shared secret: set {Setting} in the app settings " +
                "(AzureWebJobsStorage is an identity-based connection, which has no key or SAS to derive one from), or start with --no-peers");
        var parsed = connectionString is null ? null : StorageConnectionString.Parse(connectionString);
        if (parsed is { UsesPublicDevelopmentKey: false } && parsed.DeriveKey("faast-peer-v2") is { } derived)
            return derived;
        if (parsed is null || parsed.UsesPublicDevelopmentKey)
        {
            var text = PrivateFiles.ReadOrCreate(LocalSecretFile(app), () => Convert.ToBase64String(RandomNumberGenerator.GetBytes(32)));
            return System.Text.Encoding.UTF8.GetBytes(text);
        }
        throw new AppConfigException($"the cooperative cache needs a shared secret: set {Setting} in the app settings " +
            "(AzureWebJobsStorage has no key or SAS to derive one from), or start with --no-peers");
    }

    /// <summary>
    /// The address other instances dial: the listen address itself, except for a wildcard (0.0.0.0, ::),
    /// which no one can dial: then the first address of an interface that is up and not loopback (IPv4
    /// first), else loopback.
    /// </summary>
    public static IPAddress Advertised(IPAddress listen, IEnumerable<(IPAddress Address, bool Up)>? interfaces = null)
    {
        if (!listen.Equals(IPAddress.Any) && !listen.Equals(IPAddress.IPv6Any))
            return listen;
        var candidates = (interfaces ?? Interfaces())
            .Where(a => a.Up && !IPAddress.IsLoopback(a.Address) && !a.Address.IsIPv6LinkLocal && !a.Address.Equals(IPAddress.Any) && !a.Address.Equals(IPAddress.IPv6Any))
            .Select(a => a.Address)
            .Where(a => a.AddressFamily == AddressFamily.InterNetwork || listen.Equals(IPAddress.IPv6Any))
            .OrderBy(a => a.AddressFamily == AddressFamily.InterNetwork ? 0 : 1)
            .ToList();
        return candidates.FirstOrDefault() ?? (listen.Equals(IPAddress.IPv6Any) ? IPAddress.IPv6Loopback : IPAddress.Loopback);
    }

    /// <summary>http://ADDRESS:PORT/ with IPv6 in brackets.</summary>
    public static Uri PeerUri(IPAddress address, int port) =>
        new(address.AddressFamily == AddressFamily.InterNetworkV6 ? $"http://[{address}]:{port}/" : $"http://{address}:{port}/");

    private static IEnumerable<(IPAddress, bool)> Interfaces() =>
        NetworkInterface.GetAllNetworkInterfaces().SelectMany(i => i.GetIPProperties().UnicastAddresses
            .Select(u => (u.Address, i.OperationalStatus == OperationalStatus.Up)));
}
