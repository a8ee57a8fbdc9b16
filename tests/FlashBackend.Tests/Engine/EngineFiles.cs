using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

/// <summary>
/// A directory for engine tests on a disk-backed filesystem that takes O_DIRECT. /tmp is tmpfs on many machines (tmpfs
/// answers EINVAL to O_DIRECT before Linux 6.6, and after it is RAM, not a disk), so /var/tmp, disk-backed on Debian,
/// comes first. If neither supports O_DIRECT,
/// opening the store fails with DirectFile's message naming the path and the reason: the tests then fail loudly rather
/// than quietly measuring the page cache.
/// </summary>
internal sealed class EngineFiles : IDisposable
{
    public EngineFiles()
    {
        string root = Directory.Exists("/var/tmp") ? "/var/tmp" : System.IO.Path.GetTempPath();
        Dir = Directory.CreateDirectory(System.IO.Path.Combine(root, "faast-flash-" + Guid.NewGuid().ToString("N"))).FullName;
        LogPath = System.IO.Path.Combine(Dir, "flash.log");
    }

    public string Dir { get; }

    public string LogPath { get; }

    /// <summary>Small segments so tests wrap the log with a few hundred KiB; a 16 KiB I/O buffer so values of a few
    /// tens of KiB already stream through several chunks.</summary>
    public FlashStoreOptions Options(int segments = 8, int segmentSize = 64 << 10, StartupMode startup = StartupMode.Recover) => new()
    {
        Path = LogPath,
        Capacity = (long)segments * segmentSize,
        SegmentSize = segmentSize,
        IoBufferSize = 16 << 10,
        Startup = startup,
    };

    /// <summary>Corrupts one byte of the log (XOR 0x5A) with ordinary buffered I/O and fsync, as a disk or a crash
    /// would; a later O_DIRECT read sees it (the kernel writes dirty cached pages back before a direct read of the same
    /// range).</summary>
    public void FlipByte(long position)
    {
        using var f = new FileStream(LogPath, FileMode.Open, FileAccess.ReadWrite);
        f.Position = position;
        int b = f.ReadByte();
        f.Position = position;
        f.WriteByte((byte)(b ^ 0x5A));
        f.Flush(flushToDisk: true);
    }

    public FlashStore Open(int segments = 8, int segmentSize = 64 << 10, StartupMode startup = StartupMode.Recover) =>
        FlashStore.Open(Options(segments, segmentSize, startup));

    /// <summary>Deterministic bytes for (key, version), so any byte served for the wrong object or version shows.</summary>
    public static byte[] Value(string key, int version, int length)
    {
        var bytes = new byte[length];
        new Random(HashCode.Combine(StableHash(key), version)).NextBytes(bytes);
        return bytes;
    }

    private static int StableHash(string s)
    {
        int h = 17;
        foreach (char c in s)
            h = (h * 31) + c;
        return h;
    }

    public static byte[] ReadAll(FlashStore store, string tenant, string key, string etag, out ReadStatus status)
    {
        if (!store.TryGetLength(tenant, key, etag, out long length))
        {
            status = ReadStatus.Miss;
            return [];
        }
        var buffer = new byte[length];
        status = store.Read(tenant, key, etag, 0, buffer, out int read);
        return buffer[..read];
    }

    public void Dispose()
    {
        try
        {
            Directory.Delete(Dir, recursive: true);
        }
        catch (DirectoryNotFoundException)
        {
        }
    }
}
