using System.Collections.Concurrent;
using FaaST.Runtime.App;
using FaaST.Storage;

namespace FaaST.Runtime.Bindings;

/// <summary>
/// One <see cref="IBlobStore"/> per connection setting a binding names. AzureWebJobsStorage that is
/// absent or "UseDevelopmentStorage=true" means the Azurite this runtime started.
/// </summary>
public sealed class StorageAccounts(AppSettings settings, string? developmentConnectionString, BlobStoreOptions? options = null) : IDisposable
{
    private readonly ConcurrentDictionary<string, IBlobStore> _stores = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>True when the app's default storage is the local emulator (the runtime must start Azurite).</summary>
    public static bool NeedsDevelopmentStorage(AppSettings settings)
    {
        var cs = settings["AzureWebJobsStorage"];
        return string.IsNullOrWhiteSpace(cs) || cs.Replace(" ", "", StringComparison.Ordinal)
            .Contains("UseDevelopmentStorage=true", StringComparison.OrdinalIgnoreCase);
    }

    /// <summary>
    /// What is wrong with the connection string in setting <paramref name="connection"/> (naming the
    /// setting, never its value, which holds the account key); null when it is fine, unset, or the
    /// development storage.
    /// </summary>
    public static string? ConnectionProblem(AppSettings settings, string connection)
    {
        var cs = settings[connection];
        if (string.IsNullOrWhiteSpace(cs) || cs.Replace(" ", "", StringComparison.Ordinal)
                .Contains("UseDevelopmentStorage=true", StringComparison.OrdinalIgnoreCase))
            return null;
        try
        {
            _ = StorageConnectionString.Parse(cs);
            return null;
        }
        catch (Exception e) when (e is ArgumentException or FormatException)
        {
            return $"{settings.SourceOf(connection)} is not a usable storage connection string: {e.Message.Split(" (Parameter", 2)[0]}";
        }
    }

    /// <summary>The store for a connection setting; throws naming the setting when it is not set.</summary>
    public IBlobStore Get(string connection) => _stores.GetOrAdd(connection, Create);

    /// <summary>The store (among those the app's bindings opened, plus the default account) at a blob endpoint; null if none.</summary>
    public IBlobStore? ForEndpoint(string endpoint)
    {
        foreach (var store in _stores.Values)
            if (string.Equals(store.Endpoint.AbsoluteUri, endpoint, StringComparison.Ordinal))
                return store;
        var main = Get("AzureWebJobsStorage");
        return string.Equals(main.Endpoint.AbsoluteUri, endpoint, StringComparison.Ordinal) ? main : null;
    }

    /// <summary>The connection string a setting resolves to (for workers' environment and errors).</summary>
    public string? ConnectionString(string connection)
    {
        var cs = settings[connection];
        if (string.IsNullOrWhiteSpace(cs) && connection.Equals("AzureWebJobsStorage", StringComparison.OrdinalIgnoreCase))
            return developmentConnectionString;
        if (cs is not null && cs.Replace(" ", "", StringComparison.Ordinal).Contains("UseDevelopmentStorage=true", StringComparison.OrdinalIgnoreCase))
            return developmentConnectionString ?? cs;
        return string.IsNullOrWhiteSpace(cs) ? null : cs;
    }

    private IBlobStore Create(string connection)
    {
        var cs = ConnectionString(connection)
            ?? throw new AppConfigException($"app setting \"{connection}\" (a binding's connection) is not set; add it to local.settings.json Values");
        try
        {
            return new BlobStore(cs, options);
        }
        catch (ArgumentException e)
        {
            throw new AppConfigException($"app setting \"{connection}\": {e.Message}");
        }
    }

    public void Dispose()
    {
        foreach (var store in _stores.Values)
            (store as IDisposable)?.Dispose();
    }
}
