using System.Collections;
using FaaST.Cachelet.Sources;
using FaaST.Policy;
using FaaST.Runtime.Hosting;

namespace FaaST.Runtime.Flash;

/// <summary>Where this instance's flash tier is and the app's credential for it.</summary>
/// <param name="AddressSource">Where the address came from, for logs and /admin/flash.</param>
internal sealed record FlashSettings(Uri Address, string AddressSource, string Token);

/// <summary>
/// How the flash tier joins the host (one call in the registry; see CONTRIBUTING, "Adding a lifecycle component"): when
/// faast.json's <c>flash.enabled</c> is true and the cache is on, the tier's client, its read source (an
/// <see cref="IBlobSource"/>), its demotion sink (an <see cref="IEvictionSink"/>, unless <c>flash.demote</c> is false)
/// and its component (<see cref="FlashComponent"/>: the flow, /admin/flash). The cache core is not touched.
/// </summary>
internal static class FlashRegistration
{
    /// <summary>The tier's address when faast.json has none (the platform's own server), as the platform sets it.</summary>
    public const string AddressSetting = "FAAST_FLASH_ADDRESS";

    /// <summary>The app's tenant token (the platform's, or the operator's for a server named in faast.json).</summary>
    public const string TokenSetting = "FAAST_FLASH_TOKEN";

    public static IServiceCollection AddFlashTier(this IServiceCollection services, FunctionApp app, CachePolicy policy, IDictionary? environment)
    {
        if (!policy.Enabled || !policy.Flash.Enabled)
            return services; // the tier sits on the cache's seams: without the cache there is nothing to join
        var settings = Resolve(app, policy.Flash, environment ?? Environment.GetEnvironmentVariables());
        services.AddSingleton(settings);
        services.AddSingleton(provider => new FlashMetrics(app.Name));
        services.AddSingleton<FlashHeldVersions>();
        services.AddSingleton(provider => new FlashClient(settings.Address, settings.Token, $"{Environment.MachineName}-{Environment.ProcessId}",
            policy.Flash, provider.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Flash")));
        services.AddSingleton<IBlobSource, FlashSource>();
        if (policy.Flash.Demote)
            services.AddSingleton<IEvictionSink, FlashDemotionSink>();
        services.AddLifecycleComponent<FlashComponent>();
        return services;
    }

    /// <summary>
    /// The address (faast.json's <c>flash.address</c>, else <see cref="AddressSetting"/>) and the token
    /// (<see cref="TokenSetting"/>), each from the app's settings (local.settings.json's Values, overridden by the
    /// environment) or the environment. Both are host-only: they never reach a worker (WorkerPool.HostOnlySettings), so
    /// the app's code cannot use the app's token to reach the tier beside the cache. A missing one fails the start,
    /// naming what to set.
    /// </summary>
    public static FlashSettings Resolve(FunctionApp app, FlashPolicy flash, IDictionary environment)
    {
        var policyFile = Path.Combine(app.Directory, CachePolicyFile.FileName);
        var (address, addressSource) = flash.Address is { } given
            ? (given, $"{policyFile} flash.address")
            : Setting(app, environment, AddressSetting) is var (text, source) && text is not null
                ? (ParseAddress(text, source), source)
                : throw new AppConfigException($"{policyFile}: flash.enabled is true but no flash server is named: set flash.address, "
                    + $"or {AddressSetting} (the platform sets it for the server it starts; for a bare host, in the environment or local.settings.json)");
        var (token, tokenSource) = Setting(app, environment, TokenSetting);
        if (string.IsNullOrWhiteSpace(token))
            throw new AppConfigException($"{policyFile}: flash.enabled is true but {TokenSetting} is not set: the app's token for the flash server at "
                + $"{address} (the platform sets it for the server it starts; for a server named in flash.address, the operator gives it as an app setting)");
        if (token.Any(char.IsControl) || token.Contains(' '))
            throw new AppConfigException($"{tokenSource}: {TokenSetting} must be a token without spaces or control characters");
        return new FlashSettings(address, addressSource, token);
    }

    private static (string? Value, string Source) Setting(FunctionApp app, IDictionary environment, string name) =>
        app.Settings[name] is { } fromSettings
            ? (fromSettings, app.Settings.SourceOf(name))
            : (environment[name] as string, $"the environment's {name}");

    private static Uri ParseAddress(string text, string source) =>
        Uri.TryCreate(text.Trim(), UriKind.Absolute, out var uri) && (uri.Scheme == Uri.UriSchemeHttp || uri.Scheme == Uri.UriSchemeHttps)
            ? uri
            : throw new AppConfigException($"{source}: \"{LogText.Escape(text)}\" is not a flash server address; expected an absolute http:// URI like http://127.0.0.1:7300");
}
