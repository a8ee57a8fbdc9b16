using System.Collections.Immutable;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Keda;
using FaaST.ScaleController.Providers;
using FaaST.ScaleController.Telemetry;


namespace FaaST.ScaleController.Platform;

/// <summary>The platform's HTTP surface: the routes, the frontend's forwarding of invocations, and the admin API (each
/// endpoint checks its caller first through <see cref="AdminGuard"/>).</summary>
internal sealed partial class PlatformHost
{
    private void Map()
    {
        // gRPC needs HTTP/2, which only the control port speaks in cleartext: these answer there (the frontend's
        // port is HTTP/1.1 for them).
        _web.MapGrpcService<ScaleControlService>();
        _web.MapKedaExternalScaler();
        // The admin API: every endpoint checks its caller first (AdminGuard: Host, Origin, the Bearer key).
        _web.MapGet("/admin/platform", StatusEndpointAsync);
        _web.MapPut("/admin/platform/apps/{name}", DeployEndpointAsync);
        _web.MapPost("/admin/platform/apps/{name}", DeployEndpointAsync);
        _web.MapGet("/admin/platform/apps/{name}/deploy-key", DeployKeyEndpointAsync);
        // The platform's own metrics and its instances as scrape targets: the same caller check as the status they mirror.
        _web.MapPrometheusScrapingEndpoint(PlatformTelemetry.MetricsPath, meterProvider: null, configureBranchedPipeline: branch =>
            branch.Use(next => async context =>
            {
                if (!await RefusedAsync(context, deployApp: null))
                    await next(context);
            }), optionsName: null).DisableHttpMetrics();
        _web.MapGet(PlatformTelemetry.TargetsPath, TargetsEndpointAsync);
        // Everything else is an invocation (or an instance's admin API) for one of the apps.
        _web.Use(async (context, next) =>
        {
            if (context.GetEndpoint() is not null)
            {
                await next(context);
                return;
            }
            await ForwardAsync(context);
        });
    }

    private async Task ForwardAsync(HttpContext context)
    {
        if (context.Connection.LocalPort == ControlAddress.Port)
        {
            context.Response.StatusCode = StatusCodes.Status404NotFound;
            return;
        }
        if (!_router.TryRoute(context.Request, out var name, out var pathAndQuery, out var reason))
        {
            // Names no app, instance or port: which apps a platform serves is for its operator (./faast status).
            await WriteErrorAsync(context, StatusCodes.Status404NotFound,
                $"{reason}; an app is served under /APP/... or at APP.localhost (./faast status lists the apps; ./faast deploy APPDIR adds one)");
            return;
        }
        if (!_apps.TryGetValue(name, out var app))
        {
            if (_unavailable.TryGetValue(name, out var unavailable))
            {
                // No Retry-After: it does not come back by waiting, only by a deploy once its storage is usable.
                await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable,
                    $"the app \"{name}\" is unavailable: {unavailable.Reason}; it is tried again at the app's next deploy");
                return;
            }
            // `./faast start APP` routes every path to its app before the app's first instance is up.
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, $"the app \"{name}\" is not loaded yet");
            return;
        }
        if (_tracing)
            PlatformTelemetry.Propagate(context, name);
        await app.Frontend.ForwardAsync(context, pathAndQuery);
    }

    private static Task WriteErrorAsync(HttpContext context, int status, string error, string? file = null, string? key = null)
    {
        context.Response.StatusCode = status;
        return context.Response.WriteAsJsonAsync(new PlatformError(error, file, key), PlatformJsonContext.Default.PlatformError);
    }

    /// <summary>Refuses the request (401/403, answered and logged) unless <see cref="AdminGuard"/> lets it through.</summary>
    private async Task<bool> RefusedAsync(HttpContext context, string? deployApp)
    {
        if (_guard.Check(context, deployApp) is not { } refusal)
            return false;
        if (refusal.Status == StatusCodes.Status401Unauthorized)
            context.Response.Headers.WWWAuthenticate = AdminGuard.Challenge;
        await WriteErrorAsync(context, refusal.Status, refusal.Error);
        return true;
    }

    private async Task StatusEndpointAsync(HttpContext context)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        await context.Response.WriteAsJsonAsync(Status(context), PlatformJsonContext.Default.PlatformStatus);
    }

    /// <summary>GET /admin/platform/targets (admin key): every instance as a Prometheus target (http_sd; the file_sd file's content).</summary>
    private async Task TargetsEndpointAsync(HttpContext context)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        context.Response.ContentType = "application/json";
        await context.Response.Body.WriteAsync(_targets.Json(), context.RequestAborted);
    }

    /// <summary>GET /admin/platform/apps/{name}/deploy-key (admin key only): the key an app's owner deploys that app with.</summary>
    private async Task DeployKeyEndpointAsync(HttpContext context, string name)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        try
        {
            AppNames.Validate(name);
        }
        catch (ArgumentException e)
        {
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message);
            return;
        }
        context.Response.Headers.CacheControl = "no-store";
        await context.Response.WriteAsJsonAsync(new DeployKeyResult(name, _context.Keys.DeployKeyOf(name)), PlatformJsonContext.Default.DeployKeyResult);
    }

    private async Task DeployEndpointAsync(HttpContext context, string name)
    {
        if (await RefusedAsync(context, name))
            return;
        var limit = _deploy.Options.MaxPackageBytes;
        if (context.Request.ContentLength > limit)
        {
            // Refused from the header alone: not one byte of the body is read.
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, new PackageTooLargeException(name, limit).Message);
            return;
        }
        // Kestrel stops reading there too (a chunked body has no Content-Length), and does not drain the rest.
        if (context.Features.Get<Microsoft.AspNetCore.Http.Features.IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } bodySize)
            bodySize.MaxRequestBodySize = limit;
        try
        {
            var deployment = await DeployPackageAsync(name, context.Request.Body, context.RequestAborted);
            context.Response.StatusCode = deployment.Version == 1 ? StatusCodes.Status201Created : StatusCodes.Status200OK;
            await context.Response.WriteAsJsonAsync(new DeployResult(deployment.App, deployment.Version, deployment.Sha256, deployment.Size, "running"),
                PlatformJsonContext.Default.DeployResult);
        }
        catch (PackageTooLargeException e)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, e.Message);
        }
        catch (Microsoft.AspNetCore.Http.BadHttpRequestException e) when (e.StatusCode == StatusCodes.Status413PayloadTooLarge)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, new PackageTooLargeException(name, limit).Message);
        }
        catch (DeployInProgressException e)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status409Conflict, e.Message);
        }
        catch (DeployCapacityException e)
        {
            context.Response.Headers.RetryAfter = ((int)Math.Ceiling(e.RetryAfter.TotalSeconds)).ToString(System.Globalization.CultureInfo.InvariantCulture);
            await DeployLimitedAsync(context, name, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (DeployValidationException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message, e.File, e.Key);
        }
        catch (Exception e) when (e is DeployRefusedException or ArgumentException)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message);
        }
        catch (DeployConflictException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status409Conflict, e.Message);
        }
        catch (PlatformBudgetException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            context.Response.Headers.RetryAfter = "60";
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (Flash.FlashAdmissionException e)
        {
            // The flash tier cannot carry the app's SLO beside the apps already admitted: the deployer's to change.
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status422UnprocessableEntity, e.Message);
        }
        catch (Flash.FlashServerException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            context.Response.Headers.RetryAfter = "10";
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (InstanceStartException e)
        {
            // The package was fine, but no instance of it started: the deployer's to fix, nothing changed (defect 7).
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status422UnprocessableEntity, e.Message);
        }
        catch (AppStorageException e)
        {
            // The package was fine, but the app's own Azurite did not start: the platform's side (its state folder, its
            // Azurite), not the deployer's package; nothing of this version was kept, and an app left unavailable stays so.
            Log.DeployRefused(_logger, name, e.Message);
            ImmutableInterlocked.Update(ref _unavailable, u => u.TryGetValue(name, out var was) ? u.SetItem(name, was with { Reason = e.Message }) : u);
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (Exception e) when (e is OperationCanceledException or IOException && context.RequestAborted.IsCancellationRequested)
        {
            // The deployer went away mid-upload: nothing was published, nobody to answer (the admission is released).
        }
    }

    /// <summary>A deploy refused by a limit (size, one per app, the platform's capacity): answered, logged at most once a second.</summary>
    private Task DeployLimitedAsync(HttpContext context, string app, int status, string error)
    {
        if (_deployLimits.TryPass(out var heldBack))
            Log.DeployLimited(_logger, app, status, heldBack == 0 ? error : $"{error} ({heldBack} more held back since the last line)");
        return WriteErrorAsync(context, status, error);
    }

    private PlatformStatus Status(HttpContext context) => new(
        Address,
        ControlAddress,
        Options.SingleApp is { } single ? $"single app: every path goes to {single}" : "path /APP/... (prefix stripped) or host APP.localhost",
        _apps.Values.OrderBy(a => a.App, StringComparer.Ordinal).Select(a =>
        {
            var loop = a.Loop.Snapshot();
            var outstanding = a.Frontend.Instances.ToDictionary(i => i.Id, i => i.Outstanding);
            var stats = a.LastStats;
            return new AppStatus(
                a.App, a.Deployment.Version, a.Deployment.Sha256, a.Deployment.Deployed, a.Unloaded, a.Desired, a.LoadSeconds,
                a.Instances.Select(i => new InstanceStatusView(i.Handle.Id, $"v{i.Handle.Version}", i.State.ToString().ToLowerInvariant(),
                    i.Handle.BaseAddress, i.Handle.PeerAddress, i.Handle.ProcessId, outstanding.GetValueOrDefault(i.Handle.Id), i.Handle.Started)).ToArray(),
                new FrontendView(stats.InFlight, stats.Queued, stats.Completed, stats.Failed,
                    a.Frontend.LastRequest.UtcTicks == 0 ? null : a.Frontend.LastRequest),
                loop.LastVotes.SelectMany(v => v.Answered
                    ? v.Votes.Select(p => new VoteView(v.InstanceId, p.Policy, p.Delta, p.Reason, v.At))
                    : [new VoteView(v.InstanceId, "none", 0, v.Error ?? "no answer", v.At)]).ToArray(),
                loop.Decisions.Select(d => new DecisionView(d.At, d.Kind.ToString().ToLowerInvariant(), d.Target - d.Delta, d.Target, d.Reason)).ToArray(),
                new ScaleView(a.Policy.MinInstances, a.Policy.MaxInstances, a.Policy.Band.Low, a.Policy.Band.High,
                    a.Policy.Interval.ToString("c"), a.Policy.KeepAlive.ToString("c")),
                LoadViewOf(a));
        }).ToArray(),
        _unavailable.IsEmpty ? null : _unavailable.Values.OrderBy(u => u.App, StringComparer.Ordinal)
            .Select(u => new UnavailableAppView(u.App, u.Version, u.Reason)).ToArray(),
        _context.Flash.Address is { } flash ? new FlashView(flash, _context.Flash.ServerPid, _context.Flash.Apps) : null);

    private static LoadView LoadViewOf(AppHost a)
    {
        var schedule = a.LoadSchedule;
        var histogram = schedule.Histogram;
        var windows = schedule.Windows;
        var counts = histogram.Counts();
        var bins = new Dictionary<string, long>(StringComparer.Ordinal);
        for (var i = 0; i < counts.Length; i++)
            if (counts[i] != 0)
                bins[(histogram.Options.BinWidth * i).ToString("c", System.Globalization.CultureInfo.InvariantCulture)] = counts[i];
        var lastRequest = a.Frontend.LastRequest;
        return new LoadView(schedule.Options.Enabled, windows.Mode.ToString(), windows.Reason, windows.PrewarmWindow.TotalSeconds,
            windows.KeepAlive.TotalSeconds, histogram.Total, histogram.OutOfBounds, a.UnloadAt?.At, a.NextReload,
            windows.PredictedAfter(lastRequest), schedule.Reloads, histogram.Options.BinWidth.ToString("c", System.Globalization.CultureInfo.InvariantCulture), bins);
    }
}
