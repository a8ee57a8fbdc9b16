namespace FaaST.TestSupport;

/// <summary>A new directory under the system's temporary directory, deleted with everything in it when disposed.</summary>
public sealed class TempDirectory : IDisposable
{
    public TempDirectory(string prefix) => Path = Directory.CreateTempSubdirectory(prefix).FullName;

    public string Path { get; }

    public void Dispose()
    {
        try
        {
            Directory.Delete(Path, recursive: true);
        }
        catch (DirectoryNotFoundException)
        {
            // the test removed it itself
        }
    }
}
