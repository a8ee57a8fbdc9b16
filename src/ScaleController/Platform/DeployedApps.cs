using System.Collections.Immutable;
using System.Diagnostics.CodeAnalysis;
using FaaST.ScaleController.Control;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The apps the platform serves, by name (case-insensitive), one immutable snapshot swapped atomically: the host adds
/// and removes them as they load and unload (deploy, restart), the parts that report on every app (metrics, Prometheus
/// targets) read the current set, and instances' unrequested votes find their app's loop here.
/// </summary>
internal sealed class DeployedApps(PlatformKeys keys) : IScaleLoopRegistry
{
    private ImmutableDictionary<string, AppHost> _apps = ImmutableDictionary<string, AppHost>.Empty.WithComparers(StringComparer.OrdinalIgnoreCase);

    /// <summary>The apps now.</summary>
    public ImmutableDictionary<string, AppHost> Current => Volatile.Read(ref _apps);

    public IEnumerable<AppHost> Values => Current.Values;

    public IEnumerable<string> Keys => Current.Keys;

    public AppHost this[string app] => Current[app];

    public bool TryGetValue(string app, [MaybeNullWhen(false)] out AppHost host) => Current.TryGetValue(app, out host);

    public void Set(string app, AppHost host) => ImmutableInterlocked.Update(ref _apps, a => a.SetItem(app, host));

    public void Remove(string app) => ImmutableInterlocked.Update(ref _apps, a => a.Remove(app));

    public ScaleLoop? Find(string app) => TryGetValue(app, out var host) ? host.Loop : null;

    /// <summary>The app's own verifier; for an app not served here, one under the secret such an app would have, so that
    /// an unsigned call is refused the same way whether the app exists or not.</summary>
    public Peers.PeerAuth? RequestCredentialsOf(string app) =>
        TryGetValue(app, out var host) ? host.Loop.RequestCredentials
            : new Peers.PeerAuth(System.Text.Encoding.UTF8.GetBytes(keys.PeerSecretOf(app)), app);
}
