using System.Globalization;

namespace FaaST.Storage;

/// <summary>
/// A parsed Azure Storage connection string, reduced to what the blob client needs.
/// Supported keys (case-insensitive): <c>UseDevelopmentStorage</c>, <c>DevelopmentStorageProxyUri</c>,
/// <c>DefaultEndpointsProtocol</c>, <c>AccountName</c>, <c>AccountKey</c>, <c>BlobEndpoint</c>,
/// <c>EndpointSuffix</c> and <c>SharedAccessSignature</c>; the endpoints of the other services
/// (<c>QueueEndpoint</c>, <c>TableEndpoint</c>, <c>FileEndpoint</c>, secondary endpoints) are accepted and ignored.
/// Error messages name the offending key but never repeat a value, since values may be secrets.
/// </summary>
public sealed class StorageConnectionString
{
    /// <summary>The account name of the storage emulator (Azurite).</summary>
    public const string DevelopmentAccountName = "devstoreaccount1";

    /// <summary>The well-known, public account key of the storage emulator (Azurite).</summary>
    public const string DevelopmentAccountKey =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    private const string DefaultEndpointSuffix = "core.windows.net";

    private StorageConnectionString(Uri blobEndpoint, string? accountName, byte[]? accountKey,
        string? sharedAccessSignature, bool isDevelopmentStorage)
    {
        BlobEndpoint = blobEndpoint;
        AccountName = accountName;
        AccountKey = accountKey;
        SharedAccessSignature = sharedAccessSignature;
        IsDevelopmentStorage = isDevelopmentStorage;
    }

    /// <summary>The account's blob endpoint without a trailing slash, e.g. http://127.0.0.1:10000/devstoreaccount1.</summary>
    public Uri BlobEndpoint { get; }

    /// <summary>The account name (always set when an account key is).</summary>
    public string? AccountName { get; }

    /// <summary>The SAS token (without a leading '?') appended to every request, when the string has one.</summary>
    public string? SharedAccessSignature { get; }

    /// <summary>True for <c>UseDevelopmentStorage=true</c>.</summary>
    public bool IsDevelopmentStorage { get; }

    /// <summary>True when requests are signed with the account key (SharedKey).</summary>
    public bool HasAccountKey => AccountKey is not null;

    /// <summary>True when the account key is the emulator's well-known one (anyone can sign with it).</summary>
    public bool UsesPublicDevelopmentKey => IsDevelopmentStorage ||
        (AccountKey is { } key && key.AsSpan().SequenceEqual(Convert.FromBase64String(DevelopmentAccountKey)));

    /// <summary>The decoded account key; internal so that it never leaks through the public surface.</summary>
    internal byte[]? AccountKey { get; }

    /// <summary>
    /// A key for <paramref name="purpose"/> derived from this account's credential (HMAC-SHA256 of the purpose
    /// under the account key or SAS), so that processes sharing the account share a secret without the
    /// credential itself going anywhere. Null for an anonymous connection.
    /// </summary>
    public byte[]? DeriveKey(string purpose)
    {
        var credential = AccountKey ?? (SharedAccessSignature is { } sas ? System.Text.Encoding.UTF8.GetBytes(sas) : null);
        return credential is null ? null : System.Security.Cryptography.HMACSHA256.HashData(credential, System.Text.Encoding.UTF8.GetBytes(purpose));
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

    /// <summary>Parses a connection string; throws <see cref="ArgumentException"/> naming the key that is wrong or missing.</summary>
    public static StorageConnectionString Parse(string connectionString)
    {
        ArgumentNullException.ThrowIfNull(connectionString);
        if (string.IsNullOrWhiteSpace(connectionString))
        {
            throw Bad("The storage connection string is empty.");
        }

        string? useDev = null, proxyUri = null, protocol = null, accountName = null, accountKey = null;
        string? blobEndpoint = null, endpointSuffix = null, sas = null;

        var segmentIndex = 0;
        foreach (var rawSegment in connectionString.Split(';'))
        {
            segmentIndex++;
            var segment = rawSegment.Trim();
            if (segment.Length == 0)
            {
                continue;
            }

            var eq = segment.IndexOf('=');
            if (eq <= 0)
            {
                // Do not echo the segment: it may be a secret pasted without its key.
                throw Bad(string.Create(CultureInfo.InvariantCulture,
                    $"Segment {segmentIndex} of the storage connection string is not of the form Key=Value."));
            }

            var key = segment[..eq].Trim();
            var value = segment[(eq + 1)..].Trim();
            switch (key.ToUpperInvariant())
            {
                case "USEDEVELOPMENTSTORAGE": Set(ref useDev, "UseDevelopmentStorage", value); break;
                case "DEVELOPMENTSTORAGEPROXYURI": Set(ref proxyUri, "DevelopmentStorageProxyUri", value); break;
                case "DEFAULTENDPOINTSPROTOCOL": Set(ref protocol, "DefaultEndpointsProtocol", value); break;
                case "ACCOUNTNAME": Set(ref accountName, "AccountName", value); break;
                case "ACCOUNTKEY": Set(ref accountKey, "AccountKey", value); break;
                case "BLOBENDPOINT": Set(ref blobEndpoint, "BlobEndpoint", value); break;
                case "ENDPOINTSUFFIX": Set(ref endpointSuffix, "EndpointSuffix", value); break;
                case "SHAREDACCESSSIGNATURE": Set(ref sas, "SharedAccessSignature", value); break;
                case "QUEUEENDPOINT" or "TABLEENDPOINT" or "FILEENDPOINT" or "DFSENDPOINT"
                    or "BLOBSECONDARYENDPOINT" or "QUEUESECONDARYENDPOINT" or "TABLESECONDARYENDPOINT"
                    or "FILESECONDARYENDPOINT" or "DFSSECONDARYENDPOINT" or "ACCOUNTKEYNAME":
                    break; // other services: not ours
                default:
                    // A value pasted without its key may contain '=' (base64 padding): only echo names that look like keys.
                    throw Bad(IsPlainName(key)
                        ? $"The storage connection string has an unknown key '{key}'."
                        : string.Create(CultureInfo.InvariantCulture,
                            $"Segment {segmentIndex} of the storage connection string has an unknown key (not shown: it may be a secret)."));
            }
        }

        if (useDev is not null)
        {
            return ParseDevelopment(useDev, proxyUri, protocol, accountName, accountKey, blobEndpoint, endpointSuffix, sas);
        }

        if (proxyUri is not null)
        {
            throw Bad("DevelopmentStorageProxyUri is only valid together with UseDevelopmentStorage=true.");
        }

        if (accountKey is not null && sas is not null)
        {
            throw Bad("The storage connection string has both AccountKey and SharedAccessSignature; give only one of them.");
        }

        byte[]? keyBytes = null;
        if (accountKey is not null)
        {
            if (accountName is null)
            {
                throw Bad("The storage connection string has an AccountKey but no AccountName.");
            }

            keyBytes = DecodeKey(accountKey);
        }

        if (accountName is not null && accountName.Length == 0)
        {
            throw Bad("AccountName in the storage connection string is empty.");
        }

        if (sas is not null)
        {
            sas = sas.TrimStart('?');
            if (sas.Length == 0)
            {
                throw Bad("SharedAccessSignature in the storage connection string is empty.");
            }
        }

        Uri endpoint;
        if (blobEndpoint is not null)
        {
            endpoint = ParseEndpoint(blobEndpoint, "BlobEndpoint");
        }
        else
        {
            if (accountName is null)
            {
                throw Bad("The storage connection string has neither AccountName nor BlobEndpoint.");
            }

            var scheme = protocol is null ? "https" : ParseProtocol(protocol);
            var suffix = endpointSuffix ?? DefaultEndpointSuffix;
            if (suffix.Length == 0 || suffix.Contains('/', StringComparison.Ordinal)
                || Uri.CheckHostName("x." + suffix) != UriHostNameType.Dns)
            {
                throw Bad("EndpointSuffix in the storage connection string is not a DNS suffix such as core.windows.net.");
            }

            if (Uri.CheckHostName(accountName) != UriHostNameType.Dns || accountName.Contains('.', StringComparison.Ordinal))
            {
                throw Bad("AccountName in the storage connection string cannot form a host name (use lowercase letters and digits).");
            }

            endpoint = new Uri($"{scheme}://{accountName}.blob.{suffix}", UriKind.Absolute);
        }

        if (protocol is not null)
        {
            _ = ParseProtocol(protocol); // validate even when BlobEndpoint makes it unused
        }

        if (keyBytes is null && sas is null && accountName is not null)
        {
            throw Bad("The storage connection string has an AccountName but no AccountKey (nor a SharedAccessSignature).");
        }

        return new StorageConnectionString(endpoint, accountName, keyBytes, sas, isDevelopmentStorage: false);
    }

    /// <summary>Describes the connection without any secret (for logs).</summary>
    public override string ToString()
    {
        var auth = HasAccountKey ? "SharedKey" : SharedAccessSignature is not null ? "SAS" : "anonymous";
        return $"BlobEndpoint={BlobEndpoint}; AccountName={AccountName}; Auth={auth}";
    }

    private static StorageConnectionString ParseDevelopment(string useDev, string? proxyUri, string? protocol,
        string? accountName, string? accountKey, string? blobEndpoint, string? endpointSuffix, string? sas)
    {
        if (!string.Equals(useDev, "true", StringComparison.OrdinalIgnoreCase))
        {
            throw Bad("UseDevelopmentStorage must be 'true' when present.");
        }

        var conflicting = accountName is not null ? "AccountName"
            : accountKey is not null ? "AccountKey"
            : blobEndpoint is not null ? "BlobEndpoint"
            : endpointSuffix is not null ? "EndpointSuffix"
            : sas is not null ? "SharedAccessSignature"
            : protocol is not null ? "DefaultEndpointsProtocol"
            : null;
        if (conflicting is not null)
        {
            throw Bad($"{conflicting} cannot be combined with UseDevelopmentStorage=true; give the full connection string instead.");
        }

        Uri endpoint;
        if (proxyUri is null)
        {
            endpoint = new Uri("http://127.0.0.1:10000/" + DevelopmentAccountName, UriKind.Absolute);
        }
        else
        {
            var proxy = ParseEndpoint(proxyUri, "DevelopmentStorageProxyUri");
            endpoint = new UriBuilder(proxy) { Port = 10000, Path = DevelopmentAccountName, Query = string.Empty }.Uri;
        }

        return new StorageConnectionString(endpoint, DevelopmentAccountName,
            Convert.FromBase64String(DevelopmentAccountKey), null, isDevelopmentStorage: true);
    }

    private static void Set(ref string? slot, string key, string value)
    {
        if (slot is not null)
        {
            throw Bad($"{key} appears more than once in the storage connection string.");
        }

        if (value.Length == 0)
        {
            throw Bad($"{key} in the storage connection string is empty.");
        }

        slot = value;
    }

    private static byte[] DecodeKey(string accountKey)
    {
        var buffer = new byte[(accountKey.Length * 3 / 4) + 3];
        if (!Convert.TryFromBase64String(accountKey, buffer, out var written) || written == 0)
        {
            throw Bad("AccountKey in the storage connection string is not valid base64.");
        }

        return buffer.AsSpan(0, written).ToArray();
    }

    private static string ParseProtocol(string protocol) => protocol.ToUpperInvariant() switch
    {
        "HTTP" => "http",
        "HTTPS" => "https",
        _ => throw Bad("DefaultEndpointsProtocol in the storage connection string must be http or https."),
    };

    private static Uri ParseEndpoint(string value, string key)
    {
        if (!Uri.TryCreate(value, UriKind.Absolute, out var uri)
            || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps))
        {
            throw Bad($"{key} in the storage connection string is not an absolute http(s) URI.");
        }

        if (uri.Query.Length > 0 || uri.Fragment.Length > 0)
        {
            throw Bad($"{key} in the storage connection string must not have a query or fragment (put a SAS in SharedAccessSignature).");
        }

        if (uri.UserInfo.Length > 0)
        {
            throw Bad($"{key} in the storage connection string must not contain user information.");
        }

        var text = uri.GetLeftPart(UriPartial.Path).TrimEnd('/');
        return new Uri(text, UriKind.Absolute);
    }

    private static bool IsPlainName(string key)
    {
        if (key.Length > 40)
        {
            return false;
        }

        foreach (var c in key)
        {
            if (!char.IsAsciiLetter(c))
            {
                return false;
            }
        }

        return true;
    }

    private static ArgumentException Bad(string message) => new(message, "connectionString");
}
