using System.Collections;
using System.Text.Json;

namespace FaaST.AppModel;

/// <summary>
/// App settings: the "Values" of local.settings.json, overridden by environment variables
/// (as in Azure Functions). Handed to the workers as their environment.
/// </summary>
public sealed class AppSettings
{
    private readonly Dictionary<string, string> _values;

    public AppSettings(IDictionary<string, string> values) =>
        _values = new Dictionary<string, string>(values, StringComparer.OrdinalIgnoreCase);

    public IReadOnlyDictionary<string, string> Values => _values;

    /// <summary>The HTTP port local.settings.json asks for (Host.LocalHttpPort), if any.</summary>
    public int? LocalHttpPort { get; private init; }

    public string? this[string name] => _values.TryGetValue(name, out var v) ? v : null;

    /// <summary>local.settings.json's path (whether or not it exists).</summary>
    public string FilePath { get; private init; } = "local.settings.json";

    private HashSet<string> _fromEnvironment = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>Where setting <paramref name="name"/> came from, for errors: the file and key, or the environment variable.</summary>
    public string SourceOf(string name) => _fromEnvironment.Contains(name)
        ? $"environment variable {name}"
        : $"{FilePath}: Values.{name}";

    /// <summary>FUNCTIONS_WORKER_PROCESS_COUNT, if set (checked at load: 1 to <see cref="MaxWorkerProcessCount"/>).</summary>
    public int? WorkerProcessCount { get; private init; }

    /// <summary>FUNCTIONS_REQUEST_BODY_SIZE_LIMIT in bytes, if set (checked at load: 1 to <see cref="MaxRequestBodySizeLimit"/>).</summary>
    public long? RequestBodySizeLimit { get; private init; }

    /// <summary>FAAST_BLOB_LEASE_SECONDS, if set (checked at load: 15 to 60, the service's range): how long a blob-trigger
    /// receipt's lease lasts, i.e. how soon another instance takes a blob whose instance died (default 60, as Azure's).</summary>
    public int? BlobLeaseSeconds { get; private init; }

    /// <summary>The most worker processes per instance (as --workers).</summary>
    public const int MaxWorkerProcessCount = 64;

    /// <summary>The largest request body limit: a body travels to the worker in one gRPC message,
    /// which the worker channel caps at 1 GiB.</summary>
    public const long MaxRequestBodySizeLimit = 1L << 30;

    public static AppSettings Load(string appDirectory, IDictionary? environment = null)
    {
        var values = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        var fromEnvironment = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        int? port = null;
        var file = Path.Combine(appDirectory, "local.settings.json");
        if (File.Exists(file))
        {
            using var doc = AppJson.Parse(file);
            var root = doc.RootElement;
            if (root.ValueKind != JsonValueKind.Object)
                throw new AppConfigException($"{file}: the top level must be a JSON object");
            if (root.TryGetProperty("IsEncrypted", out var enc) && enc.ValueKind == JsonValueKind.True)
                throw new AppConfigException($"{file}: IsEncrypted is true, but FaaST reads only unencrypted settings");
            if (root.TryGetProperty("Values", out var v))
            {
                if (v.ValueKind != JsonValueKind.Object)
                    throw new AppConfigException($"{file}: \"Values\" must be an object of name/value strings");
                foreach (var p in v.EnumerateObject())
                {
                    values[p.Name] = p.Value.ValueKind switch
                    {
                        JsonValueKind.String => p.Value.GetString()!,
                        JsonValueKind.Number or JsonValueKind.True or JsonValueKind.False => p.Value.GetRawText(),
                        _ => throw new AppConfigException($"{file}: Values.{p.Name} must be a string, not {p.Value.ValueKind}"),
                    };
                }
            }
            if (root.TryGetProperty("Host", out var host) && host.ValueKind == JsonValueKind.Object &&
                host.TryGetProperty("LocalHttpPort", out var lp))
            {
                if (lp.ValueKind != JsonValueKind.Number || !lp.TryGetInt32(out var p) || p is < 1 or > 65535)
                    throw new AppConfigException($"{file}: Host.LocalHttpPort must be a port number (1-65535)");
                port = p;
            }
        }
        environment ??= Environment.GetEnvironmentVariables();
        foreach (DictionaryEntry e in environment)
        {
            var name = (string)e.Key;
            if (values.ContainsKey(name) && e.Value is string s)
            {
                values[name] = s;
                fromEnvironment.Add(name);
            }
        }
        // Settings only in the environment still count (AzureWebJobsStorage, worker settings).
        foreach (var name in EnvironmentOnlySettings)
            if (!values.ContainsKey(name) && environment[name] is string s)
            {
                values[name] = s;
                fromEnvironment.Add(name);
            }
        // So do identity-based connections (CONN__serviceUri, ...), whatever the connection is called,
        // and access keys (host.master, functions.NAME.default, ...: a Kubernetes secret as variables).
        foreach (DictionaryEntry e in environment)
            if (e.Key is string name && e.Value is string s && !values.ContainsKey(name) && (IsIdentityConnectionSetting(name) || AuthSettings.IsKeySetting(name)))
            {
                values[name] = s;
                fromEnvironment.Add(name);
            }
        var settings = new AppSettings(values) { LocalHttpPort = port, FilePath = file, _fromEnvironment = fromEnvironment };
        // Checked now, not where they are used: junk here used to fall back to the default silently.
        return new AppSettings(values)
        {
            LocalHttpPort = port, FilePath = file, _fromEnvironment = fromEnvironment,
            WorkerProcessCount = (int?)settings.WholeNumber("FUNCTIONS_WORKER_PROCESS_COUNT", 1, MaxWorkerProcessCount, "worker processes"),
            RequestBodySizeLimit = settings.WholeNumber("FUNCTIONS_REQUEST_BODY_SIZE_LIMIT", 1, MaxRequestBodySizeLimit, "bytes"),
            BlobLeaseSeconds = (int?)settings.WholeNumber("FAAST_BLOB_LEASE_SECONDS", 15, 60, "seconds"),
        };
    }

    /// <summary>Setting <paramref name="name"/> as a whole number in [min, max]; null when unset.</summary>
    private long? WholeNumber(string name, long min, long max, string unit)
    {
        var text = this[name];
        if (text is null)
            return null;
        if (!long.TryParse(text.Trim(), System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out var n) ||
            n < min || n > max)
            throw new AppConfigException(
                $"{SourceOf(name)} is \"{LogText.Escape(text)}\"; it must be a whole number of {unit} from {min} to {max}");
        return n;
    }

    private static bool IsIdentityConnectionSetting(string name)
    {
        var separator = name.LastIndexOf("__", StringComparison.Ordinal);
        return separator > 0 && IdentityConnectionSuffixes.Contains(name[(separator + 2)..], StringComparer.OrdinalIgnoreCase);
    }

    private static readonly string[] IdentityConnectionSuffixes =
        ["serviceUri", "blobServiceUri", "queueServiceUri", "tableServiceUri", "accountName", "credential", "clientId", "tenantId", "clientSecret", "certificate"];

    private static readonly string[] EnvironmentOnlySettings =
    [
        "AzureWebJobsStorage", "FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_WORKER_PROCESS_COUNT",
        "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT", "PYTHON_THREADPOOL_THREAD_COUNT", "FAAST_PEER_SECRET",
        "FAAST_BLOB_LEASE_SECONDS",
        "FAAST_ENFORCE_KEYS", "AzureWebJobsSecretStorageType", "AzureFunctionsWebHost__hostid",
    ];
}
