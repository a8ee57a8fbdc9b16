using FaaST.Hosting;
using FaaST.Runtime.Http;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The app's access keys (stage <see cref="ServiceLifecycleStage.Storage"/> + 100, once storage is up and
/// before any endpoint answers): when keys are enforced, loads them from app settings
/// (AzureWebJobsSecretStorageType=kubernetes) or from the azure-webjobs-secrets container (created on
/// first start), and hands them to <see cref="Check"/>. Nothing is read when keys are not enforced.
/// </summary>
internal sealed class KeysComponent(FunctionApp app, IOptions<ServingOptions> serving, StorageComponent storage, HttpKeyCheck check, ILoggerFactory loggers)
    : ILifecycleParticipant
{
    private readonly ServingOptions _options = serving.Value;
    private readonly ILogger _logger = loggers.CreateLogger("FaaST.Http");

    /// <summary>What the HTTP functions and the admin endpoints ask about each request (one instance, in the registry).</summary>
    public HttpKeyCheck Check => check;

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(KeysComponent), ServiceLifecycleStage.Storage + 100, new LifecycleObserver(StartAsync, _ => Task.CompletedTask));

    private async Task StartAsync(CancellationToken ct)
    {
        if (!Check.Enforced)
        {
            Log.KeysNotEnforced(_logger, _options.ListenAddress.ToString(), HttpKeyCheck.EnforceSetting);
            return;
        }
        var keys = app.Settings[HttpKeyCheck.StorageTypeSetting]?.Equals("kubernetes", StringComparison.OrdinalIgnoreCase) == true
            ? FunctionKeys.FromSettings(app.Settings)
            : await FunctionKeys.FromStorageAsync(storage.Accounts.Get("AzureWebJobsStorage"), app, blob => Log.KeysCreated(_logger, blob), ct);
        Check.Keys = keys;
        Log.KeysEnforced(_logger, _options.ListenAddress.ToString(), keys.Source);
    }
}
