using System.Runtime.InteropServices;
using System.Runtime.Versioning;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Taking over files a worker names (issue 10): real files in /dev/shm, a real concurrent swapper,
/// real owners (the suites run as root, as the host does when it isolates apps).
/// </summary>
[SupportedOSPlatform("linux")]
public sealed partial class WorkerFileTests : IDisposable
{
    private const UnixFileMode Mode700 = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
    private const UnixFileMode Mode400 = UnixFileMode.UserRead;
    private const int Threshold = 256 << 10;

    private readonly ShmScope _scope = new();

    public void Dispose() => _scope.Dispose();

    private SharedMemoryArena NewArena(FileOwner? owner = null) =>
        _scope.NewArena(new ArenaOptions { Capacity = 256L << 20, SlabSegmentSize = 8L << 20, Owner = owner });

    /// <summary>A root-only secret (0400 in a 0700 directory), longer than any output the test announces.</summary>
    private (string Path, byte[] Bytes) Secret()
    {
        var dir = Path.Combine(_scope.Root, "private");
        Directory.CreateDirectory(dir, Mode700);
        var path = Path.Combine(dir, "secret");
        var bytes = new byte[Threshold * 2];
        Array.Fill(bytes, (byte)'S');
        File.WriteAllBytes(path, bytes);
        File.SetUnixFileMode(path, Mode400);
        return (path, bytes);
    }

    /// <summary>The directory's entries that are not the arena's own (s/l + digits).</summary>
    private static string[] Foreign(SharedMemoryArena arena) =>
        Directory.GetFileSystemEntries(arena.Directory).Select(Path.GetFileName)
            .Where(n => !(n!.Length > 1 && n[0] is 's' or 'l' && n.AsSpan(1).IndexOfAnyExceptInRange('0', '9') < 0))
            .ToArray()!;

    [Fact]
    public void A_name_swapped_for_a_link_to_a_root_only_file_is_never_read_changed_or_left_behind()
    {
        using var arena = NewArena();
        var (secretPath, secret) = Secret();
        var adopted = 0;
        var refused = 0;
        var secretReads = 0;
        var leftovers = new List<string>();
        for (var i = 0; i < 600; i++)
        {
            // Every other try is a large output (mapped in place, truncated to its length, chmod-ed),
            // the rest small ones (copied into a slot).
            var length = i % 2 == 0 ? Threshold + 4096 : 100_000;
            var name = $"w7-{i}";
            var other = name + "-link";
            var output = new byte[length];
            Array.Fill(output, (byte)'W');
            File.WriteAllBytes(Path.Combine(arena.Directory, name), output);
            File.CreateSymbolicLink(Path.Combine(arena.Directory, other), secretPath);

            // The "worker": swaps the two names back and forth (atomically) until the host is done.
            using var stop = new ManualResetEventSlim();
            var swapper = new Thread(() =>
            {
                var a = Path.Combine(arena.Directory, name);
                var b = Path.Combine(arena.Directory, other);
                while (!stop.IsSet && RenameAt2(AtFdCwd, a, AtFdCwd, b, RenameExchange) == 0)
                {
                }
            });
            swapper.Start();
            try
            {
                if (arena.TryAdopt(name, length, out var extent))
                {
                    adopted++;
                    if (extent.Span.IndexOf((byte)'S') >= 0)
                        secretReads++;
                    arena.Free(extent);
                }
            }
            catch (ArgumentException)
            {
                refused++; // the link was there when the host looked
            }
            finally
            {
                stop.Set();
                swapper.Join();
            }
            // The test's own spare entry goes; anything else the worker named must be gone.
            var spare = Path.Combine(arena.Directory, other);
            if (new FileInfo(spare).LinkTarget is not null || File.Exists(spare))
                File.Delete(spare);
            leftovers.AddRange(Foreign(arena));
            foreach (var left in Foreign(arena))
                File.Delete(Path.Combine(arena.Directory, left));
        }

        Assert.True(secretReads == 0, $"the host read the secret into {secretReads} of {adopted} adopted outputs");
        Assert.Equal(secret, File.ReadAllBytes(secretPath));
        Assert.Equal(Mode400, File.GetUnixFileMode(secretPath));
        Assert.True(leftovers.Count == 0, $"{leftovers.Count} entries were left behind, e.g. {string.Join(", ", leftovers.Take(5))}");
        Assert.True(adopted > 0, "no output was adopted at all");
        Assert.True(adopted + refused == 600, $"{adopted} adopted + {refused} refused, not 600");
        Assert.Equal(0, arena.Allocated);
        Assert.Equal(0, arena.LargeObjectCount);
    }

    [Theory]
    [InlineData(Threshold + 4096)]
    [InlineData(1000)]
    public void A_hard_linked_output_is_refused_and_the_file_behind_its_other_name_is_untouched(int length)
    {
        using var arena = NewArena();
        var original = new byte[length * 2];
        new Random(length).NextBytes(original);
        var other = Path.Combine(arena.Directory, "w3-original");
        File.WriteAllBytes(other, original);
        Assert.Equal(0, Link(other, Path.Combine(arena.Directory, "w3-1")));

        var refusal = Assert.Throws<ArgumentException>(() => arena.Adopt("w3-1", length));

        Assert.Contains("w3-1", refusal.Message, StringComparison.Ordinal);
        Assert.Contains("2 links", refusal.Message, StringComparison.Ordinal);
        Assert.False(File.Exists(Path.Combine(arena.Directory, "w3-1")));
        Assert.Equal(original, File.ReadAllBytes(other));
        Assert.Equal(0, arena.Reserved);
    }

    [Fact]
    public void An_output_owned_by_another_user_than_the_workers_is_refused_and_deleted()
    {
        // The workers' user: a uid no account has (root may give files to any uid).
        const int workers = 48_611;
        using var arena = NewArena(new FileOwner(workers, workers));
        var data = new byte[Threshold + 1];
        new Random(5).NextBytes(data);
        var rootsFile = Path.Combine(arena.Directory, "w5-root");
        File.WriteAllBytes(rootsFile, data);
        var theirs = Path.Combine(arena.Directory, "w5-theirs");
        File.WriteAllBytes(theirs, data);
        Assert.Equal(0, Chown(theirs, workers, workers));

        var refusal = Assert.Throws<ArgumentException>(() => arena.Adopt("w5-root", data.Length));
        Assert.Contains("w5-root", refusal.Message, StringComparison.Ordinal);
        Assert.Contains($"uid 0, not to the workers' uid {workers}", refusal.Message, StringComparison.Ordinal);
        Assert.False(File.Exists(rootsFile));

        var extent = arena.Adopt("w5-theirs", data.Length);
        Assert.Equal(data, extent.Span.ToArray());
        arena.Free(extent);
    }

    [Fact]
    public void An_adopted_large_output_leaves_the_workers_names_and_lives_under_an_arena_name()
    {
        using var arena = NewArena();
        var data = new byte[Threshold + 100];
        new Random(9).NextBytes(data);
        File.WriteAllBytes(Path.Combine(arena.Directory, "w9-1"), data);

        var extent = arena.Adopt("w9-1", data.Length);

        // A worker's clean-up deletes w<pid>-*: it must not reach the cached object.
        Assert.StartsWith("l", extent.Segment, StringComparison.Ordinal);
        Assert.Empty(Directory.GetFiles(arena.Directory, "w9-*"));
        foreach (var file in Directory.GetFiles(arena.Directory, "w9-*"))
            File.Delete(file);
        Assert.Equal(data, File.ReadAllBytes(Path.Combine(arena.Directory, extent.Segment)));
        Assert.Equal(data, extent.Span.ToArray());
        arena.Free(extent);
        Assert.Empty(Directory.GetFileSystemEntries(arena.Directory, "l*"));
    }

    [Fact]
    public void Refused_outputs_of_every_kind_are_deleted_and_say_why()
    {
        using var arena = NewArena();
        var outside = Path.Combine(_scope.Root, "outside");
        File.WriteAllBytes(outside, new byte[100]);
        File.CreateSymbolicLink(Path.Combine(arena.Directory, "w2-link"), outside);
        File.WriteAllBytes(Path.Combine(arena.Directory, "w2-short"), new byte[100]);
        Assert.Equal(0, MkFifo(Path.Combine(arena.Directory, "w2-fifo"), 0x180));

        Assert.Contains("symbolic link", Assert.Throws<ArgumentException>(() => arena.Adopt("w2-link", 10)).Message, StringComparison.Ordinal);
        Assert.Contains("100 bytes, fewer than the 101", Assert.Throws<ArgumentOutOfRangeException>(() => arena.Adopt("w2-short", 101)).Message, StringComparison.Ordinal);
        Assert.Contains("not a regular file", Assert.Throws<ArgumentException>(() => arena.Adopt("w2-fifo", 10)).Message, StringComparison.Ordinal);

        Assert.Empty(Foreign(arena));
        Assert.Equal(new byte[100], File.ReadAllBytes(outside));
        Assert.Equal(0, arena.Reserved);
    }

    private const int AtFdCwd = -100;
    private const uint RenameExchange = 2;

    [LibraryImport("libc", EntryPoint = "renameat2", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int RenameAt2(int oldDirectory, string oldPath, int newDirectory, string newPath, uint flags);

    [LibraryImport("libc", EntryPoint = "link", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Link(string existing, string added);

    [LibraryImport("libc", EntryPoint = "chown", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Chown(string path, int uid, int gid);

    [LibraryImport("libc", EntryPoint = "mkfifo", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int MkFifo(string path, int mode);
}
