using System.Net;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// The checks of an app's settings its instance makes only as it starts, each in its own component (keys, queue
/// triggers, telemetry), gathered in one place so that a deploy makes them before any instance starts: the platform
/// refuses at deploy what an instance of the app would refuse at start (issue 19, defect 7). Each check is the
/// component's own function, so the messages are the ones the instance would exit with.
/// </summary>
internal static class StartChecks
{
    /// <summary>Every problem found (empty: none), each an <see cref="AppConfigException"/>'s message naming the file and setting.</summary>
    /// <param name="listen">The address the instance will listen on (keys are always enforced beyond loopback).</param>
    public static IReadOnlyList<string> Problems(FunctionApp app, IPAddress listen)
    {
        ArgumentNullException.ThrowIfNull(app);
        var problems = new List<string>();
        void Check(Action check)
        {
            try
            {
                check();
            }
            catch (AppConfigException e)
            {
                problems.Add(e.Message);
            }
        }

        // ServingOptions: FAAST_ENFORCE_KEYS and AzureWebJobsSecretStorageType.
        Check(() => Http.HttpKeyCheck.Resolve(app.Settings, listen));
        // KeysComponent: keys held in app settings need the master key.
        if (app.Settings[Http.HttpKeyCheck.StorageTypeSetting]?.Equals("kubernetes", StringComparison.OrdinalIgnoreCase) == true)
            Check(() => Http.FunctionKeys.FromSettings(app.Settings));
        // QueueTriggersComponent: FAAST_QUEUE_MESSAGE_LEASE.
        Check(() => Components.QueueTriggersComponent.Lease(app.Settings));
        // TelemetrySetup: the OTEL_* exporters the app's settings choose.
        Check(() =>
        {
            var otel = app.Settings.Values.Where(s => s.Key.StartsWith("OTEL_", StringComparison.OrdinalIgnoreCase))
                .Select(s => new KeyValuePair<string, string?>(s.Key, s.Value));
            var config = new ConfigurationBuilder().AddInMemoryCollection(otel).Build();
            TelemetryExport.From(config, app.Settings.SourceOf);
        });
        return problems;
    }
}
