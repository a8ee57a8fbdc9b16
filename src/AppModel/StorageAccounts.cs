using System.Collections.Concurrent;
using FaaST.Storage;
using Microsoft.Extensions.Logging;

namespace FaaST.AppModel;

/// <summary>
/// One <see cref="IBlobStore"/> per connection a binding names. A connection CONN is either a connection string
/// in setting CONN, or an identity-based connection as Azure Functions defines it: CONN__blobServiceUri or
/// CONN__serviceUri (an https blob endpoint), or CONN__accountName (https://NAME.blob.core.windows.net), with
/// CONN__credential = managedidentity (the default) and CONN__clientId for a user-assigned identity
/// For queue bindings the same connection reaches the queue service: the connection string's QueueEndpoint (or the
/// endpoint the SDK derives from its account name), or CONN__queueServiceUri, else CONN__accountName
/// (https://NAME.queue.core.windows.net). CONN__tableServiceUri is accepted and unused; "CONN:name" works as "CONN__name".
/// AzureWebJobsStorage that is absent or "UseDevelopmentStorage=true", and any connection set to "UseDevelopmentStorage=true",
/// mean <c>developmentConnectionString</c>: the Azurite this runtime started, or the platform's for this app.
/// </summary>
public sealed class StorageAccounts(AppSettings settings, string? developmentConnectionString, BlobStoreOptions? options = null,
    Func<string, string?>? environment = null, ILogger? logger = null) : IDisposable
{
    /// <summary>The settings of an identity-based connection, after CONN__ (or CONN:).</summary>
    private static readonly string[] IdentityKeys =
        ["blobServiceUri", "serviceUri", "accountName", "credential", "clientId", "queueServiceUri", "tableServiceUri", "tenantId", "clientSecret", "certificate"];

    private readonly ConcurrentDictionary<string, IBlobStore> _stores = new(StringComparer.OrdinalIgnoreCase);
    private readonly ConcurrentDictionary<string, IQueueStore> _queues = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>
    /// The environment variable the platform starts an instance with: the connection string of the app's own Azurite
    /// (an account and key of its own, blob and queue services). Every development-storage setting resolves to it
    /// (see <see cref="UsesDevelopmentStorage"/>), and the host starts no Azurite of its own.
    /// </summary>
    public const string DevelopmentStorageVariable = "FAAST_DEVELOPMENT_STORAGE";

    /// <summary>
    /// True when any connection of the app is development storage: AzureWebJobsStorage unset (and not identity-based)
    /// or UseDevelopmentStorage=true, or any other setting (a binding's named connection) set to UseDevelopmentStorage=true.
    /// Each of them reaches the same Azurite: the one the host starts, or the platform's for this app.
    /// </summary>
    public static bool UsesDevelopmentStorage(AppSettings settings) =>
        NeedsDevelopmentStorage(settings) || settings.Values.Values.Any(IsDevelopmentStorage);

    /// <summary>
    /// The settings that name development storage, each resolved to <paramref name="developmentConnectionString"/>:
    /// what workers see in their environment instead of the literal UseDevelopmentStorage=true (which would send
    /// their own storage clients to 127.0.0.1:10000, where nothing of this app listens).
    /// </summary>
    public static IReadOnlyDictionary<string, string> DevelopmentSettings(AppSettings settings, string? developmentConnectionString)
    {
        var resolved = new Dictionary<string, string>(StringComparer.Ordinal);
        if (developmentConnectionString is null)
            return resolved;
        foreach (var (name, value) in settings.Values)
            if (IsDevelopmentStorage(value))
                resolved[name] = developmentConnectionString;
        if (NeedsDevelopmentStorage(settings))
            resolved["AzureWebJobsStorage"] = developmentConnectionString;
        return resolved;
    }

    /// <summary>True when the app's default storage is the local emulator (the runtime must start Azurite).</summary>
    public static bool NeedsDevelopmentStorage(AppSettings settings)
    {
        var cs = settings["AzureWebJobsStorage"];
        if (string.IsNullOrWhiteSpace(cs))
            return !IsIdentityBased(settings, "AzureWebJobsStorage");
        return IsDevelopmentStorage(cs);
    }

    /// <summary>True when connection <paramref name="connection"/> has no connection string but identity-based settings.</summary>
    public static bool IsIdentityBased(AppSettings settings, string connection) =>
        string.IsNullOrWhiteSpace(settings[connection]) && IdentityKeys.Any(k => Identity(settings, connection, k) is not null);

    /// <summary>
    /// What is wrong with connection <paramref name="connection"/>: its connection string, or its identity-based
    /// settings (naming the setting and what is missing, never a value, which may hold a key); null when it is
    /// fine, or is AzureWebJobsStorage left to the development storage. <paramref name="environment"/> reads the
    /// process environment the managed identity's token endpoint comes from (default: the real one).
    /// </summary>
    public static string? ConnectionProblem(AppSettings settings, string connection, Func<string, string?>? environment = null)
    {
        var cs = settings[connection];
        if (!string.IsNullOrWhiteSpace(cs))
        {
            if (IsDevelopmentStorage(cs))
                return null;
            return BlobStore.ConnectionStringProblem(cs) is { } problem
                ? $"{settings.SourceOf(connection)} is not a usable storage connection string: {problem}"
                : null;
        }
        if (IsIdentityBased(settings, connection))
            return ReadIdentity(settings, connection, out _, out _) ?? ManagedIdentityProblem(settings, connection, environment);
        if (connection.Equals("AzureWebJobsStorage", StringComparison.OrdinalIgnoreCase))
            return null;
        return $"app setting \"{connection}\" (a binding's connection) is not set: add it to {settings.FilePath} Values (or the environment) as a " +
            $"storage connection string, or set {connection}__serviceUri (or {connection}__blobServiceUri, or {connection}__accountName) " +
            "for an identity-based connection";
    }

    /// <summary>The store for a connection setting; throws naming the setting when it is not set or not usable.</summary>
    public IBlobStore Get(string connection) => _stores.GetOrAdd(connection, Create);

    /// <summary>The queue service of a connection setting; throws naming the setting when it does not reach one.</summary>
    public IQueueStore GetQueues(string connection) => _queues.GetOrAdd(connection, CreateQueues);

    /// <summary>
    /// What keeps connection <paramref name="connection"/> from reaching a queue service (as <see cref="ConnectionProblem"/>
    /// for blobs, naming the setting, never a value); null when it does, or is AzureWebJobsStorage left to the
    /// development storage (the Azurite the runtime starts serves queues).
    /// </summary>
    public static string? QueueConnectionProblem(AppSettings settings, string connection, Func<string, string?>? environment = null)
    {
        var cs = settings[connection];
        if (!string.IsNullOrWhiteSpace(cs))
            return ServiceConnectionStringProblem(settings, connection, cs, "queue", "QueueEndpoint", environment);
        if (IsIdentityBased(settings, connection))
            return ReadQueueIdentity(settings, connection, out _, out _) ?? ManagedIdentityProblem(settings, connection, environment);
        if (connection.Equals("AzureWebJobsStorage", StringComparison.OrdinalIgnoreCase))
            return null;
        return $"app setting \"{connection}\" (a queue binding's connection) is not set: add it to {settings.FilePath} Values (or the environment) " +
            $"as a storage connection string, or set {connection}__queueServiceUri (or {connection}__accountName) for an identity-based connection";
    }

    /// <summary>
    /// What keeps connection <paramref name="connection"/> from reaching a table service (as <see cref="ConnectionProblem"/>,
    /// naming the setting, never a value); null when it does, or is AzureWebJobsStorage left to the development storage
    /// (the Azurite the runtime starts serves tables). Identity-based connections are refused: the table bindings open
    /// their client from a connection string.
    /// </summary>
    public static string? TableConnectionProblem(AppSettings settings, string connection, Func<string, string?>? environment = null)
    {
        var cs = settings[connection];
        if (!string.IsNullOrWhiteSpace(cs))
            return ServiceConnectionStringProblem(settings, connection, cs, "table", "TableEndpoint", environment);
        if (IsIdentityBased(settings, connection))
            return $"app setting \"{connection}\" is an identity-based connection, which FaaST's table bindings do not support: set {connection} " +
                $"to a storage connection string in {settings.FilePath} Values (or the environment)";
        if (connection.Equals("AzureWebJobsStorage", StringComparison.OrdinalIgnoreCase))
            return null;
        return $"app setting \"{connection}\" (a table binding's connection) is not set: add it to {settings.FilePath} Values (or the environment) " +
            "as a storage connection string";
    }

    /// <summary>A queue's or table's connection given as a connection string: development storage is fine; otherwise it
    /// must be a usable storage connection string (as for blobs) that reaches the <paramref name="service"/>.</summary>
    private static string? ServiceConnectionStringProblem(AppSettings settings, string connection, string cs, string service, string endpointKey,
        Func<string, string?>? environment)
    {
        if (IsDevelopmentStorage(cs))
            return null;
        if (ConnectionProblem(settings, connection, environment) is { } problem)
            return problem;
        return StorageConnectionString.ReachesService(cs, endpointKey) ? null
            : $"{settings.SourceOf(connection)} names no {service} service (it has BlobEndpoint but no {endpointKey}), which a {service} binding needs";
    }

    /// <summary>The store (among those the app's bindings opened, plus the default account) at a blob endpoint; null if none.</summary>
    public IBlobStore? ForEndpoint(string endpoint)
    {
        foreach (var store in _stores.Values)
            if (string.Equals(store.Endpoint.AbsoluteUri, endpoint, StringComparison.Ordinal))
                return store;
        var main = Get("AzureWebJobsStorage");
        return string.Equals(main.Endpoint.AbsoluteUri, endpoint, StringComparison.Ordinal) ? main : null;
    }

    /// <summary>The connection string a setting resolves to (for workers' environment and errors); null for an identity-based connection.</summary>
    public string? ConnectionString(string connection)
    {
        var cs = settings[connection];
        if (string.IsNullOrWhiteSpace(cs) && connection.Equals("AzureWebJobsStorage", StringComparison.OrdinalIgnoreCase))
            return IsIdentityBased(settings, connection) ? null : developmentConnectionString;
        if (cs is not null && IsDevelopmentStorage(cs))
            return developmentConnectionString ?? cs;
        return string.IsNullOrWhiteSpace(cs) ? null : cs;
    }

    /// <summary>
    /// Which account (and credential) a connection reaches, as text two connections can be compared by: the
    /// connection string, or the identity-based blob endpoint and client id.
    /// </summary>
    public string? AccountOf(string connection)
    {
        if (ConnectionString(connection) is { } cs)
            return cs;
        return ReadIdentity(settings, connection, out var uri, out var clientId) is null && uri is not null
            ? "identity:" + uri.AbsoluteUri + "|" + clientId
            : null;
    }

    private IBlobStore Create(string connection) =>
        Create<IBlobStore>(connection, "a binding's connection", cs => new BlobStore(cs, options, logger),
            (string c, out Uri? uri, out string? clientId) => ReadIdentity(settings, c, out uri, out clientId),
            (uri, clientId) => new BlobStore(uri, ManagedIdentity.Create(clientId, options, environment), options, logger));

    private IQueueStore CreateQueues(string connection) =>
        Create<IQueueStore>(connection, "a queue binding's connection", cs => new QueueStore(cs, options, logger),
            (string c, out Uri? uri, out string? clientId) => ReadQueueIdentity(settings, c, out uri, out clientId),
            (uri, clientId) => new QueueStore(uri, ManagedIdentity.Create(clientId, options, environment), options, logger));

    private delegate string? IdentityReader(string connection, out Uri? serviceUri, out string? clientId);

    /// <summary>A store for <paramref name="connection"/>: from its connection string, else from its identity-based
    /// settings (a managed identity); what is wrong with either is an <see cref="AppConfigException"/> naming the setting.</summary>
    private T Create<T>(string connection, string role, Func<string, T> fromConnectionString, IdentityReader readIdentity,
        Func<Uri, string?, T> fromIdentity)
    {
        if (ConnectionString(connection) is { } cs)
        {
            try
            {
                return fromConnectionString(cs);
            }
            catch (ArgumentException e)
            {
                throw new AppConfigException($"app setting \"{connection}\": {e.Message.Split(" (Parameter", 2)[0]}");
            }
        }
        if (!IsIdentityBased(settings, connection))
            throw new AppConfigException($"app setting \"{connection}\" ({role}) is not set; add it to local.settings.json Values");
        if ((readIdentity(connection, out var serviceUri, out var clientId) ?? ManagedIdentityProblem(settings, connection, environment)) is { } problem)
            throw new AppConfigException(problem);
        return fromIdentity(serviceUri!, clientId);
    }

    private static bool IsDevelopmentStorage(string cs) =>
        cs.Replace(" ", "", StringComparison.Ordinal).Contains("UseDevelopmentStorage=true", StringComparison.OrdinalIgnoreCase);

    /// <summary>CONN__key, else CONN:key (the JSON configuration spelling); null when unset or blank.</summary>
    private static string? Identity(AppSettings settings, string connection, string key)
    {
        var value = settings[connection + "__" + key] ?? settings[connection + ":" + key];
        return string.IsNullOrWhiteSpace(value) ? null : value.Trim();
    }

    private static string NameOf(AppSettings settings, string connection, string key) =>
        settings[connection + "__" + key] is not null || settings[connection + ":" + key] is null
            ? settings.SourceOf(connection + "__" + key)
            : settings.SourceOf(connection + ":" + key);

    /// <summary>The blob endpoint and client id of an identity-based connection, or what is wrong with its settings.</summary>
    private static string? ReadIdentity(AppSettings settings, string connection, out Uri? serviceUri, out string? clientId) =>
        ReadIdentity(settings, connection, "blob", ["blobServiceUri", "serviceUri"], out serviceUri, out clientId,
            $"has no blob endpoint: {settings.SourceOf(connection + "__serviceUri")} (or {connection}__blobServiceUri, or {connection}__accountName) is missing" +
            (Identity(settings, connection, "queueServiceUri") is not null ? $" ({connection}__queueServiceUri alone does not name the blob service)" : ""));

    /// <summary>The queue endpoint of an identity-based connection (queueServiceUri, else accountName), or what is wrong.</summary>
    private static string? ReadQueueIdentity(AppSettings settings, string connection, out Uri? serviceUri, out string? clientId) =>
        ReadIdentity(settings, connection, "queue", ["queueServiceUri"], out serviceUri, out clientId,
            $"has no queue endpoint, which a queue binding needs: {settings.SourceOf(connection + "__queueServiceUri")} " +
            $"(or {connection}__accountName) is missing ({connection}__serviceUri and __blobServiceUri name the blob service only)");

    /// <summary>
    /// The <paramref name="service"/> endpoint of an identity-based connection — the first of <paramref name="uriKeys"/>
    /// set, else https://ACCOUNT.SERVICE.core.windows.net from accountName — and its client id; or what is wrong.
    /// </summary>
    private static string? ReadIdentity(AppSettings settings, string connection, string service, string[] uriKeys,
        out Uri? serviceUri, out string? clientId, string noEndpoint)
    {
        serviceUri = null;
        clientId = Identity(settings, connection, "clientId");
        var what = $"the identity-based connection {connection}";
        foreach (var unsupported in (string[])["clientSecret", "certificate"])
            if (Identity(settings, connection, unsupported) is not null)
                return $"{NameOf(settings, connection, unsupported)} is set, but {what} supports only a managed identity " +
                    $"(remove it, and set {connection}__credential to managedidentity)";
        var credential = Identity(settings, connection, "credential");
        if (credential is not null && !credential.Equals("managedidentity", StringComparison.OrdinalIgnoreCase))
            return $"{NameOf(settings, connection, "credential")} is \"{LogText.Escape(credential)}\"; {what} supports only \"managedidentity\"";
        foreach (var key in uriKeys)
        {
            if (Identity(settings, connection, key) is not { } text)
                continue;
            if (!Uri.TryCreate(text, UriKind.Absolute, out var uri) || uri.Scheme != Uri.UriSchemeHttps || uri.Query.Length > 0 ||
                uri.Fragment.Length > 0 || uri.UserInfo.Length > 0)
                return $"{NameOf(settings, connection, key)} is not an https URI of a {service} service without query, such as " +
                    $"https://ACCOUNT.{service}.core.windows.net (a token is only ever sent over TLS)";
            serviceUri = uri;
            return null;
        }
        if (Identity(settings, connection, "accountName") is { } account)
        {
            if (account.Length is < 3 or > 24 || !account.All(c => char.IsAsciiLetterLower(c) || char.IsAsciiDigit(c)))
                return $"{NameOf(settings, connection, "accountName")} is not a storage account name (3 to 24 lowercase letters and digits)";
            serviceUri = new Uri($"https://{account}.{service}.core.windows.net", UriKind.Absolute);
            return null;
        }
        return what + " " + noEndpoint;
    }

    private static string? ManagedIdentityProblem(AppSettings settings, string connection, Func<string, string?>? environment) =>
        ManagedIdentity.Problem(environment) is { } missing
            ? $"the identity-based connection {connection} ({settings.SourceOf(connection + "__credential")}: managedidentity) cannot get a token: {missing}"
            : null;

    public void Dispose()
    {
        _queues.Clear(); // queue clients hold nothing but the shared transport
        foreach (var store in _stores.Values)
            (store as IDisposable)?.Dispose();
    }
}
