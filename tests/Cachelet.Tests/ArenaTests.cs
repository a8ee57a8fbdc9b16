using System.Diagnostics;
using System.Runtime.Versioning;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

[SupportedOSPlatform("linux")]
public sealed class ArenaTests : IDisposable
{
    private const UnixFileMode Mode700 = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
    private const UnixFileMode Mode600 = UnixFileMode.UserRead | UnixFileMode.UserWrite;

    private readonly ShmScope _scope = new();

    public void Dispose() => _scope.Dispose();

    private SharedMemoryArena NewArena(long capacity = 64L << 20, long segment = 8L << 20, double reserve = 1.0 / 16) =>
        _scope.NewArena(new ArenaOptions { Capacity = capacity, SlabSegmentSize = segment, FragmentationReserve = reserve });

    private static void Fill(Extent e, int seed)
    {
        var span = e.Span;
        for (var i = 0; i < span.Length; i++)
            span[i] = (byte)(seed * 31 + i);
    }

    private static bool Holds(Extent e, int seed)
    {
        var span = e.Span;
        for (var i = 0; i < span.Length; i++)
        {
            if (span[i] != (byte)(seed * 31 + i))
                return false;
        }
        return true;
    }

    [Fact]
    public void Every_length_gets_the_smallest_class_that_fits_and_wastes_under_an_eighth_or_16_bytes()
    {
        for (long n = 1; n <= 256 * 1024; n++)
        {
            var index = SizeClasses.IndexOf(n);
            var slot = SizeClasses.SizeOf(index);
            Assert.True(slot >= n, $"length {n} got the {slot}-byte class");
            Assert.True(index == 0 || SizeClasses.SizeOf(index - 1) < n, $"length {n} fits a smaller class than {slot}");
            Assert.True(slot % 16 == 0, $"class {slot} is not 16-byte aligned");
            var waste = slot - n;
            Assert.True(n <= 128 ? waste < 16 : waste * 8 < n, $"length {n} wastes {waste} bytes in the {slot}-byte class");
        }
        Assert.Equal(256 * 1024, SizeClasses.SizeOf(SizeClasses.CountFor(256 * 1024) - 1));
    }

    [Fact]
    public void Objects_of_every_size_class_keep_their_own_bytes_and_free_back_to_nothing()
    {
        using var arena = NewArena();
        var extents = new List<(Extent Extent, int Seed)>();
        var seed = 0;
        for (var c = 0; c < SizeClasses.CountFor(arena.Options.LargeObjectThreshold); c++)
        {
            var slot = SizeClasses.SizeOf(c);
            foreach (var length in new[] { slot, slot - 7, slot })
            {
                Assert.True(arena.TryAllocate(length, out var e));
                Assert.Equal(length, e.Length);
                Assert.StartsWith("s", e.Segment, StringComparison.Ordinal);
                Assert.Equal(0, e.Offset % 16);
                Fill(e, ++seed);
                extents.Add((e, seed));
            }
        }
        Assert.Equal(extents.Sum(x => x.Extent.Length), arena.Allocated);
        Assert.All(extents, x => Assert.True(Holds(x.Extent, x.Seed), $"{x.Extent} was overwritten"));

        foreach (var (e, _) in extents)
            arena.Free(e);
        Assert.Equal(0, arena.Allocated);
        Assert.Equal(0, arena.Used);
        var stats = arena.GetSizeClassStats();
        Assert.All(stats, s => Assert.Equal(0, s.LiveSlots));
        // Each class keeps at most its current slab, now empty.
        Assert.All(stats, s => Assert.True(s.Slabs <= 1, $"{s.SlotSize}-byte class kept {s.Slabs} slabs"));
        Assert.Equal(stats.Sum(s => s.Slabs * s.SlabSize), arena.Reserved);
    }

    [Fact]
    public void The_directory_is_0700_and_every_file_0600()
    {
        using var arena = NewArena();
        Assert.True(arena.TryAllocate(1000, out _));
        Assert.True(arena.TryAllocate(1 << 20, out _));
        Assert.Equal(Mode700, File.GetUnixFileMode(arena.Directory));
        var files = Directory.GetFiles(arena.Directory);
        Assert.Equal(2, files.Length);
        Assert.All(files, f => Assert.Equal(Mode600, File.GetUnixFileMode(f)));
    }

    [Fact]
    public void With_an_owner_the_directory_and_every_file_belong_to_it_with_the_same_modes()
    {
        // Giving files away needs root, as the suites run. 65534 is nobody/nogroup.
        var owner = new FileOwner(65534, 65534);
        using var arena = _scope.NewArena(new ArenaOptions { Capacity = 64L << 20, SlabSegmentSize = 8L << 20, Owner = owner });
        Assert.True(arena.TryAllocate(1000, out _));
        Assert.True(arena.TryAllocate(1 << 20, out _));
        using (FaaST.Cachelet.TemporaryFile.Create(arena, 1))
        {
            var files = Directory.GetFiles(arena.Directory);
            Assert.Equal(["l", "s", "t"], files.Select(f => Path.GetFileName(f)[..1]).Order());
            Assert.Equal("65534:65534 700", Stat(arena.Directory));
            Assert.All(files, f => Assert.Equal("65534:65534 600", Stat(f)));
        }
    }

    private static string Stat(string path)
    {
        using var stat = Process.Start(new ProcessStartInfo("stat", ["-c", "%u:%g %a", path]) { RedirectStandardOutput = true })!;
        var output = stat.StandardOutput.ReadToEnd().Trim();
        stat.WaitForExit();
        return output;
    }

    [Fact]
    public void Segment_file_names_are_never_reused()
    {
        // 2 MiB segments: a few hundred 12 KB objects need several, and they go away when emptied.
        using var arena = NewArena(capacity: 64L << 20, segment: 2L << 20);
        var gone = new HashSet<string>(StringComparer.Ordinal);
        var seen = new HashSet<string>(StringComparer.Ordinal);
        for (var round = 0; round < 4; round++)
        {
            var extents = new List<Extent>();
            for (var i = 0; i < 600; i++)
            {
                Assert.True(arena.TryAllocate(i % 50 == 0 ? 300_000 : 12_000, out var e));
                Assert.DoesNotContain(e.Segment, gone);
                Assert.Matches("^[sl][0-9]{6}$", e.Segment);
                seen.Add(e.Segment);
                extents.Add(e);
            }
            Assert.True(arena.SegmentCount >= 3, $"only {arena.SegmentCount} segments");
            foreach (var e in extents)
                arena.Free(e);
            foreach (var name in seen)
            {
                if (!File.Exists(Path.Combine(arena.Directory, name)))
                    gone.Add(name);
            }
        }
        Assert.Equal(1, arena.SegmentCount); // emptied segments are deleted, one is kept
        Assert.True(gone.Count > 40, $"only {gone.Count} files were deleted");
    }

    [Fact]
    public void Allocation_fails_at_capacity_and_leaks_nothing()
    {
        using var arena = NewArena(capacity: 1L << 20);
        var large = new List<Extent>();
        while (arena.TryAllocate(300_000, out var e))
            large.Add(e);
        Assert.Equal(3, large.Count); // 3 × 300 KB (page-rounded) fit in 1 MiB, a fourth does not
        Assert.True(arena.Reserved <= arena.Capacity);
        var files = Directory.GetFiles(arena.Directory).Length;
        Assert.False(arena.TryAllocate(300_000, out _));
        Assert.Equal(files, Directory.GetFiles(arena.Directory).Length);

        var small = new List<Extent>();
        while (arena.TryAllocate(600, out var e))
            small.Add(e);
        Assert.NotEmpty(small);
        Assert.True(arena.Reserved <= arena.Capacity, $"reserved {arena.Reserved} of {arena.Capacity}");
        var before = (arena.Used, arena.Reserved, arena.Allocated);
        Assert.False(arena.TryAllocate(600, out _));
        Assert.False(arena.TryAllocate(1 << 20, out _));
        Assert.Equal(before, (arena.Used, arena.Reserved, arena.Allocated));

        foreach (var e in large.Concat(small))
            arena.Free(e);
        Assert.Equal(0, arena.Used);
        Assert.Equal(0, arena.LargeObjectCount);
        Assert.True(arena.TryAllocate(300_000, out _));
    }

    [Fact]
    public void A_large_object_is_an_exactly_sized_file_of_its_own_deleted_when_freed()
    {
        using var arena = NewArena();
        Assert.True(arena.TryAllocate(300_001, out var e));
        Assert.True(e.IsLarge);
        Assert.Equal(0, e.Offset);
        Assert.StartsWith("l", e.Segment, StringComparison.Ordinal);
        var path = Path.Combine(arena.Directory, e.Segment);
        Assert.Equal(300_001, new FileInfo(path).Length);
        Fill(e, 7);
        var onDisk = File.ReadAllBytes(path);
        Assert.Equal(e.Span.ToArray(), onDisk);
        Assert.Equal(1, arena.LargeObjectCount);

        arena.Free(e);
        Assert.False(File.Exists(path));
        Assert.Equal(0, arena.LargeObjectCount);
        Assert.Equal(0, arena.Reserved);
    }

    [Fact]
    public void Adopting_a_large_file_maps_that_same_file_without_copying()
    {
        using var arena = NewArena();
        var path = Path.Combine(arena.Directory, "w42-1");
        var data = new byte[1 << 20];
        new Random(1).NextBytes(data);
        File.WriteAllBytes(path, data);

        var e = arena.Adopt("w42-1", data.Length);
        Assert.True(e.IsLarge);
        // The same file, now under an arena name (the worker's name is gone).
        Assert.StartsWith("l", e.Segment, StringComparison.Ordinal);
        Assert.False(File.Exists(path));
        var adopted = Path.Combine(arena.Directory, e.Segment);
        Assert.Equal(data, e.Span.ToArray());
        Assert.Equal(Mode600, File.GetUnixFileMode(adopted));
        // The extent is the file's pages: a write through the file shows in the extent.
        using (var f = new FileStream(adopted, FileMode.Open, FileAccess.Write, FileShare.ReadWrite))
        {
            f.Position = 10;
            f.WriteByte((byte)(data[10] ^ 0xFF));
        }
        Assert.Equal((byte)(data[10] ^ 0xFF), e.Span[10]);
        Assert.Equal(data.Length, arena.Allocated);

        arena.Free(e);
        Assert.False(File.Exists(adopted));
        Assert.Equal(0, arena.Reserved);
    }

    [Fact]
    public void Adopting_a_small_file_copies_it_into_a_slot_and_deletes_the_file()
    {
        using var arena = NewArena();
        var path = Path.Combine(arena.Directory, "w42-2");
        var data = new byte[5000];
        new Random(2).NextBytes(data);
        File.WriteAllBytes(path, data);

        var e = arena.Adopt("w42-2", 4000);
        Assert.False(e.IsLarge);
        Assert.StartsWith("s", e.Segment, StringComparison.Ordinal);
        Assert.Equal(data.AsSpan(0, 4000).ToArray(), e.Span.ToArray());
        Assert.False(File.Exists(path));
    }

    [Fact]
    public void Adopt_refuses_missing_outside_short_linked_and_own_files()
    {
        using var arena = NewArena();
        File.WriteAllBytes(Path.Combine(arena.Directory, "w1-1"), new byte[100]);
        var outside = Path.Combine(_scope.Root, "outside");
        File.WriteAllBytes(outside, new byte[100]);
        File.CreateSymbolicLink(Path.Combine(arena.Directory, "w1-link"), outside);
        Assert.True(arena.TryAllocate(10, out var own));

        Assert.Throws<FileNotFoundException>(() => arena.Adopt("w1-missing", 10));
        Assert.Throws<ArgumentException>(() => arena.Adopt("../outside", 10));
        Assert.Throws<ArgumentException>(() => arena.Adopt(outside, 10));
        Assert.Throws<ArgumentException>(() => arena.Adopt("..", 10));
        Assert.Throws<ArgumentException>(() => arena.Adopt("w1-link", 10));
        Assert.Throws<ArgumentException>(() => arena.Adopt(own.Segment, 10));
        var shortFile = Assert.Throws<ArgumentOutOfRangeException>(() => arena.Adopt("w1-1", 101));
        Assert.Contains("100 bytes", shortFile.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => arena.Adopt("t000001", 10));
        Assert.True(File.Exists(outside));
        Assert.Equal(10, arena.Allocated);
    }

    [Fact]
    public void TryAdopt_over_capacity_is_false_and_leaves_the_file()
    {
        using var arena = NewArena(capacity: 1L << 20);
        var path = Path.Combine(arena.Directory, "w1-big");
        File.WriteAllBytes(path, new byte[2 << 20]);
        Assert.False(arena.TryAdopt("w1-big", 2 << 20, out _));
        Assert.True(File.Exists(path));
        Assert.Equal(0, arena.Reserved);
        Assert.Throws<InvalidOperationException>(() => arena.Adopt("w1-big", 2 << 20));
    }

    [Fact]
    public void A_full_dev_shm_fails_the_allocation_and_leaves_no_file()
    {
        var full = false;
        using var arena = _scope.NewArena(new ArenaOptions
        {
            Capacity = 64L << 20,
            SlabSegmentSize = 8L << 20,
            SimulateNoSpace = (_, _, _) => Volatile.Read(ref full),
        });
        Assert.True(arena.TryAllocate(100, out var first)); // a segment exists, with a slab for 112-byte slots
        var files = Directory.GetFiles(arena.Directory).Order().ToArray();
        var before = (arena.Used, arena.Reserved, arena.Allocated);

        Volatile.Write(ref full, true);
        Assert.False(arena.TryAllocate(1 << 20, out _));        // large: file creation fails
        Assert.False(arena.TryAllocate(5000, out _));           // small: a new slab cannot be reserved
        Assert.True(arena.TryAllocate(100, out var sameSlab));  // a free slot in a reserved slab needs no new space
        arena.Free(sameSlab);
        Assert.Equal(files, Directory.GetFiles(arena.Directory).Order().ToArray());
        Assert.Equal(before, (arena.Used, arena.Reserved, arena.Allocated));

        Volatile.Write(ref full, false);
        Assert.True(arena.TryAllocate(1 << 20, out _));
        Assert.True(arena.TryAllocate(5000, out _));
        arena.Free(first);
    }

    [Fact]
    public void The_pages_of_an_emptied_slab_serve_another_size_class()
    {
        // No fragmentation reserve: the slot budget is the whole 4 MiB.
        using var arena = NewArena(capacity: 4L << 20, reserve: 0);
        var small = new List<Extent>();
        while (arena.TryAllocate(600, out var e))
            small.Add(e);
        Assert.True(arena.Reserved > (4L << 20) - (64 << 10), $"reserved only {arena.Reserved}");
        Assert.False(arena.TryAllocate(12_000, out _)); // every page belongs to the 640-byte class
        var offsets = small.Select(e => (e.Segment, e.Offset / arena.Options.PageSize)).ToHashSet();

        foreach (var e in small)
            arena.Free(e);
        var large = new List<Extent>();
        while (arena.TryAllocate(12_000, out var e))
            large.Add(e);
        Assert.True(large.Count * 12_288L > (4L << 20) * 7 / 8, $"only {large.Count} 12 KB objects fit after the 600 B ones left");
        Assert.Contains(large, e => offsets.Contains((e.Segment, e.Offset / arena.Options.PageSize)));
        Assert.True(arena.Reserved <= arena.Capacity);
    }

    [Fact]
    public void Allocation_fills_the_current_slab_then_the_lowest_partial_one()
    {
        using var arena = NewArena();
        var slots = (int)(arena.Options.PageSize / 640); // 600-byte objects: 640-byte slots, one-page slabs
        var all = new List<Extent>();
        for (var i = 0; i < 3 * slots; i++)
        {
            Assert.True(arena.TryAllocate(600, out var e));
            all.Add(e);
        }
        var slabOf = (Extent e) => (e.Segment, e.Offset / arena.Options.PageSize);
        var (a, b, c) = (all[5], all[slots + 5], all[2 * slots + 5]); // one in each slab; c's slab is the current one
        arena.Free(b);
        arena.Free(c);
        arena.Free(a);
        Assert.True(arena.TryAllocate(600, out var first));
        Assert.True(arena.TryAllocate(600, out var second));
        Assert.True(arena.TryAllocate(600, out var third));
        Assert.Equal(c, first);                    // the current slab first
        Assert.Equal(slabOf(a), slabOf(second));   // then the lowest partial slab
        Assert.Equal(slabOf(b), slabOf(third));
    }

    [Fact]
    public void An_emptied_slab_gives_its_memory_back_to_the_os()
    {
        using var arena = NewArena();
        var extents = new List<Extent>();
        for (var i = 0; i < 1000; i++) // 40 one-page slabs of 640-byte slots
        {
            Assert.True(arena.TryAllocate(600, out var e));
            extents.Add(e);
        }
        var segment = Path.Combine(arena.Directory, extents[0].Segment);
        var reserved = AllocatedBytes(segment);
        Assert.True(reserved >= 40 * arena.Options.PageSize, $"only {reserved} bytes of the segment are allocated"); // fallocated, though never written
        foreach (var e in extents)
            arena.Free(e);
        var after = AllocatedBytes(segment);
        Assert.True(after <= arena.Options.PageSize, $"{after} bytes stay allocated after every slab but the current one emptied");
        Assert.Equal(arena.Options.PageSize, arena.Reserved);
    }

    [Fact]
    public void An_idle_class_gives_up_its_empty_slab_when_another_class_needs_the_room()
    {
        // 96 KiB: a 640-byte slab (16 KiB) and one 48 KiB slab of 12 KiB slots, but not two of those.
        using var arena = NewArena(capacity: 96 << 10, reserve: 0);
        Assert.True(arena.TryAllocate(600, out var small));
        arena.Free(small); // its class keeps the empty slab as current
        for (var i = 0; i < 8; i++)
            Assert.True(arena.TryAllocate(12_000, out _), $"12 KB object {i}");
        Assert.Equal(0, arena.GetSizeClassStats()[SizeClasses.IndexOf(600)].Slabs);
    }

    private static long AllocatedBytes(string path)
    {
        using var stat = Process.Start(new ProcessStartInfo("stat", ["-c", "%b %B", path]) { RedirectStandardOutput = true })!;
        var parts = stat.StandardOutput.ReadToEnd().Split(' ', StringSplitOptions.TrimEntries);
        stat.WaitForExit();
        return long.Parse(parts[0], System.Globalization.CultureInfo.InvariantCulture) * long.Parse(parts[1], System.Globalization.CultureInfo.InvariantCulture);
    }

    [Fact]
    public void Under_the_production_mix_fragmentation_stays_small_and_the_cache_fills()
    {
        // 25% of objects < 600 B, 80% < 12 KB, 1% large (up to 4 MiB); the cache is kept full by
        // random eviction, the worst case for stranded free slots.
        const long capacity = 128L << 20;
        using var arena = NewArena(capacity: capacity, segment: 64L << 20);
        var random = new Random(20211101);
        var live = new List<Extent>();
        long attempts = 0, fragmentationFailures = 0;
        long Next() => random.NextDouble() switch
        {
            < 0.25 => random.Next(1, 600),
            < 0.80 => random.Next(600, 12 * 1024),
            < 0.99 => (long)Math.Exp(random.NextDouble() * (Math.Log(256 * 1024) - Math.Log(12 * 1024)) + Math.Log(12 * 1024)),
            _ => random.Next(256 * 1024 + 1, 4 << 20),
        };
        var slotBudget = capacity - capacity / 16;
        var fill = new List<double>();
        var stranded = new List<long>();
        for (var op = 0; op < 200_000; op++)
        {
            var length = Next();
            attempts++;
            var evicted = 0;
            Extent e;
            while (!arena.TryAllocate(length, out e))
            {
                var slot = length > arena.Options.LargeObjectThreshold ? length : SizeClasses.SizeOf(SizeClasses.IndexOf(length));
                if (evicted == 0 && arena.Used + slot <= slotBudget)
                    fragmentationFailures++; // the slot budget had room, but no slab (or file space) could be had
                var victim = random.Next(live.Count);
                arena.Free(live[victim]);
                live[victim] = live[^1];
                live.RemoveAt(live.Count - 1);
                evicted++;
            }
            live.Add(e);
            Assert.True(arena.Reserved <= capacity, $"reserved {arena.Reserved} > capacity at op {op}");
            if (op > 50_000 && op % 1000 == 0)
            {
                fill.Add((double)arena.Used / slotBudget);
                stranded.Add(arena.GetSizeClassStats().Sum(s => s.FreeSlots * s.SlotSize));
            }
        }

        var stats = arena.GetSizeClassStats();
        var slotBytes = stats.Sum(s => s.LiveSlots * s.SlotSize);
        var objectBytes = stats.Sum(s => s.LiveBytes);
        var objects = stats.Sum(s => s.LiveSlots);
        Assert.True(slotBytes - objectBytes <= objectBytes / 8 + 16 * objects, $"internal waste {slotBytes - objectBytes} of {objectBytes}");
        Assert.True(stranded.Max() <= capacity / 20, $"up to {stranded.Max()} bytes of free slots were stranded in partial slabs");
        Assert.True(fragmentationFailures * 1000 < attempts, $"{fragmentationFailures} of {attempts} allocations failed for fragmentation");
        Assert.True(fill.Average() > 0.95, $"the cache was only {fill.Average():P1} of its slot budget full on average");
        foreach (var x in live)
            arena.Free(x);
        Assert.Equal(0, arena.Used);
    }

    [Fact]
    public void CleanStale_removes_directories_of_dead_processes_and_keeps_live_ones()
    {
        var root = _scope.Root;
        var deadPid = int.Parse(File.ReadAllText("/proc/sys/kernel/pid_max").Trim(), System.Globalization.CultureInfo.InvariantCulture) + 1;
        using var sleeper = Process.Start("sleep", "60");
        try
        {
            string Make(string name)
            {
                var dir = Path.Combine(root, name);
                Directory.CreateDirectory(dir);
                File.WriteAllText(Path.Combine(dir, "s000001"), "x");
                return dir;
            }
            var dead = Make($"faast-app-{deadPid}");
            var mine = Make($"faast-app-{Environment.ProcessId}");
            var live = Make($"faast-app-{sleeper.Id}");
            // Named for a live pid but last modified before that process started: the pid was recycled.
            var oldOwner = Make("faast-app2-" + sleeper.Id);
            Directory.SetLastWriteTimeUtc(oldOwner, new DateTime(2000, 1, 1, 0, 0, 0, DateTimeKind.Utc));
            var otherApp = Make($"faast-other-{deadPid}");
            var notPid = Make("faast-app-12x");

            Assert.Equal(1, SharedMemoryArena.CleanStale(root, "faast-app"));
            Assert.False(Directory.Exists(dead));
            Assert.True(Directory.Exists(mine));
            Assert.True(Directory.Exists(live));
            Assert.True(Directory.Exists(otherApp));
            Assert.True(Directory.Exists(notPid));

            Assert.Equal(1, SharedMemoryArena.CleanStale(root, "faast-app2"));
            Assert.False(Directory.Exists(oldOwner));
        }
        finally
        {
            sleeper.Kill();
            sleeper.WaitForExit();
        }
    }

    [Fact]
    public void Dispose_unmaps_and_deletes_every_file_and_the_directory()
    {
        var arena = NewArena();
        var extents = new List<Extent>();
        foreach (var length in new long[] { 10, 5000, 100_000, 1 << 20, 3 << 20 })
        {
            Assert.True(arena.TryAllocate(length, out var e));
            extents.Add(e);
        }
        File.WriteAllBytes(Path.Combine(arena.Directory, "w9-9"), [1, 2, 3]); // a worker's leftover
        Assert.Equal(4, Directory.GetFiles(arena.Directory).Length); // one segment, two large files, the leftover

        arena.Dispose();
        Assert.False(Directory.Exists(arena.Directory));
        Assert.Throws<ObjectDisposedException>(() => extents[0].Span.Length);
        Assert.Throws<ObjectDisposedException>(() => arena.TryAllocate(10, out _));
    }

    [Fact]
    public void A_zero_length_object_is_the_empty_extent_and_costs_nothing()
    {
        using var arena = NewArena();
        Assert.True(arena.TryAllocate(0, out var e));
        Assert.True(e.IsEmpty);
        Assert.Equal("", e.Segment);
        Assert.Equal(0, e.Span.Length);
        Assert.Equal(-1, e.OpenReadStream().ReadByte());
        arena.Free(e);
        Assert.Equal(0, arena.Reserved);
        Assert.Empty(Directory.GetFiles(arena.Directory));

        File.WriteAllBytes(Path.Combine(arena.Directory, "w1-empty"), []);
        Assert.True(arena.Adopt("w1-empty", 0).IsEmpty);
        Assert.False(File.Exists(Path.Combine(arena.Directory, "w1-empty")));
    }

    [Fact]
    public void Freeing_an_extent_twice_throws()
    {
        using var arena = NewArena();
        Assert.True(arena.TryAllocate(100, out var small));
        Assert.True(arena.TryAllocate(100, out var keep));
        Assert.True(arena.TryAllocate(1 << 20, out var large));
        arena.Free(small);
        arena.Free(large);
        Assert.Throws<InvalidOperationException>(() => arena.Free(small));
        Assert.Throws<InvalidOperationException>(() => arena.Free(large));
        Assert.Equal(100, arena.Allocated);
        arena.Free(keep);
    }

    [Fact]
    public void Streams_reach_every_byte_and_stop_at_the_end()
    {
        using var arena = NewArena();
        var data = new byte[3_000_000];
        new Random(3).NextBytes(data);
        Assert.True(arena.TryAllocate(data.Length, out var e));
        using (var w = e.OpenWriteStream())
        {
            w.Write(data);
            Assert.Throws<NotSupportedException>(() => w.WriteByte(1));
        }
        using var r = e.OpenReadStream();
        var back = new byte[data.Length];
        r.ReadExactly(back);
        Assert.Equal(data, back);
        Assert.Equal(data.AsSpan(2_999_000, 1000).ToArray(), e.GetSpan(2_999_000, 1000).ToArray());
        Assert.Throws<ArgumentOutOfRangeException>(() => e.GetSpan(2_999_001, 1000));
    }

    [Fact]
    public void An_object_over_2_GiB_is_reached_through_windows_and_streams()
    {
        using var arena = NewArena(capacity: 3L << 30);
        var length = (2L << 30) + 4096;
        Assert.True(arena.TryAllocate(length, out var e));
        Assert.Throws<InvalidOperationException>(() => e.Span.Length);
        e.GetSpan(length - 10, 10).Fill(0xAB);
        using var r = e.OpenReadStream();
        r.Position = length - 10;
        var tail = new byte[10];
        r.ReadExactly(tail);
        Assert.All(tail, b => Assert.Equal(0xAB, b));
        Assert.Equal(length, r.Length);
        arena.Free(e);
    }

    [Fact]
    public void Concurrent_allocations_and_frees_keep_bytes_apart_and_books_balanced()
    {
        using var arena = NewArena(capacity: 256L << 20, segment: 16L << 20);
        var sizes = new long[] { 16, 100, 600, 3000, 12_000, 70_000, 256 * 1024, 300_000 };
        var errors = 0;
        Parallel.For(0, 8, new ParallelOptions { MaxDegreeOfParallelism = 8 }, t =>
        {
            var random = new Random(t);
            var mine = new List<(Extent, int)>();
            for (var i = 0; i < 5000; i++)
            {
                if (mine.Count > 0 && (random.Next(2) == 0 || mine.Count > 50))
                {
                    var k = random.Next(mine.Count);
                    var (e, seed) = mine[k];
                    if (!Holds(e, seed))
                        Interlocked.Increment(ref errors);
                    arena.Free(e);
                    mine[k] = mine[^1];
                    mine.RemoveAt(mine.Count - 1);
                }
                else if (arena.TryAllocate(sizes[random.Next(sizes.Length)], out var e))
                {
                    var seed = t * 100_000 + i;
                    Fill(e, seed);
                    mine.Add((e, seed));
                }
            }
            foreach (var (e, seed) in mine)
            {
                if (!Holds(e, seed))
                    Interlocked.Increment(ref errors);
                arena.Free(e);
            }
        });
        Assert.Equal(0, errors);
        Assert.Equal(0, arena.Allocated);
        Assert.Equal(0, arena.Used);
        Assert.Equal(0, arena.LargeObjectCount);
        Assert.All(arena.GetSizeClassStats(), s => Assert.Equal(0, s.LiveSlots));
    }
}
