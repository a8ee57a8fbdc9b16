using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace FaaST.Storage;

/// <summary>
/// The credential part of a storage connection string, for what the SDK does not answer: the peer secret derived
/// from the account key or SAS, and whether the key is the emulator's public one. Endpoints and the full
/// validation of a connection string are the Azure SDK's (<see cref="BlobStore"/>). Errors never repeat a value.
/// </summary>
public sealed class StorageConnectionString
{
    /// <summary>The account name of the storage emulator (Azurite).</summary>
    public const string DevelopmentAccountName = "devstoreaccount1";

    /// <summary>The well-known, public account key of the storage emulator (Azurite).</summary>
    public const string DevelopmentAccountKey =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    private StorageConnectionString(string? accountName, byte[]? accountKey, string? sharedAccessSignature, bool isDevelopmentStorage)
    {
        AccountName = accountName;
        AccountKey = accountKey;
        SharedAccessSignature = sharedAccessSignature;
        IsDevelopmentStorage = isDevelopmentStorage;
    }

    /// <summary>The account name, when the string has one (always for development storage).</summary>
    public string? AccountName { get; }

    /// <summary>The SAS token (without a leading '?'), when the string has one.</summary>
    public string? SharedAccessSignature { get; }

    /// <summary>True for <c>UseDevelopmentStorage=true</c>.</summary>
    public bool IsDevelopmentStorage { get; }

    /// <summary>True when the string carries an account key.</summary>
    public bool HasAccountKey => AccountKey is not null;

    /// <summary>True when the account key is the emulator's well-known one (anyone can sign with it).</summary>
    public bool UsesPublicDevelopmentKey => IsDevelopmentStorage ||
        (AccountKey is { } key && key.AsSpan().SequenceEqual(Convert.FromBase64String(DevelopmentAccountKey)));

    /// <summary>The decoded account key; internal so that it never leaks through the public surface.</summary>
    internal byte[]? AccountKey { get; }

    /// <summary>
    /// A key for <paramref name="purpose"/> derived from this account's credential (HMAC-SHA256 of the purpose
    /// under the account key or SAS), so that processes sharing the account share a secret without the
    /// credential itself going anywhere. Null for a connection without either.
    /// </summary>
    public byte[]? DeriveKey(string purpose)
    {
        var credential = AccountKey ?? (SharedAccessSignature is { } sas ? Encoding.UTF8.GetBytes(sas) : null);
        return credential is null ? null : HMACSHA256.HashData(credential, Encoding.UTF8.GetBytes(purpose));
    }

    /// <summary>
    /// The connection string of an Azurite blob service listening on <paramref name="host"/>:<paramref name="port"/>
    /// with the default development account.
    /// </summary>
    public static string ForAzurite(int port, string host = "127.0.0.1")
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(port, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(port, 65535);
        ArgumentException.ThrowIfNullOrWhiteSpace(host);
        return string.Create(CultureInfo.InvariantCulture,
            $"DefaultEndpointsProtocol=http;AccountName={DevelopmentAccountName};AccountKey={DevelopmentAccountKey};BlobEndpoint=http://{host}:{port}/{DevelopmentAccountName};");
    }

    /// <summary>
    /// Reads AccountName, AccountKey, SharedAccessSignature and UseDevelopmentStorage out of a connection string;
    /// every other key is left to the SDK. Throws <see cref="ArgumentException"/> naming what is malformed.
    /// </summary>
    public static StorageConnectionString Parse(string connectionString)
    {
        ArgumentNullException.ThrowIfNull(connectionString);
        string? accountName = null, accountKey = null, sas = null;
        var development = false;
        var segmentIndex = 0;
        foreach (var rawSegment in connectionString.Split(';'))
        {
            segmentIndex++;
            var segment = rawSegment.Trim();
            if (segment.Length == 0)
            {
                continue;
            }

            var eq = segment.IndexOf('=', StringComparison.Ordinal);
            if (eq <= 0)
            {
                // Do not echo the segment: it may be a secret pasted without its key.
                throw new ArgumentException(string.Create(CultureInfo.InvariantCulture,
                    $"Segment {segmentIndex} of the storage connection string is not of the form Key=Value."), nameof(connectionString));
            }

            var value = segment[(eq + 1)..].Trim();
            switch (segment[..eq].Trim().ToUpperInvariant())
            {
                case "ACCOUNTNAME": accountName = value; break;
                case "ACCOUNTKEY": accountKey = value; break;
                case "SHAREDACCESSSIGNATURE": sas = value.TrimStart('?'); break;
                case "USEDEVELOPMENTSTORAGE": development = string.Equals(value, "true", StringComparison.OrdinalIgnoreCase); break;
            }
        }

        if (development)
        {
            return new StorageConnectionString(DevelopmentAccountName, Convert.FromBase64String(DevelopmentAccountKey), null, true);
        }

        byte[]? key = null;
        if (!string.IsNullOrEmpty(accountKey))
        {
            key = new byte[(accountKey.Length * 3 / 4) + 3];
            if (!Convert.TryFromBase64String(accountKey, key, out var written) || written == 0)
            {
                throw new ArgumentException("AccountKey in the storage connection string is not valid base64.", nameof(connectionString));
            }

            key = key.AsSpan(0, written).ToArray();
        }

        return new StorageConnectionString(string.IsNullOrEmpty(accountName) ? null : accountName, key,
            string.IsNullOrEmpty(sas) ? null : sas, false);
    }

    /// <summary>
    /// True when a connection string reaches the service whose endpoint key is <paramref name="endpointKey"/>
    /// (QueueEndpoint, TableEndpoint): it names that endpoint, is development storage, or lets the SDK derive one (an
    /// account name without explicit service endpoints).
    /// </summary>
    public static bool ReachesService(string connectionString, string endpointKey)
    {
        var keys = connectionString.Split(';', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries)
            .Select(p => p.Split('=', 2)[0].Trim())
            .ToHashSet(StringComparer.OrdinalIgnoreCase);
        if (keys.Contains(endpointKey) || keys.Contains("UseDevelopmentStorage"))
            return true;
        return !keys.Contains("BlobEndpoint") && keys.Contains("AccountName");
    }

    /// <summary>
    /// True when <paramref name="connectionString"/> signs with the emulator's public key (or is
    /// UseDevelopmentStorage=true); false for anything else, a malformed string included (that is reported
    /// where the storage is opened).
    /// </summary>
    public static bool IsPublicDevelopmentKey(string? connectionString)
    {
        if (string.IsNullOrWhiteSpace(connectionString))
        {
            return false;
        }

        try
        {
            return Parse(connectionString).UsesPublicDevelopmentKey;
        }
        catch (ArgumentException)
        {
            return false;
        }
    }

    /// <summary>
    /// Why the SDK refuses (or would fail on) <paramref name="connectionString"/>, in words that name the key: the
    /// SDK's own message ("No valid combination of account information found") does not say what is missing.
    /// Null when nothing here is wrong. Values are never repeated.
    /// </summary>
    internal static string? Explain(string connectionString)
    {
        var keys = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        var index = 0;
        foreach (var rawSegment in connectionString.Split(';'))
        {
            index++;
            var segment = rawSegment.Trim();
            var eq = segment.IndexOf('=', StringComparison.Ordinal);
            if (eq <= 0)
            {
                continue; // Parse reports it
            }

            var key = segment[..eq].Trim();
            if (KnownKeys.TryGetValue(key, out var canonical) && !string.Equals(segment[..eq], canonical, StringComparison.Ordinal))
            {
                return $"the key '{key}' must be written '{canonical}' (exactly, without spaces around it)";
            }

            if (!KnownKeys.Contains(key))
            {
                // A value pasted without its key may contain '=' (base64 padding): only echo names that look like keys.
                return key.Length <= 40 && key.All(char.IsAsciiLetter)
                    ? $"it has an unknown key '{key}'"
                    : string.Create(CultureInfo.InvariantCulture, $"segment {index} has an unknown key (not shown: it may be a secret)");
            }

            if (!keys.TryAdd(key, segment[(eq + 1)..].Trim()))
            {
                return $"{key} appears more than once";
            }
        }

        string? Get(string key) => keys.TryGetValue(key, out var v) && v.Length > 0 ? v : null;
        if (keys.TryGetValue("UseDevelopmentStorage", out var dev))
        {
            if (!dev.Equals("true", StringComparison.OrdinalIgnoreCase))
            {
                return "UseDevelopmentStorage must be true when present";
            }

            var other = keys.Keys.FirstOrDefault(k => !k.Equals("UseDevelopmentStorage", StringComparison.OrdinalIgnoreCase)
                && !k.Equals("DevelopmentStorageProxyUri", StringComparison.OrdinalIgnoreCase));
            return other is null ? null : $"{other} cannot be combined with UseDevelopmentStorage=true";
        }

        if (keys.ContainsKey("DevelopmentStorageProxyUri"))
        {
            return "DevelopmentStorageProxyUri is only valid together with UseDevelopmentStorage=true";
        }

        if (Get("EndpointSuffix") is { } suffix && (suffix.Contains('/', StringComparison.Ordinal) || Uri.CheckHostName("x." + suffix) != UriHostNameType.Dns))
        {
            return "EndpointSuffix is not a DNS suffix such as core.windows.net";
        }

        foreach (var endpoint in (string[])["BlobEndpoint", "DevelopmentStorageProxyUri"])
        {
            if (Get(endpoint) is { } text && (!Uri.TryCreate(text, UriKind.Absolute, out var uri) || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps)))
            {
                return $"{endpoint} is not an absolute http(s) URI";
            }
        }

        if (Get("DefaultEndpointsProtocol") is { } protocol && !protocol.Equals("http", StringComparison.OrdinalIgnoreCase)
            && !protocol.Equals("https", StringComparison.OrdinalIgnoreCase))
        {
            return "DefaultEndpointsProtocol must be http or https";
        }

        var (name, accountKey, sas) = (Get("AccountName"), Get("AccountKey"), Get("SharedAccessSignature"));
        if (keys.ContainsKey("AccountName") && name is null)
        {
            return "AccountName is empty";
        }

        return (name, accountKey, sas) switch
        {
            (_, not null, not null) => "it has both AccountKey and SharedAccessSignature; give only one of them",
            (null, not null, _) => "it has an AccountKey but no AccountName",
            (not null, null, null) => "it has an AccountName but no AccountKey (nor a SharedAccessSignature)",
            (null, null, null) => "it has no account: give AccountName and AccountKey (with DefaultEndpointsProtocol), " +
                "BlobEndpoint with SharedAccessSignature, or UseDevelopmentStorage=true",
            (not null, not null, null) when Get("BlobEndpoint") is null && Get("DefaultEndpointsProtocol") is null =>
                "it has neither DefaultEndpointsProtocol (http or https) nor BlobEndpoint",
            (null, null, not null) when Get("BlobEndpoint") is null => "it has a SharedAccessSignature but neither AccountName nor BlobEndpoint",
            _ => null,
        };
    }

    /// <summary>The keys the SDK reads (the endpoints of other services are accepted and not used here).</summary>
    private static readonly HashSet<string> KnownKeys = new(StringComparer.OrdinalIgnoreCase)
    {
        "UseDevelopmentStorage", "DevelopmentStorageProxyUri", "DefaultEndpointsProtocol", "AccountName", "AccountKey",
        "BlobEndpoint", "QueueEndpoint", "TableEndpoint", "FileEndpoint", "EndpointSuffix", "SharedAccessSignature",
        "BlobSecondaryEndpoint", "QueueSecondaryEndpoint", "TableSecondaryEndpoint", "FileSecondaryEndpoint",
    };

    /// <summary>Describes the connection without any secret (for logs).</summary>
    public override string ToString()
    {
        var auth = HasAccountKey ? "SharedKey" : SharedAccessSignature is not null ? "SAS" : "anonymous";
        return $"AccountName={AccountName}; Auth={auth}";
    }
}
