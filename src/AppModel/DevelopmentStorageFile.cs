using System.Globalization;
using FaaST.Storage;

namespace FaaST.AppModel;

/// <summary>
/// APP/.faast/azurite-connection (0600, in the 0700 .faast folder): the connection string of the Azurite that a
/// running `./faast start APP` started, and that host's process id, one per line. Azurite listens on a free
/// port each start, so this file is how `./faast blob` reaches the same storage as the host. Written when
/// Azurite is up, removed when it stops; a host killed with SIGKILL leaves it behind, which the process id
/// tells apart.
/// </summary>
public sealed class DevelopmentStorageFile : IDisposable
{
    public const string FileName = "azurite-connection";

    private readonly string _path;
    private readonly string _content;

    private DevelopmentStorageFile(string path, string content)
    {
        _path = path;
        _content = content;
    }

    public static string PathOf(string appDirectory) => Path.Combine(appDirectory, ".faast", FileName);

    /// <summary>
    /// Writes the file for <paramref name="appDirectory"/> (replacing one a dead host left); removed again on
    /// dispose, unless another host of the same app has replaced it since.
    /// </summary>
    /// <exception cref="IOException">The folder cannot be written (the caller logs it; the host runs on).</exception>
    /// <exception cref="UnauthorizedAccessException">Likewise.</exception>
    public static DevelopmentStorageFile Publish(string appDirectory, string connectionString)
    {
        var path = PathOf(appDirectory);
        PrivateFiles.CreateDirectory(Path.GetDirectoryName(path)!);
        var content = connectionString + "\n" + Environment.ProcessId.ToString(CultureInfo.InvariantCulture) + "\n";
        // Written whole to a temporary name first, so a reader never sees half a connection string.
        var temp = path + "." + Environment.ProcessId.ToString(CultureInfo.InvariantCulture) + ".tmp";
        var options = new FileStreamOptions { Mode = FileMode.Create, Access = FileAccess.Write };
        if (!OperatingSystem.IsWindows())
            options.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
        using (var stream = new FileStream(temp, options))
        using (var writer = new StreamWriter(stream))
            writer.Write(content);
        File.Move(temp, path, overwrite: true);
        return new DevelopmentStorageFile(path, content);
    }

    /// <summary>
    /// The connection string of the running host's Azurite for <paramref name="appDirectory"/>; null with
    /// <paramref name="problem"/> saying why when there is none (no file, or its host is gone).
    /// </summary>
    public static string? Read(string appDirectory, out string? problem)
    {
        var path = PathOf(appDirectory);
        string[] lines;
        try
        {
            lines = File.ReadAllLines(path);
        }
        catch (Exception e) when (e is FileNotFoundException or DirectoryNotFoundException)
        {
            problem = $"no host of this app is running (no {path})";
            return null;
        }
        if (lines.Length < 2 || lines[0].Length == 0 || !int.TryParse(lines[1], NumberStyles.None, CultureInfo.InvariantCulture, out var pid))
        {
            problem = $"{path} is not a connection string and a process id, one per line; delete it and start the app again";
            return null;
        }
        if (!Directory.Exists($"/proc/{pid}"))
        {
            problem = $"the host that wrote {path} (process {pid}) is no longer running";
            return null;
        }
        problem = null;
        return lines[0];
    }

    public void Dispose()
    {
        try
        {
            if (File.Exists(_path) && File.ReadAllText(_path) == _content)
                File.Delete(_path);
        }
        catch (IOException)
        {
            // Gone already, or the folder went away with the app: nothing to undo.
        }
        catch (UnauthorizedAccessException)
        {
            // The folder's owner changed under us: the stale file is told apart by its process id.
        }
    }
}
