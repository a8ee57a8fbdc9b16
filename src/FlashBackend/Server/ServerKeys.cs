using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// The server's state folder (0700): keys/admin (the FlashAdmin credential) and keys/tenant (the key tenant tokens are
/// MACed under), each 32 random bytes as hex, 0600, made at first start and kept, so a restarted server accepts the
/// same tokens; and tenants.json, each registered tenant's SLO, so a restart keeps its tenants.
/// </summary>
public sealed class ServerKeys
{
    /// <summary>The MAC's domain separation: a token for another purpose under the same key never verifies here.</summary>
    private const string TokenContext = "faast-flash-tenant/v1\n";

    private readonly byte[] _adminKey;    // the hex text's UTF-8 bytes, compared in constant time
    private readonly byte[] _tenantKey;   // the 32 raw bytes
    private readonly string _tenantsFile;

    private ServerKeys(string directory, byte[] adminKey, byte[] tenantKey)
    {
        Directory = directory;
        _adminKey = adminKey;
        _tenantKey = tenantKey;
        _tenantsFile = Path.Combine(directory, "tenants.json");
    }

    public string Directory { get; }

    public string AdminKeyPath => Path.Combine(Directory, "keys", "admin");

    /// <summary>Opens (making on first start) the state folder and its keys.</summary>
    public static ServerKeys Open(string directory)
    {
        if (OperatingSystem.IsWindows())
            throw new PlatformNotSupportedException("the flash server runs on Linux (O_DIRECT, Unix file modes)");
        string full = Path.GetFullPath(directory);
        const UnixFileMode owner = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
        System.IO.Directory.CreateDirectory(full, owner);
        File.SetUnixFileMode(full, owner);   // an existing folder is tightened too
        string keys = Path.Combine(full, "keys");
        System.IO.Directory.CreateDirectory(keys, owner);
        File.SetUnixFileMode(keys, owner);
        string admin = LoadOrCreate(Path.Combine(keys, "admin"));
        string tenant = LoadOrCreate(Path.Combine(keys, "tenant"));
        return new ServerKeys(full, Encoding.UTF8.GetBytes(admin), Convert.FromHexString(tenant));
    }

    private static string LoadOrCreate(string path)
    {
        if (!File.Exists(path))
        {
            string hex = Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(32));
            WriteAtomically(path, hex + "\n");
        }
        string text = File.ReadAllText(path).Trim();
        if (text.Length != 64 || !text.All(Uri.IsHexDigit))
            throw new InvalidDataException($"{path}: not a key (64 hex digits expected); delete it to make a new one (every token then changes)");
        return text.ToLowerInvariant();
    }

    /// <summary>Writes PATH.tmp (0600) and renames it over PATH, so a reader never sees half a file.</summary>
    internal static void WriteAtomically(string path, string text)
    {
        if (OperatingSystem.IsWindows())
            throw new PlatformNotSupportedException("the flash server runs on Linux (Unix file modes)");
        string temp = path + ".tmp";
        var create = new FileStreamOptions { Mode = FileMode.Create, Access = FileAccess.Write, UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite };
        using (var file = new FileStream(temp, create))
        {
            file.Write(Encoding.UTF8.GetBytes(text));
            file.Flush(flushToDisk: true);
        }
        File.Move(temp, path, overwrite: true);
    }

    /// <summary>Whether <paramref name="credential"/> is the admin key (constant time in its bytes).</summary>
    public bool IsAdminKey(string credential)
    {
        Span<byte> given = stackalloc byte[64];
        return credential.Length == 64 && Encoding.UTF8.GetBytes(credential, given) == 64
            && CryptographicOperations.FixedTimeEquals(given, _adminKey);
    }

    /// <summary>"&lt;tenant&gt;.&lt;hex HMAC-SHA256(tenant key, context + tenant)&gt;".</summary>
    public string TokenFor(string tenant)
    {
        Span<byte> mac = stackalloc byte[32];
        Mac(tenant, mac);
        return tenant + "." + Convert.ToHexStringLower(mac);
    }

    /// <summary>The token's verdict: <see cref="TokenCheck.Malformed"/> (not tenant.64-hex), <see cref="TokenCheck.BadMac"/>
    /// (not made by this server's key: compared in constant time), or <see cref="TokenCheck.Valid"/> with the tenant.</summary>
    public TokenCheck CheckToken(string credential, out string tenant)
    {
        tenant = "";
        int dot = credential.LastIndexOf('.');
        if (dot <= 0 || credential.Length - dot - 1 != 64)
            return TokenCheck.Malformed;
        Span<byte> given = stackalloc byte[32];
        if (Convert.FromHexString(credential.AsSpan(dot + 1), given, out _, out int written) != System.Buffers.OperationStatus.Done || written != 32)
            return TokenCheck.Malformed;
        string name = credential[..dot];
        Span<byte> expected = stackalloc byte[32];
        Mac(name, expected);
        if (!CryptographicOperations.FixedTimeEquals(given, expected))
            return TokenCheck.BadMac;
        tenant = name;
        return TokenCheck.Valid;
    }

    private void Mac(string tenant, Span<byte> mac)
    {
        byte[] message = Encoding.UTF8.GetBytes(TokenContext + tenant);
        HMACSHA256.HashData(_tenantKey, message, mac);
    }

    /// <summary>The tenants a previous run registered (empty at first start).</summary>
    public IReadOnlyList<TenantSpec> LoadTenants()
    {
        if (!File.Exists(_tenantsFile))
            return [];
        try
        {
            var list = JsonSerializer.Deserialize(File.ReadAllBytes(_tenantsFile), ServerJson.Default.ListPersistedTenant) ?? [];
            return list.Select(t => new TenantSpec(t.Tenant, t.IopsSlo, t.P95LatencyUs, t.ReadRatioHint)).ToList();
        }
        catch (JsonException e)
        {
            throw new InvalidDataException($"{_tenantsFile}: not a tenants file ({e.Message})", e);
        }
    }

    /// <summary>Replaces tenants.json with <paramref name="tenants"/> (atomically, 0600).</summary>
    public void SaveTenants(IEnumerable<TenantSpec> tenants)
    {
        var list = tenants.OrderBy(t => t.Name, StringComparer.Ordinal)
            .Select(t => new PersistedTenant(t.Name, t.IopsSlo, t.P95LatencyUs, t.ReadRatioHint)).ToList();
        WriteAtomically(_tenantsFile, JsonSerializer.Serialize(list, ServerJson.Default.ListPersistedTenant));
    }
}

public enum TokenCheck
{
    Valid,
    Malformed,
    BadMac,
}

/// <summary>One line of tenants.json.</summary>
public sealed record PersistedTenant(string Tenant, double IopsSlo, int P95LatencyUs, double? ReadRatioHint);

[System.Text.Json.Serialization.JsonSerializable(typeof(List<PersistedTenant>))]
[System.Text.Json.Serialization.JsonSourceGenerationOptions(WriteIndented = true, PropertyNamingPolicy = System.Text.Json.Serialization.JsonKnownNamingPolicy.SnakeCaseLower)]
internal sealed partial class ServerJson : System.Text.Json.Serialization.JsonSerializerContext;
