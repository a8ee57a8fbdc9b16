using FaaST.Storage;
using FaaST.Hosting;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform's parts as components of its lifecycle (<see cref="PlatformLifecycleStage"/>): each stage's start and
/// stop, which PlatformHost used to order by hand. Started ascending, stopped descending (<see cref="HostLifecycle"/>);
/// a stage that fails to start stops those that started, and the failure reaches the caller unchanged (the CLI turns
/// it into one line and an exit code: 4 for a taken port, 5 for the platform's storage).
/// </summary>
internal sealed partial class PlatformHost
{
    private readonly List<string> _credentialFiles = [];
    private int _webStopped;

    private void Participate(IHostLifecycle lifecycle)
    {
        lifecycle.Subscribe("telemetry", PlatformLifecycleStage.Telemetry, new LifecycleObserver(_ =>
        {
            if (_export.Traces || _export.Metrics)
                Telemetry.Log.OtlpExporting(_logger, _export.Traces && _export.Metrics ? "traces and metrics" : _export.Traces ? "traces" : "metrics",
                    _export.Endpoint ?? "the OTLP default endpoint");
            return Task.CompletedTask;
        }));
        // The apps' own Azurites (started as each app loads) stop after every instance that uses them.
        lifecycle.Subscribe("platform storage", PlatformLifecycleStage.Storage, new LifecycleObserver(
            _ => Task.CompletedTask,
            async _ => await _context.AppStorage.DisposeAsync()));
        lifecycle.Subscribe("deployments", PlatformLifecycleStage.Deployments, new LifecycleObserver(_ =>
        {
            var leftOvers = CleanWorkDirectory(Options);
            if (leftOvers > 0)
                Log.WorkCleaned(_logger, leftOvers, WorkDirectoryOf(Options));
            return Task.CompletedTask;
        }));
        lifecycle.Subscribe("frontend", PlatformLifecycleStage.Frontend, new LifecycleObserver(BindAsync, async _ =>
        {
            // After a failed start the serving stage never ran: its part of the stop is done here.
            WithdrawCredentials();
            await StopWebAsync();
        }));
        lifecycle.Subscribe("instance provider", PlatformLifecycleStage.Providers, new LifecycleObserver(
            _ => Task.CompletedTask,
            async _ => await _context.Provider.DisposeAsync()));
        lifecycle.Subscribe("controller", PlatformLifecycleStage.Controller, new LifecycleObserver(LoadDeployedAppsAsync,
            _ => Task.WhenAll(_apps.Values.Select(a => a.DisposeAsync().AsTask()))));
        lifecycle.Subscribe("KEDA scaler", PlatformLifecycleStage.Keda, new LifecycleObserver(
            _ =>
            {
                _context.Changed += RelayChanged;
                // Streams opened while the apps were loading wake once to read what the load decided.
                foreach (var app in _apps.Keys)
                    RelayChanged(app);
                return Task.CompletedTask;
            },
            _ =>
            {
                _context.Changed -= RelayChanged;
                return Task.CompletedTask;
            }));
        lifecycle.Subscribe("serving", PlatformLifecycleStage.Serving, new LifecycleObserver(_ => Task.CompletedTask, async _ =>
        {
            // First of a stop: the CLI no longer finds a platform that is going, and Kestrel takes no new request while
            // those in flight finish; only then do the apps drain.
            WithdrawCredentials();
            await StopWebAsync();
        }));
    }

    private void RelayChanged(string app) => Changed?.Invoke(app);

    /// <summary>Kestrel binds the frontend's port and the control port (instances are given the control address).</summary>
    private async Task BindAsync(CancellationToken ct)
    {
        await _web.StartAsync(ct);
        var addresses = _web.Urls.Select(u => new Uri(u)).ToArray();
        Address = addresses[0];
        ControlAddress = addresses[1];
        _context.ControlAddress = ControlAddress;
        Log.Listening(_logger, Address, ControlAddress, _store.Endpoint.ToString());
        PublishCredentials();
    }

    private async Task StopWebAsync()
    {
        if (Interlocked.Exchange(ref _webStopped, 1) == 0)
            await _web.StopAsync();
    }

    private void WithdrawCredentials()
    {
        foreach (var file in _credentialFiles)
        {
            try
            {
                File.Delete(file);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // A stale credential names a platform that is gone; the next one at this address replaces it.
            }
        }
        _credentialFiles.Clear();
    }

    /// <summary>
    /// Writes the admin key where `./faast deploy` and `./faast status` of this user find it for this address
    /// (<see cref="LocalCredentials"/>), and for 127.0.0.1 when the frontend listens on every address. Not fatal:
    /// the CLI then needs --admin-key-file.
    /// </summary>
    private void PublishCredentials()
    {
        var addresses = new List<Uri> { Address };
        if (Address.Host is "0.0.0.0" or "[::]" or "::")
            addresses.Add(new UriBuilder(Address) { Host = "127.0.0.1" }.Uri);
        string home;
        try
        {
            home = FaaSTHome.Find();
        }
        catch (InvalidOperationException e)
        {
            Log.CredentialNotPublished(_logger, "$FAAST_HOME/.faast/credentials", e.Message, PlatformKeys.AdminKeyFile(Options.StateDirectory));
            return;
        }
        foreach (var address in addresses)
        {
            try
            {
                _credentialFiles.Add(LocalCredentials.Publish(home, address, _context.Keys.AdminKey));
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                Log.CredentialNotPublished(_logger, LocalCredentials.PathFor(home, address), e.Message, PlatformKeys.AdminKeyFile(Options.StateDirectory));
            }
        }
    }

    /// <summary>Empties STATE/work (deploys a crash left behind) and makes it 0700; returns how many entries it removed.</summary>
    private static int CleanWorkDirectory(PlatformOptions options)
    {
        var work = WorkDirectoryOf(options);
        var removed = 0;
        if (Directory.Exists(work))
        {
            foreach (var entry in new DirectoryInfo(work).EnumerateFileSystemInfos())
            {
                try
                {
                    if (entry is DirectoryInfo dir && entry.LinkTarget is null)
                        dir.Delete(recursive: true);
                    else
                        entry.Delete();
                    removed++;
                }
                catch (Exception e) when (e is IOException or UnauthorizedAccessException)
                {
                    // Left for the next start; a deploy's own folder has a fresh name.
                }
            }
        }
        PrivateFiles.CreateDirectory(work);
        return removed;
    }

    /// <summary>
    /// Stops the lifecycle (serving, KEDA, the apps, the provider, the frontend, deploy, storage), then frees the rest:
    /// disposing the web application disposes its registry, and with it each part the registry made (the storage
    /// client, ...), once. What must go in order is stopped by the lifecycle first: the provider (every instance) at its
    /// stage, before the apps' Azurites at the storage stage; the registry never disposes the provider (PlatformServices).
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        await _lifecycle.StopAsync();
        await _web.DisposeAsync();
    }

    /// <summary>
    /// The lifecycle's own line for a stage that failed to start carries the exception's stack; the platform's caller
    /// reports the same failure as one line and an exit code (`./faast platform`'s contract), so that line is left out.
    /// Everything else (a stage that fails to stop) is logged as it comes.
    /// </summary>
    internal sealed class QuietStartFailures(ILogger inner) : ILogger
    {
        private const int StartFailedEvent = 6000; // src/Hosting Log.StartFailed

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => inner.BeginScope(state);

        public bool IsEnabled(LogLevel logLevel) => inner.IsEnabled(logLevel);

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            if (eventId.Id != StartFailedEvent)
                inner.Log(logLevel, eventId, state, exception, formatter);
        }
    }
}
