using System.Security.Cryptography;

namespace FaaST.Storage;

/// <summary>
/// Files that hold secrets or private data (the app's .faast folder: Azurite's data, its account key,
/// the peer secret): folders 0700 and files 0600, whoever's umask the host runs under.
/// </summary>
public static class PrivateFiles
{
    private const UnixFileMode DirectoryMode = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
    private const UnixFileMode FileMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;

    /// <summary>Creates <paramref name="path"/> (and missing parents) 0700, and makes it 0700 if it exists.</summary>
    public static string CreateDirectory(string path)
    {
        if (OperatingSystem.IsWindows())
            return Directory.CreateDirectory(path).FullName;
        Directory.CreateDirectory(path, DirectoryMode);
        File.SetUnixFileMode(path, DirectoryMode);
        return Path.GetFullPath(path);
    }

    /// <summary>Makes every folder under <paramref name="root"/> 0700 and every file 0600 (data written by
    /// an older version, or under a loose umask). Symbolic links are left alone, not followed.</summary>
    public static void Restrict(string root)
    {
        if (OperatingSystem.IsWindows() || !Directory.Exists(root))
            return;
        File.SetUnixFileMode(root, DirectoryMode);
        foreach (var entry in new DirectoryInfo(root).EnumerateFileSystemInfos("*", new EnumerationOptions { RecurseSubdirectories = true, AttributesToSkip = 0 }))
        {
            if (entry.LinkTarget is not null)
                continue;
            File.SetUnixFileMode(entry.FullName, entry is DirectoryInfo ? DirectoryMode : FileMode);
        }
    }

    /// <summary>
    /// The contents of <paramref name="path"/>, created 0600 from <paramref name="create"/> if it does not
    /// exist. Processes racing to create it all end up with the one that won (written whole to a
    /// temporary file, then linked into place without replacing).
    /// </summary>
    public static string ReadOrCreate(string path, Func<string> create)
    {
        if (File.Exists(path))
            return ReadPrivate(path);
        CreateDirectory(Path.GetDirectoryName(Path.GetFullPath(path))!);
        var temp = path + "." + Convert.ToHexString(RandomNumberGenerator.GetBytes(6)) + ".tmp";
        var options = new FileStreamOptions { Mode = System.IO.FileMode.CreateNew, Access = FileAccess.Write };
        if (!OperatingSystem.IsWindows())
            options.UnixCreateMode = FileMode;
        using (var stream = new FileStream(temp, options))
        using (var writer = new StreamWriter(stream))
            writer.Write(create());
        try
        {
            File.Move(temp, path, overwrite: false);
        }
        catch (IOException) when (File.Exists(path))
        {
            File.Delete(temp); // another process created it first: use theirs
        }
        return ReadPrivate(path);
    }

    private static string ReadPrivate(string path)
    {
        if (!OperatingSystem.IsWindows())
        {
            var mode = File.GetUnixFileMode(path);
            if ((mode & (UnixFileMode.GroupRead | UnixFileMode.GroupWrite | UnixFileMode.OtherRead | UnixFileMode.OtherWrite)) != 0)
                File.SetUnixFileMode(path, FileMode); // an older copy, or one copied in with a loose mode
        }
        var text = File.ReadAllText(path).Trim();
        if (text.Length == 0)
            throw new InvalidDataException($"{path} is empty; delete it to have a new one generated");
        return text;
    }
}

/// <summary>
/// A storage account of its own for the Azurite an app's host starts (instead of the emulator's public
/// devstoreaccount1 key): the app's workers then hold credentials of their app's Azurite only.
/// </summary>
public sealed record AzuriteAccount(string Name, string Key)
{
    /// <summary>A new account: "faast" and 12 random hex digits, a random 64-byte key.</summary>
    public static AzuriteAccount Generate() =>
        new("faast" + Convert.ToHexString(RandomNumberGenerator.GetBytes(6)).ToLowerInvariant(), Convert.ToBase64String(RandomNumberGenerator.GetBytes(64)));

    /// <summary>The account kept in <paramref name="file"/> (one line "name:key", 0600), generated on first use.</summary>
    public static AzuriteAccount LoadOrCreate(string file)
    {
        var text = PrivateFiles.ReadOrCreate(file, () => Generate().AccountsVariable);
        var colon = text.IndexOf(':');
        if (colon <= 0 || colon == text.Length - 1)
            throw new InvalidDataException($"{file} is not one line \"accountname:base64key\"; delete it to have a new account generated (data kept under the old account is then unreachable)");
        var name = text[..colon];
        var key = text[(colon + 1)..];
        if (name.Length is < 3 or > 24 || !name.All(c => char.IsAsciiLetterLower(c) || char.IsAsciiDigit(c)))
            throw new InvalidDataException($"{file}: the account name must be 3 to 24 lowercase letters and digits");
        Span<byte> decoded = stackalloc byte[key.Length];
        if (!Convert.TryFromBase64String(key, decoded, out var n) || n < 32)
            throw new InvalidDataException($"{file}: the account key is not base64 of at least 32 bytes");
        return new AzuriteAccount(name, key);
    }

    /// <summary>AZURITE_ACCOUNTS' syntax: "name:key".</summary>
    public string AccountsVariable => Name + ":" + Key;

    /// <summary>The name only: the key never goes into a log.</summary>
    public override string ToString() => Name;
}
