using System.Buffers;
using System.Net;
using System.Runtime.InteropServices;
using System.Security.Cryptography;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Http;

/// <summary>One access key: its name (never secret) and value (never logged).</summary>
internal readonly record struct NamedKey(string Name, string Value);

/// <summary>
/// An app's access keys, as Azure Functions keeps them: the master key (admin level: every function and
/// the /admin endpoints), host keys (function level, any function), system keys (system level) and each
/// function's own keys (function level, that function only). Immutable once loaded.
/// </summary>
internal sealed class FunctionKeys
{
    /// <summary>The container Azure Functions keeps its key documents in.</summary>
    public const string SecretsContainer = "azure-webjobs-secrets";

    /// <summary>Settings prefixes of keys held in app settings (the names of the entries of the Kubernetes
    /// secret Azure Functions reads with AzureWebJobsSecretStorageType=kubernetes).</summary>
    public const string MasterSetting = AuthSettings.MasterSetting, HostKeyPrefix = AuthSettings.HostKeyPrefix,
        SystemKeyPrefix = AuthSettings.SystemKeyPrefix, FunctionKeyPrefix = AuthSettings.FunctionKeyPrefix;

    /// <summary>Shortest key FaaST accepts from settings or storage (Azure generates 56 characters).</summary>
    public const int MinimumKeyLength = 16;

    private static readonly NamedKey[] None = [];

    public FunctionKeys(string master, NamedKey[] hostKeys, NamedKey[] systemKeys, Dictionary<string, NamedKey[]> functionKeys, string source)
    {
        Master = master;
        HostKeys = hostKeys;
        SystemKeys = systemKeys;
        _functionKeys = new Dictionary<string, NamedKey[]>(functionKeys, StringComparer.OrdinalIgnoreCase);
        Source = source;
    }

    public string Master { get; }
    public NamedKey[] HostKeys { get; }
    public NamedKey[] SystemKeys { get; }
    private readonly Dictionary<string, NamedKey[]> _functionKeys;

    /// <summary>Where the keys came from, for the start-up log (no values).</summary>
    public string Source { get; }

    public NamedKey[] Of(string function) => _functionKeys.TryGetValue(function, out var keys) ? keys : None;

    /// <summary>
    /// The level <paramref name="presented"/> grants for <paramref name="function"/> (null: the admin API),
    /// checked in Azure's order: master, system keys, host keys, the function's own keys.
    /// </summary>
    public AuthLevel? LevelOf(string presented, string? function)
    {
        if (SecretEquals(presented, Master))
            return AuthLevel.Admin;
        if (Matches(SystemKeys, presented))
            return AuthLevel.System;
        if (Matches(HostKeys, presented))
            return AuthLevel.Function;
        if (function is not null && Matches(Of(function), presented))
            return AuthLevel.Function;
        return null;
    }

    private static bool Matches(NamedKey[] keys, string presented)
    {
        var any = false;
        foreach (var key in keys)
            any |= SecretEquals(presented, key.Value); // no early exit: every key is compared
        return any;
    }

    /// <summary>
    /// Compares in time that depends only on the lengths, never on where the first difference is, so
    /// response times tell an attacker nothing about a key's characters. No allocation (the strings'
    /// UTF-16 bytes are compared in place).
    /// </summary>
    public static bool SecretEquals(string presented, string key) =>
        presented.Length == key.Length &&
        CryptographicOperations.FixedTimeEquals(MemoryMarshal.AsBytes(presented.AsSpan()), MemoryMarshal.AsBytes(key.AsSpan()));

    /// <summary>A new random key like Azure's: 40 random bytes, URL-safe base64 (padding kept, as Azure does).</summary>
    public static string Generate()
    {
        Span<byte> bytes = stackalloc byte[40];
        RandomNumberGenerator.Fill(bytes);
        return Convert.ToBase64String(bytes).Replace('+', '-').Replace('/', '_');
    }

    /// <summary>The app's host id (AzureFunctionsWebHost__hostid, else its folder name) as Azure shapes one:
    /// lower case, letters, digits and dashes, at most 32 characters, no trailing dash.</summary>
    public static string HostId(FunctionApp app)
    {
        var raw = app.Settings["AzureFunctionsWebHost__hostid"] ?? app.Name;
        var id = new string(raw.ToLowerInvariant().Select(c => char.IsAsciiLetterOrDigit(c) || c == '-' ? c : '-').ToArray()).Trim('-');
        if (id.Length > 32)
            id = id[..32].TrimEnd('-');
        return id.Length > 0 ? id : "faast";
    }

    /// <summary>Keys from app settings (AzureWebJobsSecretStorageType=kubernetes); read-only, host.master required.</summary>
    public static FunctionKeys FromSettings(AppSettings settings)
    {
        string? master = null;
        var host = new List<NamedKey>();
        var system = new List<NamedKey>();
        var functions = new Dictionary<string, List<NamedKey>>(StringComparer.OrdinalIgnoreCase);
        foreach (var (name, value) in settings.Values)
        {
            if (!AuthSettings.IsKeySetting(name))
                continue;
            Check(value, settings.SourceOf(name));
            if (name.Equals(MasterSetting, StringComparison.OrdinalIgnoreCase))
                master = value;
            else if (name.StartsWith(HostKeyPrefix, StringComparison.OrdinalIgnoreCase))
                host.Add(new NamedKey(name[HostKeyPrefix.Length..], value));
            else if (name.StartsWith(SystemKeyPrefix, StringComparison.OrdinalIgnoreCase))
                system.Add(new NamedKey(name[SystemKeyPrefix.Length..], value));
            else
            {
                var rest = name[FunctionKeyPrefix.Length..];
                var dot = rest.IndexOf('.', StringComparison.Ordinal);
                var list = functions.TryGetValue(rest[..dot], out var l) ? l : functions[rest[..dot]] = [];
                list.Add(new NamedKey(rest[(dot + 1)..], value));
            }
        }
        if (master is null)
            throw new AppConfigException(
                $"{settings.FilePath}: AzureWebJobsSecretStorageType is \"kubernetes\", so the keys come from app settings, but Values.{MasterSetting} (the master key) is not set");
        return new FunctionKeys(master, host.ToArray(), system.ToArray(), functions.ToDictionary(p => p.Key, p => p.Value.ToArray(), StringComparer.OrdinalIgnoreCase),
            "app settings (host.master, host.function.*, host.systemKey.*, functions.*.*)");
    }

    private static void Check(string value, string where)
    {
        if (value.Length < MinimumKeyLength)
            throw new AppConfigException($"{where}: a key must have at least {MinimumKeyLength} characters, this one has {value.Length}");
        foreach (var c in value)
            if (c is <= ' ' or > '~')
                throw new AppConfigException($"{where}: a key may hold only visible ASCII characters (it travels in a header or a URL)");
    }

    /// <summary>
    /// Keys from the azure-webjobs-secrets container, as the Azure Functions host keeps them:
    /// HOSTID/host.json (master, host and system keys) and HOSTID/FUNCTION.json (a function's keys,
    /// the function's name in lower case). A document that does not exist is created with new random
    /// keys ("default", and the master key), unencrypted, create-only so that instances starting
    /// together agree on one; a document another instance created first is read instead.
    /// </summary>
    public static async Task<FunctionKeys> FromStorageAsync(IBlobStore store, FunctionApp app, Action<string> created, CancellationToken ct)
    {
        var hostId = HostId(app);
        await store.CreateContainerIfNotExistsAsync(SecretsContainer, ct);
        using var host = await LoadOrCreateAsync(store, $"{hostId}/host.json", HostDocument, created, ct);
        var where = $"{SecretsContainer}/{hostId}/host.json";
        var root = Object(host.RootElement, where, "the document");
        var master = Key(Property(root, "masterKey", where), where, "masterKey").Value;
        var hostKeys = Keys(root, "functionKeys", where);
        var systemKeys = Keys(root, "systemKeys", where);
        var functionNames = app.Functions
            .Where(f => f.Error is null && f.Trigger is { Type: BindingMetadata.HttpTrigger, AuthLevel: not AuthLevel.Anonymous })
            .Select(f => f.Name).ToArray();
        var perFunction = await Task.WhenAll(functionNames.Select(async name =>
        {
            var blob = $"{hostId}/{name.ToLowerInvariant()}.json";
            using var doc = await LoadOrCreateAsync(store, blob, FunctionDocument, created, ct);
            return (name, keys: Keys(Object(doc.RootElement, $"{SecretsContainer}/{blob}", "the document"), "keys", $"{SecretsContainer}/{blob}"));
        }));
        return new FunctionKeys(master, hostKeys, systemKeys, perFunction.ToDictionary(p => p.name, p => p.keys, StringComparer.OrdinalIgnoreCase),
            $"storage ({store.Endpoint}/{SecretsContainer}/{hostId}/)");
    }

    private static async Task<JsonDocument> LoadOrCreateAsync(IBlobStore store, string blob, Func<byte[]> document, Action<string> created, CancellationToken ct)
    {
        for (var attempt = 0; ; attempt++)
        {
            if (await store.DownloadAsync(SecretsContainer, blob, ct) is { } existing)
            {
                try
                {
                    return JsonDocument.Parse(existing.Data);
                }
                catch (JsonException e)
                {
                    throw new AppConfigException($"{SecretsContainer}/{blob} is not a valid keys document: {e.Message}");
                }
            }
            try
            {
                var bytes = document();
                await store.UploadAsync(SecretsContainer, blob, bytes, "application/json", ifNoneMatch: "*", ct: ct);
                created($"{SecretsContainer}/{blob}");
                return JsonDocument.Parse(bytes);
            }
            catch (BlobConditionFailedException) when (attempt == 0)
            {
                // Another instance created it between our read and our write: read theirs.
            }
        }
    }

    private static byte[] HostDocument() => Document(w =>
    {
        w.WritePropertyName("masterKey");
        WriteKey(w, "master");
        w.WriteStartArray("functionKeys");
        WriteKey(w, "default");
        w.WriteEndArray();
        w.WriteStartArray("systemKeys");
        w.WriteEndArray();
    });

    private static byte[] FunctionDocument() => Document(w =>
    {
        w.WriteStartArray("keys");
        WriteKey(w, "default");
        w.WriteEndArray();
    });

    /// <summary>The document shape of Azure's secrets serializer (version 1), unencrypted.</summary>
    private static byte[] Document(Action<Utf8JsonWriter> keys)
    {
        var buffer = new ArrayBufferWriter<byte>();
        using (var w = new Utf8JsonWriter(buffer, new JsonWriterOptions { Indented = true }))
        {
            w.WriteStartObject();
            keys(w);
            w.WriteNull("hostName");
            w.WriteString("instanceId", Guid.NewGuid().ToString("N"));
            w.WriteString("source", "runtime");
            w.WriteString("decryptionKeyId", "");
            w.WriteEndObject();
        }
        return buffer.WrittenSpan.ToArray();
    }

    private static void WriteKey(Utf8JsonWriter w, string name)
    {
        w.WriteStartObject();
        w.WriteString("name", name);
        w.WriteString("value", Generate());
        w.WriteBoolean("encrypted", false);
        w.WriteEndObject();
    }

    private static JsonElement Object(JsonElement e, string where, string what) =>
        e.ValueKind == JsonValueKind.Object ? e : throw new AppConfigException($"{where}: {what} must be a JSON object");

    private static JsonElement Property(JsonElement obj, string name, string where) =>
        obj.TryGetProperty(name, out var v) && v.ValueKind != JsonValueKind.Null ? v
            : throw new AppConfigException($"{where}: \"{name}\" is missing");

    private static NamedKey[] Keys(JsonElement obj, string name, string where)
    {
        if (!obj.TryGetProperty(name, out var array) || array.ValueKind == JsonValueKind.Null)
            return [];
        if (array.ValueKind != JsonValueKind.Array)
            throw new AppConfigException($"{where}: \"{name}\" must be an array of keys");
        var i = 0;
        return array.EnumerateArray().Select(k => Key(k, where, $"{name}[{i++}]")).ToArray();
    }

    private static NamedKey Key(JsonElement key, string where, string what)
    {
        Object(key, where, what);
        if (key.TryGetProperty("encrypted", out var enc) && enc.ValueKind == JsonValueKind.True)
            throw new AppConfigException(
                $"{where}: {what} is encrypted (with the Azure host's data-protection key); FaaST reads unencrypted keys only: " +
                "write the document with \"encrypted\": false, or delete it and FaaST creates new keys");
        var name = key.TryGetProperty("name", out var n) && n.ValueKind == JsonValueKind.String ? n.GetString()! : "";
        if (!key.TryGetProperty("value", out var v) || v.ValueKind != JsonValueKind.String)
            throw new AppConfigException($"{where}: {what} has no \"value\" string");
        var value = v.GetString()!;
        Check(value, $"{where}: {what}");
        return new NamedKey(name, value);
    }
}

/// <summary>
/// Whether and how requests must present keys. Core Tools skips key checks on a developer's machine;
/// FaaST does the same while it listens on loopback only, and checks keys when it listens beyond
/// loopback (--listen) or when FAAST_ENFORCE_KEYS is true. The keys are loaded at start
/// (<see cref="Hosting.Components.KeysComponent"/>) and read lock-free per request.
/// </summary>
internal sealed class HttpKeyCheck
{
    public const string HeaderName = "x-functions-key", QueryName = "code";
    public const string EnforceSetting = "FAAST_ENFORCE_KEYS", StorageTypeSetting = "AzureWebJobsSecretStorageType";

    public HttpKeyCheck(bool enforced) => Enforced = enforced;

    public bool Enforced { get; }

    private FunctionKeys? _keys;

    /// <summary>The keys, once loaded (null while they are not, or when keys are not enforced).</summary>
    public FunctionKeys? Keys
    {
        get => Volatile.Read(ref _keys);
        set => Volatile.Write(ref _keys, value);
    }

    /// <summary>
    /// Whether keys are checked: always beyond loopback; on loopback when FAAST_ENFORCE_KEYS is true.
    /// Also checks AzureWebJobsSecretStorageType. Throws <see cref="AppConfigException"/> naming the setting.
    /// </summary>
    public static bool Resolve(AppSettings settings, IPAddress listen)
    {
        var type = settings[StorageTypeSetting];
        if (type is not null && !type.Equals("blob", StringComparison.OrdinalIgnoreCase) && !type.Equals("kubernetes", StringComparison.OrdinalIgnoreCase))
            throw new AppConfigException(
                $"{settings.SourceOf(StorageTypeSetting)} is \"{LogText.Escape(type)}\"; FaaST keeps keys in blob storage (\"blob\", the default) " +
                "or reads them from app settings (\"kubernetes\": host.master, host.function.NAME, host.systemKey.NAME, functions.FUNCTION.NAME)");
        var beyondLoopback = !IPAddress.IsLoopback(listen);
        var text = settings[EnforceSetting];
        if (text is null)
            return beyondLoopback;
        if (ParseFlag(text) is not { } enforce)
            throw new AppConfigException($"{settings.SourceOf(EnforceSetting)} is \"{LogText.Escape(text)}\"; it must be true or false (or 1 or 0)");
        if (!enforce && beyondLoopback)
            throw new AppConfigException(
                $"{settings.SourceOf(EnforceSetting)} is false, but the host listens on {listen}, beyond loopback, where keys are always checked; " +
                "give the functions that need no key \"authLevel\": \"anonymous\" instead");
        return enforce;
    }

    /// <summary>
    /// A yes/no setting as operators and platforms write it: true/false or 1/0, in any case, around spaces; null for
    /// anything else. (The platform once set FAAST_ENFORCE_KEYS=1, which only "true" was taken for, and every instance
    /// it started beyond loopback refused to start: issue 19, defect 8.)
    /// </summary>
    public static bool? ParseFlag(string text) => text.Trim().ToLowerInvariant() switch
    {
        "true" or "1" => true,
        "false" or "0" => false,
        _ => null,
    };

    /// <summary>The key a request presents: the x-functions-key header if present (even empty), else the code query value (Azure's order).</summary>
    public static string? Presented(HttpRequest request)
    {
        if (request.Headers.TryGetValue(HeaderName, out var header))
            return header[0];
        return request.Query.TryGetValue(QueryName, out var code) ? code[0] : null;
    }

    /// <summary>
    /// Null when the request may call <paramref name="function"/> (null: the admin API, which needs the
    /// master key); otherwise why not, naming no key value.
    /// </summary>
    public string? Refusal(HttpRequest request, AuthLevel required, string? function)
    {
        if (!Enforced || required == AuthLevel.Anonymous)
            return null;
        var what = function is null ? "the admin API" : $"function {function}";
        var keys = Keys;
        if (keys is null)
            return $"{what} needs a key, and the host's keys are not loaded yet";
        var presented = Presented(request);
        if (string.IsNullOrEmpty(presented))
            return $"{what} needs a key (authLevel {Name(required)}): send it in the {HeaderName} header or the ?{QueryName}= query parameter";
        var level = keys.LevelOf(presented, function);
        if (level is null)
            return $"the key sent is not a key of {what}";
        if (level < required)
            return $"{what} needs {(required == AuthLevel.Admin ? "the master key" : required == AuthLevel.System ? "a system key or the master key" : "a function or host key")} " +
                $"(authLevel {Name(required)}); the key sent is a {Name(level.Value)}-level key";
        return null;
    }

    private static string Name(AuthLevel level) => level switch
    {
        AuthLevel.Anonymous => "anonymous",
        AuthLevel.Function => "function",
        AuthLevel.System => "system",
        _ => "admin",
    };
}
