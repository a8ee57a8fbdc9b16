using System.Buffers.Binary;
using System.IO.Compression;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// An app folder as a zip and back: the package of Run-From-Package (issue 13, item 2). <see cref="Zip"/> is
/// deterministic (entries in ordinal path order, a fixed time stamp, only the executable bit of the mode), so the
/// same folder gives the same bytes and the same SHA-256. <see cref="Extract"/> trusts nothing in the archive.
/// </summary>
public static class Packager
{
    /// <summary>The runtime's state folder in an app (function keys, local data): never part of a package.</summary>
    public const string StateFolder = ".faast";

    /// <summary>The app's settings (connection strings, secrets): never part of a stored package, as Azure's publish
    /// leaves it out. An upload may carry it; the platform keeps it apart (<see cref="DeploymentStore"/>).</summary>
    public const string SettingsFile = "local.settings.json";

    // Zip's DOS time starts in 1980; a fixed stamp keeps the bytes independent of when files were touched.
    private static readonly DateTimeOffset FixedTime = new(1980, 1, 1, 0, 0, 0, TimeSpan.Zero);

    private const int UnixFileType = 0xF000 << 16;
    private const int UnixSymlink = 0xA000 << 16;
    private const int UnixRegular = 0x8000 << 16;

    /// <summary>
    /// Writes the app in <paramref name="appDirectory"/> to <paramref name="destination"/> as a zip (left open).
    /// A link is followed only when it stays inside the folder (its target's bytes are packed); one that leads out,
    /// a link cycle, or a file over <see cref="DeployOptions.MaxFileBytes"/> throws <see cref="PackageException"/>.
    /// <see cref="SettingsFile"/> is left out unless <paramref name="includeSettings"/> (an upload to the platform,
    /// which stores the settings apart from the package).
    /// </summary>
    public static void Zip(string appDirectory, Stream destination, DeployOptions? options = null, bool includeSettings = false)
    {
        ArgumentNullException.ThrowIfNull(appDirectory);
        ArgumentNullException.ThrowIfNull(destination);
        options ??= DeployOptions.Default;
        var root = Path.TrimEndingDirectorySeparator(Path.GetFullPath(appDirectory));
        if (!Directory.Exists(root))
            throw new PackageException(appDirectory, "no such app directory");
        var realRoot = RealDirectory(root);
        var files = new List<(string Entry, string Path)>();
        Collect(realRoot, realRoot, "", files, options);
        if (!includeSettings)
            files.RemoveAll(f => f.Entry == SettingsFile);
        files.Sort((a, b) => string.CompareOrdinal(a.Entry, b.Entry));
        long total = 0;
        using var zip = new ZipArchive(destination, ZipArchiveMode.Create, leaveOpen: true);
        foreach (var (entryName, path) in files)
        {
            var info = new FileInfo(path);
            total += info.Length;
            if (total > options.MaxTotalBytes)
                throw new PackageException(entryName, $"the app exceeds {options.MaxTotalBytes} bytes in all (the package size cap)");
            var entry = zip.CreateEntry(entryName, CompressionLevel.Optimal);
            entry.LastWriteTime = FixedTime;
            var executable = !OperatingSystem.IsWindows() && (File.GetUnixFileMode(path) & UnixFileMode.UserExecute) != 0;
            entry.ExternalAttributes = UnixRegular | ((executable ? 0b111_101_101 : 0b110_100_100) << 16);
            using var input = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.Read, 1 << 16);
            using var output = entry.Open();
            input.CopyTo(output);
        }
    }

    /// <summary>Adds the files under <paramref name="dir"/> (a real path inside <paramref name="realRoot"/>).</summary>
    private static void Collect(string realRoot, string dir, string prefix, List<(string, string)> files, DeployOptions options)
    {
        foreach (var item in new DirectoryInfo(dir).EnumerateFileSystemInfos())
        {
            var entry = prefix + item.Name;
            if (prefix.Length == 0 && item.Name == StateFolder)
                continue;
            var real = item.FullName;
            if (item.LinkTarget is not null)
            {
                real = RealPath(item.FullName);
                if (!IsInside(realRoot, real))
                    throw new PackageException(entry, $"is a link to {real}, outside the app folder; a package holds only the app's own files");
            }

            if (Directory.Exists(real))
            {
                // A link to a folder that holds the link would pack forever.
                if (item.LinkTarget is not null && IsInside(real, Path.GetDirectoryName(item.FullName)!))
                    throw new PackageException(entry, $"is a link to {real}, a folder that contains it (a cycle)");
                Collect(realRoot, real, entry + "/", files, options);
            }
            else if (File.Exists(real))
            {
                if (files.Count >= options.MaxEntries)
                    throw new PackageException(entry, $"the app has more than {options.MaxEntries} files (the package's cap)");
                var length = new FileInfo(real).Length;
                if (length > options.MaxFileBytes)
                    throw new PackageException(entry, $"is {length} bytes, over the {options.MaxFileBytes}-byte cap for a file in a package");
                files.Add((entry, real));
            }
            else
            {
                throw new PackageException(entry, "is neither a file nor a folder (a dangling link, a socket or a device)");
            }
        }
    }

    /// <summary>
    /// Extracts <paramref name="zip"/> into <paramref name="targetDirectory"/>, which must be missing or empty.
    /// Refuses (<see cref="PackageException"/>) an entry with an absolute path, a "..", "." or empty segment, a
    /// backslash or a control character, a link, a duplicate, a file over <see cref="DeployOptions.MaxFileBytes"/>,
    /// more than <see cref="DeployOptions.MaxTotalBytes"/> in all, or a corrupt archive. On a refusal the target
    /// may hold part of the package: extract into a folder of your own and delete it then.
    /// </summary>
    public static void Extract(Stream zip, string targetDirectory, DeployOptions? options = null)
    {
        ArgumentNullException.ThrowIfNull(zip);
        ArgumentNullException.ThrowIfNull(targetDirectory);
        options ??= DeployOptions.Default;
        var target = Path.TrimEndingDirectorySeparator(Path.GetFullPath(targetDirectory));
        if (Directory.Exists(target) && Directory.EnumerateFileSystemEntries(target).Any())
            throw new ArgumentException($"{target} is not empty; a package is extracted into an empty folder", nameof(targetDirectory));
        Directory.CreateDirectory(target);
        // ZipArchive parses the whole central directory into memory before anyone can count its entries; the
        // end-of-central-directory record says how many there are in a few bytes at the end, so a package claiming
        // millions is refused before that.
        if (zip.CanSeek && DeclaredEntries(zip) is { } declared && declared > options.MaxEntries)
            throw new PackageException("(package)", $"declares {declared} entries in its end-of-central-directory record, more than the cap of {options.MaxEntries}");
        ZipArchive archive;
        try
        {
            archive = new ZipArchive(zip, ZipArchiveMode.Read, leaveOpen: true);
        }
        catch (InvalidDataException e)
        {
            throw new PackageException("(package)", "is not a zip archive: " + e.Message, e);
        }

        using (archive)
        {
            try
            {
                // The central directory is read here, on first use, not in the constructor: a corrupt one (entries that do
                // not match its end record, found by the platform fuzzer) is the deployer's error, not the platform's.
                _ = archive.Entries.Count;
            }
            catch (InvalidDataException e)
            {
                throw new PackageException("(package)", "is not a valid zip archive: " + e.Message, e);
            }
            if (archive.Entries.Count > options.MaxEntries)
                throw new PackageException("(package)", $"has {archive.Entries.Count} entries, more than the cap of {options.MaxEntries}");
            var seen = new HashSet<string>(StringComparer.Ordinal);
            long total = 0;
            var buffer = new byte[1 << 16];
            foreach (var entry in archive.Entries)
            {
                var name = entry.FullName;
                var isFolder = name.EndsWith('/');
                var relative = isFolder ? name[..^1] : name;
                if (EntryProblem(relative) is { } problem)
                    throw new PackageException(Printable(name), problem);
                if ((entry.ExternalAttributes & UnixFileType) == UnixSymlink)
                    throw new PackageException(name, "is a symbolic link; a package holds only files and folders");
                var path = Path.GetFullPath(Path.Combine(target, relative));
                if (!IsInside(target, path))
                    throw new PackageException(name, "would be extracted outside the target folder");
                if (!seen.Add(relative))
                    throw new PackageException(name, "appears twice in the package");
                if (isFolder)
                {
                    if (File.Exists(path))
                        throw new PackageException(name, "is a folder, but another entry made a file of that name");
                    Directory.CreateDirectory(path);
                    continue;
                }

                if (entry.Length > options.MaxFileBytes)
                    throw new PackageException(name, $"is {entry.Length} bytes, over the {options.MaxFileBytes}-byte cap for a file in a package");
                try
                {
                    Directory.CreateDirectory(Path.GetDirectoryName(path)!);
                    using var input = entry.Open();
                    using var output = new FileStream(path, FileMode.CreateNew, FileAccess.Write, FileShare.None);
                    long written = 0;
                    int read;
                    while ((read = input.Read(buffer)) > 0)
                    {
                        written += read;
                        total += read;
                        // The header's length is the archive's word; the bytes actually inflated are what count.
                        if (written > options.MaxFileBytes)
                            throw new PackageException(name, $"inflates to more than the {options.MaxFileBytes}-byte cap for a file in a package");
                        if (total > options.MaxTotalBytes)
                            throw new PackageException(name, $"the package inflates to more than {options.MaxTotalBytes} bytes in all (the cap)");
                        output.Write(buffer, 0, read);
                    }
                }
                catch (InvalidDataException e)
                {
                    throw new PackageException(name, "is corrupt: " + e.Message, e);
                }
                catch (IOException e)
                {
                    // Duplicates are caught above: this is a file where another entry made a folder, or the reverse.
                    throw new PackageException(name, "cannot be extracted (a file and a folder of the same name?): " + e.Message, e);
                }

                if (!OperatingSystem.IsWindows() && ((entry.ExternalAttributes >> 16) & 0b001_000_000) != 0)
                    File.SetUnixFileMode(path, File.GetUnixFileMode(path) | UnixFileMode.UserExecute | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute);
            }
        }
    }

    private const uint EndOfCentralDirectorySignature = 0x06054b50;
    private const uint Zip64LocatorSignature = 0x07064b50;
    private const uint Zip64EndOfCentralDirectorySignature = 0x06064b50;
    private const int EndOfCentralDirectoryLength = 22;
    private const int Zip64LocatorLength = 20;
    private const int Zip64EndOfCentralDirectoryLength = 56;

    /// <summary>
    /// The entry count the zip's end-of-central-directory record declares (its zip64 record's when the classic one
    /// says 0xFFFF), found as ZipArchive finds it: the last record signature within the 64 KiB comment range from the
    /// end. Null when there is none (ZipArchive then says what is wrong). The stream's position is kept.
    /// </summary>
    internal static long? DeclaredEntries(Stream zip)
    {
        var start = zip.Position;
        try
        {
            var length = zip.Length;
            if (length < EndOfCentralDirectoryLength)
                return null;
            var tailLength = (int)Math.Min(length, EndOfCentralDirectoryLength + ushort.MaxValue);
            var tailStart = length - tailLength;
            var tail = new byte[tailLength];
            zip.Position = tailStart;
            zip.ReadExactly(tail);
            for (var i = tailLength - EndOfCentralDirectoryLength; i >= 0; i--)
            {
                if (BinaryPrimitives.ReadUInt32LittleEndian(tail.AsSpan(i)) != EndOfCentralDirectorySignature)
                    continue;
                long entries = Math.Max(BinaryPrimitives.ReadUInt16LittleEndian(tail.AsSpan(i + 8)), BinaryPrimitives.ReadUInt16LittleEndian(tail.AsSpan(i + 10)));
                if (entries != ushort.MaxValue)
                    return entries;
                var locator = tailStart + i - Zip64LocatorLength;
                if (locator < 0)
                    return entries;
                var buffer = new byte[Zip64EndOfCentralDirectoryLength];
                zip.Position = locator;
                zip.ReadExactly(buffer.AsSpan(0, Zip64LocatorLength));
                if (BinaryPrimitives.ReadUInt32LittleEndian(buffer) != Zip64LocatorSignature)
                    return entries;
                var record = BinaryPrimitives.ReadUInt64LittleEndian(buffer.AsSpan(8));
                if (record > (ulong)(length - Zip64EndOfCentralDirectoryLength))
                    return entries;
                zip.Position = (long)record;
                zip.ReadExactly(buffer);
                if (BinaryPrimitives.ReadUInt32LittleEndian(buffer) != Zip64EndOfCentralDirectorySignature)
                    return entries;
                var zip64 = Math.Max(BinaryPrimitives.ReadUInt64LittleEndian(buffer.AsSpan(24)), BinaryPrimitives.ReadUInt64LittleEndian(buffer.AsSpan(32)));
                return (long)Math.Min(zip64, long.MaxValue);
            }
            return null;
        }
        finally
        {
            zip.Position = start;
        }
    }

    /// <summary>Why an entry's path is unsafe, or null: it must be relative, '/'-separated, without "." or ".."
    /// or empty segments, backslashes, drive letters or control characters.</summary>
    internal static string? EntryProblem(string relative)
    {
        if (relative.Length == 0)
            return "has an empty path";
        if (relative[0] == '/' || (relative.Length >= 2 && relative[1] == ':'))
            return "has an absolute path";
        if (relative.Contains('\\', StringComparison.Ordinal))
            return "has a backslash in its path; zip paths use '/'";
        if (relative.Any(char.IsControl))
            return "has a control character in its path";
        foreach (var segment in relative.Split('/'))
        {
            if (segment.Length == 0)
                return "has an empty path segment (\"//\")";
            if (segment is "." or "..")
                return $"has a \"{segment}\" path segment, which could climb out of the target folder";
        }

        return null;
    }

    /// <summary>The path with every link resolved: its final target's, in a folder whose path holds no link.</summary>
    private static string RealPath(string path)
    {
        var info = new FileInfo(path);
        if (info.LinkTarget is not null)
            path = (info.ResolveLinkTarget(returnFinalTarget: true) ?? info).FullName;
        var parent = Path.GetDirectoryName(path);
        return parent is null ? path : Path.Combine(RealDirectory(parent), Path.GetFileName(path));
    }

    private static string RealDirectory(string dir)
    {
        var parent = Path.GetDirectoryName(dir);
        if (parent is null)
            return dir;
        var realParent = RealDirectory(parent);
        var here = new DirectoryInfo(Path.Combine(realParent, Path.GetFileName(dir)));
        if (here.LinkTarget is null)
            return here.FullName;
        var target = here.ResolveLinkTarget(returnFinalTarget: true);
        return target is null ? here.FullName : RealDirectory(Path.TrimEndingDirectorySeparator(target.FullName));
    }

    private static bool IsInside(string root, string path) =>
        path.Equals(root, StringComparison.Ordinal) ||
        path.StartsWith(root + Path.DirectorySeparatorChar, StringComparison.Ordinal);

    private static string Printable(string s) => new(s.Take(200).Select(c => char.IsControl(c) ? '?' : c).ToArray());
}
