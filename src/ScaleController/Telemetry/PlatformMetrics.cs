using System.Diagnostics.Metrics;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Telemetry;

/// <summary>
/// The platform's own instruments, meter "FaaST.Platform": the figures /admin/platform shows, for Prometheus and OTLP.
/// Instances by state, desired instances, the last round's votes by policy, decisions by kind and deciding dimension,
/// (changes only; a hold is the votes' gauge), the frontend's in-flight and queued invocations, cold starts, instance starts and deploys by outcome. (The per-request
/// histograms are <see cref="FrontendMetrics"/>.)
/// </summary>
/// <remarks>
/// What the apps already hold (instances, votes, decisions, the frontend's figures of the controller's last round) is
/// observed when a reader collects, never on the request path. Decisions are counted from each app's decision history
/// (<see cref="ScaleLoopSnapshot.Decisions"/>, the last 32): at most one decision a round (≥ 1 s), so a scrape every
/// 15 s misses none. The meter comes from the platform's <see cref="IMeterFactory"/>: a test process with several
/// platforms keeps each one's instruments apart.
/// </remarks>
internal sealed class PlatformMetrics
{
    public const string Name = "FaaST.Platform";

    private readonly Func<IEnumerable<AppHost>> _apps;
    private readonly Counter<long> _coldStarts;
    private readonly Counter<long> _instanceStarts;
    private readonly Counter<long> _deploys;
    private readonly Counter<long> _reloads;
    private readonly Lock _decisionsLock = new();
    private readonly Dictionary<(string App, string Kind, string Dimension), long> _decisions = [];
    private readonly Dictionary<string, DateTimeOffset> _decisionsSeen = new(StringComparer.Ordinal);

    public PlatformMetrics(IMeterFactory meters, Func<IEnumerable<AppHost>> apps)
    {
        _apps = apps;
        var meter = meters.Create(new MeterOptions(Name) { Version = "1.0" });
        meter.CreateObservableGauge("faast.platform.instances", ObserveInstances, "{instance}",
            "Instances of each app by state (starting, ready, draining)");
        meter.CreateObservableGauge("faast.platform.instances.desired", () => _apps().Select(a => new Measurement<long>(a.Desired, Tag("app", a.App))), "{instance}",
            "The instance count the controller works towards, by app (0: unloaded)");
        meter.CreateObservableGauge("faast.platform.votes", ObserveVotes, "{vote}",
            "The controller's last round: instances voting out, keep or in, by app and policy (compute, cache-size, bandwidth; none: no answer)");
        meter.CreateObservableCounter("faast.platform.decisions", ObserveDecisions, "{decision}",
            "The controller's decisions that changed the instance count, by app, kind (out, in, unload) and the dimension that decided (compute, cache-size, bandwidth, frontend-queue, keep-alive, bounds, unrequested, all-in, other, none)");
        meter.CreateObservableGauge("faast.platform.frontend.in_flight", () => _apps().Select(a => new Measurement<long>(a.LastStats.InFlight, Tag("app", a.App))), "{invocation}",
            "Invocations the frontend was forwarding at the controller's last round, by app");
        meter.CreateObservableGauge("faast.platform.queue.length", () => _apps().Select(a => new Measurement<long>(a.LastStats.Queued, Tag("app", a.App))), "{invocation}",
            "Invocations waiting in the frontend's queue for a ready instance at the controller's last round, by app");
        _coldStarts = meter.CreateCounter<long>("faast.platform.cold_starts", "{start}", "Requests that found an unloaded app and loaded it again, by app");
        _reloads = meter.CreateCounter<long>("faast.platform.prewarm.reloads", "{load}",
            "Loads ahead of a predicted invocation (the hybrid histogram policy, Faa$T §3.3), by app");
        meter.CreateObservableCounter("faast.platform.idle_times", () => _apps().Select(a => new Measurement<long>(a.LoadSchedule.Histogram.Total, Tag("app", a.App))), "{idle}",
            "Idle times the reload policy has learnt, by app (kept across restarts)");
        meter.CreateObservableGauge("faast.platform.prewarm.next_reload", ObserveNextReloads, "s",
            "When each unloaded app with a scheduled reload is loaded again ahead of its predicted invocation, as Unix time");
        meter.CreateObservableGauge("faast.platform.prewarm.window", ObserveWindows, "s",
            "The reload policy's windows by app: prewarm (from the end of an invocation to the predicted next one) and keep-alive (after it)");
        _instanceStarts = meter.CreateCounter<long>("faast.platform.instance.starts", "{instance}", "Instance starts by app and outcome (ready, failed)");
        _deploys = meter.CreateCounter<long>("faast.platform.deploys", "{deploy}",
            "Deploys by app and outcome (deployed; refused: the package or a limit; failed: no instance of it started, or storage)");
    }

    public void ColdStart(string app) => _coldStarts.Add(1, Tag("app", app));

    public void Reload(string app) => _reloads.Add(1, Tag("app", app));

    public void InstanceStart(string app, bool ready) => _instanceStarts.Add(1, Tag("app", app), Tag("outcome", ready ? "ready" : "failed"));

    public void Deploy(string app, string outcome) => _deploys.Add(1, Tag("app", app), Tag("outcome", outcome));

    private IEnumerable<Measurement<double>> ObserveNextReloads()
    {
        foreach (var app in _apps())
            if (app.NextReload is { } at)
                yield return new Measurement<double>(at.ToUnixTimeMilliseconds() / 1000.0, Tag("app", app.App));
    }

    private IEnumerable<Measurement<double>> ObserveWindows()
    {
        foreach (var app in _apps())
        {
            var windows = app.LoadSchedule.Windows;
            var mode = Tag("mode", windows.Mode.ToString());
            yield return new Measurement<double>(windows.PrewarmWindow.TotalSeconds, Tag("app", app.App), Tag("window", "prewarm"), mode);
            yield return new Measurement<double>(windows.KeepAlive.TotalSeconds, Tag("app", app.App), Tag("window", "keep_alive"), mode);
        }
    }

    private IEnumerable<Measurement<long>> ObserveInstances()
    {
        foreach (var app in _apps())
        {
            var instances = app.Instances;
            foreach (var state in States)
                yield return new Measurement<long>(instances.Count(i => i.State == state), Tag("app", app.App), Tag("state", StateName(state)));
        }
    }

    private IEnumerable<Measurement<long>> ObserveVotes()
    {
        foreach (var app in _apps())
        {
            var counts = new Dictionary<(string Policy, string Direction), long>();
            foreach (var vote in app.Loop.Snapshot().LastVotes)
            {
                if (!vote.Answered)
                    Count(counts, ("none", "keep"));
                foreach (var p in vote.Votes)
                    Count(counts, (p.Policy, p.Delta > 0 ? "out" : p.Delta < 0 ? "in" : "keep"));
            }
            foreach (var ((policy, direction), n) in counts)
                yield return new Measurement<long>(n, Tag("app", app.App), Tag("policy", policy), Tag("direction", direction));
        }
    }

    private IEnumerable<Measurement<long>> ObserveDecisions()
    {
        lock (_decisionsLock)
        {
            foreach (var app in _apps())
            {
                var seen = _decisionsSeen.GetValueOrDefault(app.App);
                foreach (var d in app.Loop.Snapshot().Decisions)
                {
                    if (d.At <= seen)
                        continue;
                    var key = (app.App, d.Kind.ToString().ToLowerInvariant(), d.Dimension);
                    _decisions[key] = _decisions.GetValueOrDefault(key) + 1;
                    seen = d.At;
                }
                _decisionsSeen[app.App] = seen;
            }
            return _decisions.Select(d => new Measurement<long>(d.Value, Tag("app", d.Key.App), Tag("kind", d.Key.Kind), Tag("dimension", d.Key.Dimension))).ToArray();
        }
    }

    private static readonly InstanceState[] States = Enum.GetValues<InstanceState>();

    private static string StateName(InstanceState state) => state switch
    {
        InstanceState.Starting => "starting",
        InstanceState.Ready => "ready",
        _ => "draining",
    };

    private static void Count(Dictionary<(string, string), long> counts, (string, string) key) => counts[key] = counts.GetValueOrDefault(key) + 1;

    private static KeyValuePair<string, object?> Tag(string name, object? value) => new(name, value);
}
