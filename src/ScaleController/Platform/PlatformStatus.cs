using System.Text.Json.Serialization;

namespace FaaST.ScaleController.Platform;

/// <summary>What GET /admin/platform answers: what an operator looks at first. <paramref name="Unavailable"/>: deployed
/// apps that are not served, and why (null when there are none).</summary>
public sealed record PlatformStatus(Uri Address, Uri Control, string Routing, IReadOnlyList<AppStatus> Apps,
    IReadOnlyList<UnavailableAppView>? Unavailable = null, FlashView? Flash = null);

/// <summary>The flash server the platform runs (issue 22), once an app enabled it: where, its process, and the apps
/// registered with it. Tokens are never shown.</summary>
public sealed record FlashView(Uri Address, int? ProcessId, IReadOnlyList<string> Apps);

/// <summary>A deployed app the platform cannot serve (its own Azurite did not start when the platform loaded it again):
/// its requests get 503 with <paramref name="Reason"/> until its next deploy.</summary>
public sealed record UnavailableAppView(string App, int Version, string Reason);

/// <summary>One app: its version, instances, the frontend's numbers, the last votes and decisions.</summary>
public sealed record AppStatus(
    string App,
    int Version,
    string Sha256,
    DateTimeOffset Deployed,
    bool Unloaded,
    int Desired,
    double LoadSeconds,
    IReadOnlyList<InstanceStatusView> Instances,
    FrontendView Frontend,
    IReadOnlyList<VoteView> LastVotes,
    IReadOnlyList<DecisionView> Decisions,
    ScaleView Scale,
    LoadView? Load = null);

public sealed record InstanceStatusView(string Id, string Version, string State, Uri Address, Uri? Peer, int ProcessId, int Outstanding, DateTimeOffset Started);

public sealed record FrontendView(int InFlight, int Queued, long Completed, long Failed, DateTimeOffset? LastRequest);

public sealed record VoteView(string Instance, string Policy, int Delta, string Reason, DateTimeOffset At);

public sealed record DecisionView(DateTimeOffset At, string Kind, int From, int To, string Reason);

public sealed record ScaleView(int MinInstances, int MaxInstances, double BandLow, double BandHigh, string Interval, string KeepAlive);

/// <summary>
/// When the app is loaded (Faa$T §3.3, the hybrid histogram policy of ATC'20): whether prewarm is on, the policy's branch and
/// why, its windows, the idle times learnt (<paramref name="Bins"/>: each non-empty bin by its start, <paramref name="BinWidth"/>
/// wide), when the loaded app is unloaded next, when the unloaded app is loaded again ahead of the predicted invocation, and
/// the predicted invocation after the last one.
/// </summary>
public sealed record LoadView(bool Prewarm, string Mode, string Reason, double PrewarmWindowSeconds, double KeepAliveSeconds,
    long IdleTimes, long OutOfBounds, DateTimeOffset? UnloadAt, DateTimeOffset? NextReload, DateTimeOffset? PredictedInvocation,
    long Reloads, string BinWidth, IReadOnlyDictionary<string, long> Bins);

/// <summary>An error answer of the platform's admin API: one line, naming what is wrong.</summary>
public sealed record PlatformError(string Error, string? File = null, string? Key = null);

/// <summary>A deploy's answer.</summary>
public sealed record DeployResult(string App, int Version, string Sha256, long Size, string Status);

/// <summary>GET /admin/platform/apps/{name}/deploy-key: the credential that deploys this app (and no other).</summary>
public sealed record DeployKeyResult(string App, string DeployKey);

[JsonSourceGenerationOptions(PropertyNamingPolicy = JsonKnownNamingPolicy.CamelCase, WriteIndented = true,
    DefaultIgnoreCondition = JsonIgnoreCondition.WhenWritingNull)]
[JsonSerializable(typeof(PlatformStatus))]
[JsonSerializable(typeof(PlatformError))]
[JsonSerializable(typeof(DeployResult))]
[JsonSerializable(typeof(DeployKeyResult))]
public sealed partial class PlatformJsonContext : JsonSerializerContext;
