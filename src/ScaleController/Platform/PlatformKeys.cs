using System.Security.Cryptography;
using System.Text;
using FaaST.Storage;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform's secrets (issue 19). Two random keys, each made once and kept 0600 in a 0700 folder of the
/// platform's state directory, readable only by the platform's user:
/// <list type="bullet">
/// <item><c>keys/master</c>: never leaves the platform process. Every other secret is derived from it with
/// HKDF-SHA256 (RFC 5869) under a label naming its purpose and app, so no two apps and no two purposes share a key,
/// and a secret handed to one app says nothing of the master or of another app's secret.</item>
/// <item><c>keys/admin</c>: the operator's credential for deploy and every <c>/admin/platform</c> endpoint, sent as
/// <c>Authorization: Bearer KEY</c>. Kept apart from the master so it can be rotated (delete the file, restart)
/// without changing any app's peer secret or invalidating the signed records.</item>
/// </list>
/// Derived: <see cref="PeerSecretOf"/> (the app's instances and its vote queries), <see cref="DeployKeyOf"/> (the app
/// owner's deploy credential: deploys under that app's name only) and the key that signs the platform's records in
/// storage (<see cref="Sign"/>: app.json and instance records).
/// </summary>
public sealed class PlatformKeys
{
    private const int KeyBytes = 32;
    private readonly byte[] _master;
    private readonly byte[] _adminKey;
    private readonly byte[] _recordsKey;

    private PlatformKeys(byte[] master, string adminKey)
    {
        _master = master;
        AdminKey = adminKey;
        _adminKey = Encoding.UTF8.GetBytes(adminKey);
        _recordsKey = Derive("records", "");
    }

    /// <summary>The admin key (base64url text).</summary>
    public string AdminKey { get; }

    /// <summary>Where the admin key is kept under a state directory.</summary>
    public static string AdminKeyFile(string stateDirectory) => Path.Combine(stateDirectory, "keys", "admin");

    /// <summary>Where the master key is kept under a state directory (unless the operator gives a file of its own).</summary>
    public static string MasterKeyFile(string stateDirectory) => Path.Combine(stateDirectory, "keys", "master");

    /// <summary>
    /// Reads the platform's keys from <paramref name="stateDirectory"/>, making each that is missing (random, 0600, in a
    /// 0700 folder). <paramref name="masterKeyFile"/>: the operator's own master key (several platform processes
    /// sharing one storage account must share it: a Kubernetes secret mounted as a file); base64 of at least 32 bytes.
    /// </summary>
    /// <exception cref="InvalidDataException">A key file exists but does not hold a usable key; the message names it.</exception>
    public static PlatformKeys LoadOrCreate(string stateDirectory, string? masterKeyFile = null)
    {
        ArgumentNullException.ThrowIfNull(stateDirectory);
        PrivateFiles.CreateDirectory(Path.Combine(stateDirectory, "keys"));
        var masterFile = masterKeyFile ?? MasterKeyFile(stateDirectory);
        string masterText;
        if (masterKeyFile is not null)
        {
            if (!File.Exists(masterKeyFile))
                throw new InvalidDataException($"{masterKeyFile}: the master key file does not exist");
            masterText = File.ReadAllText(masterKeyFile).Trim();
        }
        else
        {
            masterText = PrivateFiles.ReadOrCreate(masterFile, () => Convert.ToBase64String(RandomNumberGenerator.GetBytes(KeyBytes))).Trim();
        }
        byte[] master;
        try
        {
            master = Convert.FromBase64String(masterText);
        }
        catch (FormatException)
        {
            throw new InvalidDataException($"{masterFile}: the master key must be base64 (of at least {KeyBytes} random bytes)");
        }
        if (master.Length < KeyBytes)
            throw new InvalidDataException($"{masterFile}: the master key has {master.Length} bytes; it needs at least {KeyBytes}");
        var admin = PrivateFiles.ReadOrCreate(AdminKeyFile(stateDirectory), NewKeyText).Trim();
        if (admin.Length < 32)
            throw new InvalidDataException($"{AdminKeyFile(stateDirectory)}: the admin key is {admin.Length} characters; it needs at least 32 (delete the file to make a new one)");
        return new PlatformKeys(master, admin);
    }

    /// <summary>Keys held in memory only (unit tests; a platform that must not write its state directory).</summary>
    public static PlatformKeys Ephemeral() => new(RandomNumberGenerator.GetBytes(KeyBytes), NewKeyText());

    /// <summary>A new random key as base64url text (no padding): safe in a header, a file and a URL.</summary>
    public static string NewKeyText() => Base64Url(RandomNumberGenerator.GetBytes(KeyBytes));

    /// <summary>True when <paramref name="presented"/> is the admin key (compared in constant time).</summary>
    public bool IsAdminKey(string? presented) => presented is not null && FixedTimeEquals(_adminKey, presented);

    /// <summary>The app's peer secret: what its instances share (FAAST_PEER_SECRET) and the controller signs vote queries with.</summary>
    public string PeerSecretOf(string app) => Convert.ToBase64String(Derive("peer", app));

    /// <summary>The app owner's deploy key: deploys (and reads the status of) that app only.</summary>
    public string DeployKeyOf(string app) => Base64Url(Derive("deploy", app));

    /// <summary>True when <paramref name="presented"/> is <paramref name="app"/>'s deploy key (constant time).</summary>
    public bool IsDeployKey(string app, string? presented) =>
        presented is not null && FixedTimeEquals(Encoding.UTF8.GetBytes(DeployKeyOf(app)), presented);

    /// <summary>The signature of a record the platform keeps in storage (HMAC-SHA256, lowercase hex).</summary>
    public string Sign(ReadOnlySpan<byte> record) => Convert.ToHexStringLower(HMACSHA256.HashData(_recordsKey, record));

    /// <summary>True when <paramref name="signature"/> is this platform's signature of <paramref name="record"/> (constant time).</summary>
    public bool Verify(ReadOnlySpan<byte> record, string? signature) =>
        signature is not null && FixedTimeEquals(Encoding.UTF8.GetBytes(Sign(record)), signature);

    /// <summary>HKDF-SHA256 of the master under "faast/PURPOSE/APP": 32 bytes of a key for one purpose of one app.</summary>
    public byte[] Derive(string purpose, string app) =>
        HKDF.DeriveKey(HashAlgorithmName.SHA256, _master, KeyBytes, info: Encoding.UTF8.GetBytes($"faast/{purpose}/{app.ToLowerInvariant()}"));

    private static bool FixedTimeEquals(byte[] expected, string presented)
    {
        var bytes = Encoding.UTF8.GetBytes(presented);
        return CryptographicOperations.FixedTimeEquals(expected, bytes);
    }

    private static string Base64Url(byte[] bytes) => Convert.ToBase64String(bytes).TrimEnd('=').Replace('+', '-').Replace('/', '_');
}

/// <summary>
/// Where the CLI (`./faast deploy`, `./faast status`) finds a local platform's admin key without being told: the platform
/// writes <c>$FAAST_HOME/.faast/credentials/HOST-PORT</c> (0600, in a 0700 folder: only the platform's user, who
/// started it, can read it) while it runs, and removes it when it stops. Another local user, a web page and the
/// network cannot read it.
/// </summary>
public static class LocalCredentials
{
    /// <summary>The credential file of the platform at <paramref name="platform"/> (its scheme, host and port).</summary>
    public static string PathFor(string home, Uri platform) =>
        Path.Combine(home, ".faast", "credentials", $"{platform.Host.Trim('[', ']').Replace(':', '_')}-{platform.Port}");

    /// <summary>Writes the admin key for the platform at <paramref name="address"/>; returns the file, for removal.</summary>
    public static string Publish(string home, Uri address, string adminKey)
    {
        var file = PathFor(home, address);
        PrivateFiles.CreateDirectory(Path.GetDirectoryName(file)!);
        var temp = file + "." + Convert.ToHexString(RandomNumberGenerator.GetBytes(6)) + ".tmp";
        var create = new FileStreamOptions { Mode = FileMode.CreateNew, Access = FileAccess.Write };
        if (!OperatingSystem.IsWindows())
            create.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
        using (var stream = new FileStream(temp, create))
        using (var writer = new StreamWriter(stream))
            writer.Write(adminKey);
        File.Move(temp, file, overwrite: true);
        return file;
    }

    /// <summary>The admin key of the local platform at <paramref name="platform"/>, or null when none is published for it
    /// (or this user cannot read it). 0.0.0.0 and localhost are looked up as 127.0.0.1 too.</summary>
    public static string? Find(string home, Uri platform)
    {
        foreach (var candidate in Candidates(platform))
        {
            try
            {
                var file = PathFor(home, candidate);
                if (File.Exists(file))
                    return File.ReadAllText(file).Trim();
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // not ours to read: the CLI then says how to give a key
            }
        }
        return null;
    }

    private static IEnumerable<Uri> Candidates(Uri platform)
    {
        yield return platform;
        if (platform.Host is "localhost" or "0.0.0.0" or "[::1]" or "::1")
            yield return new UriBuilder(platform) { Host = "127.0.0.1" }.Uri;
    }
}
