using System.Collections.Concurrent;
using System.Globalization;

// The arena is Linux-only (/dev/shm, fallocate); the constructor says so on other systems.
#pragma warning disable CA1416

namespace FaaST.Cachelet.Memory;

/// <summary>Occupancy of one slab size class.</summary>
/// <param name="SlotSize">Bytes per slot (the largest object length the class takes).</param>
/// <param name="SlabSize">Bytes per slab of this class.</param>
/// <param name="Slabs">Slabs the class holds.</param>
/// <param name="LiveSlots">Slots in use.</param>
/// <param name="LiveBytes">Object bytes in those slots (the rest of the slots is internal waste).</param>
/// <param name="FreeSlots">Free slots in the class's slabs (external fragmentation, unless the class uses them next).</param>
public readonly record struct SizeClassStats(int SlotSize, long SlabSize, int Slabs, long LiveSlots, long LiveBytes, long FreeSlots);

/// <summary>
/// The cachelet's memory: files in one directory under /dev/shm (mode 0700, files 0600), mapped
/// read-write here and read-only by the language workers, which find an object by (file name,
/// offset, length). File names are never reused within the directory ("s000001" slab segments,
/// "l000002" large objects, one counter), so a worker may cache mappings by name.
/// <list type="bullet">
/// <item>Objects up to <see cref="ArenaOptions.LargeObjectThreshold"/> take a slot of a size class
/// (<see cref="SizeClasses"/>: internal waste &lt; max(16 B, length/8)). A class takes slabs (runs of
/// pages, the fewest with an unusable tail ≤ 1/8) from the segments; a slab that falls empty goes
/// back to its segment at once (its memory punched out of the file) and any class can take its
/// pages next. Each class keeps its current slab while empty, to avoid churn, until another class
/// needs the room. Allocation fills the current slab, then the lowest-addressed partial one, so
/// live slots gather in few slabs and the others drain.</item>
/// <item>Larger objects get an exactly sized file of their own, deleted when freed.</item>
/// </list>
/// Accounting: <see cref="Reserved"/> (slabs plus large files, page-rounded: what /dev/shm holds)
/// never exceeds <see cref="Capacity"/>; slots are handed out only while <see cref="Used"/> stays
/// within Capacity × (1 − <see cref="ArenaOptions.FragmentationReserve"/>), so free slots in
/// half-empty slabs (external fragmentation) have that reserve to live in before they block an
/// allocation. Every range is reserved with fallocate, so a full /dev/shm is a failed allocation,
/// never a SIGBUS.
/// <para>
/// Thread-safe. Allocation and free take only their size class's lock; the page lock is taken when
/// a class needs a new slab or gives one back, and to create or delete a segment. Large objects
/// take no lock. Dispose must come after every other use.
/// </para>
/// </summary>
public sealed class SharedMemoryArena : IDisposable
{
    private const UnixFileMode DirectoryMode = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
    private const UnixFileMode FileMode600 = UnixFileMode.UserRead | UnixFileMode.UserWrite;

    private readonly ArenaOptions _options;
    private readonly SizeClass[] _classes;
    private readonly long _slotLimit;
    private readonly long _osPage = Environment.SystemPageSize;
    private readonly Lock _pageLock = new();
    private readonly List<SlabSegment> _segments = [];
    private readonly ConcurrentDictionary<string, MappedFile> _large = new(StringComparer.Ordinal);
    // The directory, opened once when it was created (before it was given to the workers' user, who
    // may rename it or anything in it): every file is created, opened and deleted relative to it.
    private readonly Microsoft.Win32.SafeHandles.SafeFileHandle _directoryHandle;
    private readonly uint _workerUserId;
    private long _nextFileId;
    private long _used;
    private long _reserved;
    private long _largeAllocated;
    private volatile bool _disposed;

    /// <summary>Creates <paramref name="directory"/> (mode 0700); it must not exist or be empty.</summary>
    public SharedMemoryArena(string directory, ArenaOptions options)
    {
        ArgumentException.ThrowIfNullOrEmpty(directory);
        ArgumentNullException.ThrowIfNull(options);
        if (!OperatingSystem.IsLinux())
            throw new PlatformNotSupportedException("the shared-memory arena needs Linux (/dev/shm, fallocate)");
        Validate(options);
        _options = options;
        _slotLimit = options.Capacity - (long)(options.Capacity * options.FragmentationReserve);
        _classes = new SizeClass[SizeClasses.CountFor(options.LargeObjectThreshold)];
        for (var i = 0; i < _classes.Length; i++)
        {
            var slot = SizeClasses.SizeOf(i);
            var pages = SlabPagesFor(slot, options.PageSize);
            if ((long)pages * options.PageSize > options.SlabSegmentSize)
                throw new ArgumentException($"SlabSegmentSize {options.SlabSegmentSize} cannot hold a slab of the {slot}-byte class ({(long)pages * options.PageSize} bytes); raise it or lower LargeObjectThreshold", nameof(options));
            _classes[i] = new SizeClass(i, (int)slot, pages);
        }

        Directory = Path.GetFullPath(directory);
        if (System.IO.Directory.Exists(Directory) && System.IO.Directory.EnumerateFileSystemEntries(Directory).Any())
            throw new IOException($"{Directory} already holds files: another arena uses it, or a crashed run left it (see CleanStale)");
        System.IO.Directory.CreateDirectory(Directory, DirectoryMode);
        _directoryHandle = DirectoryFiles.OpenDirectory(Directory);
        File.SetUnixFileMode(_directoryHandle, DirectoryMode);
        options.Owner?.ApplyTo(_directoryHandle, Directory);
        _workerUserId = options.Owner is { } owner ? (uint)owner.UserId : DirectoryFiles.EffectiveUserId();
    }

    /// <summary>The directory holding the segment files (absolute).</summary>
    public string Directory { get; }

    public ArenaOptions Options => _options;

    /// <summary>See <see cref="ArenaOptions.Capacity"/>.</summary>
    public long Capacity => _options.Capacity;

    /// <summary>Object bytes in live extents (what callers asked for). Summed over the size classes
    /// (which count under their locks, keeping two atomics off the allocation path): a moment's view.</summary>
    public long Allocated
    {
        get
        {
            var total = Volatile.Read(ref _largeAllocated);
            foreach (var c in _classes)
                total += Volatile.Read(ref c.LiveBytes);
            return total;
        }
    }

    /// <summary>Bytes of live slots plus large objects (page-rounded): <see cref="Allocated"/> plus internal waste.</summary>
    public long Used => Volatile.Read(ref _used);

    /// <summary>
    /// Raised with a file's name after the arena deleted it (a freed large object, an empty slab
    /// segment), so that processes which keep it mapped can unmap it and its memory goes back to the
    /// OS. May be raised under an arena lock: handlers must only queue work.
    /// </summary>
    public event Action<string>? FileDeleted;

    /// <summary>Bytes held in /dev/shm: slabs assigned to size classes plus large files (page-rounded). At most <see cref="Capacity"/>.</summary>
    public long Reserved => Volatile.Read(ref _reserved);

    /// <summary>Slab segment files that exist now.</summary>
    public int SegmentCount
    {
        get
        {
            lock (_pageLock)
                return _segments.Count;
        }
    }

    /// <summary>Large-object files (own or adopted) that exist now.</summary>
    public int LargeObjectCount => _large.Count;

    /// <summary>Occupancy per size class, smallest class first.</summary>
    public IReadOnlyList<SizeClassStats> GetSizeClassStats()
    {
        var stats = new SizeClassStats[_classes.Length];
        for (var i = 0; i < _classes.Length; i++)
        {
            var c = _classes[i];
            lock (c.Lock)
            {
                var slots = c.SlotsPerSlab(_options.PageSize);
                stats[i] = new SizeClassStats(c.SlotSize, (long)c.SlabPages * _options.PageSize, c.Slabs, c.LiveSlots, c.LiveBytes, c.Slabs * slots - c.LiveSlots);
            }
        }
        return stats;
    }

    /// <summary>
    /// Allocates <paramref name="length"/> bytes (0 allowed: the empty extent). False, never an
    /// exception, when the capacity would be exceeded or the OS refuses the memory.
    /// </summary>
    public bool TryAllocate(long length, out Extent extent)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (length == 0)
        {
            extent = default;
            return true;
        }
        if (length > _options.LargeObjectThreshold)
            return TryAllocateLarge(length, out extent);

        var sizeClass = _classes[SizeClasses.IndexOf(length)];
        if (!TryAddBounded(ref _used, sizeClass.SlotSize, _slotLimit))
        {
            extent = default;
            return false;
        }
        lock (sizeClass.Lock)
        {
            var slab = sizeClass.Current;
            if (slab is null || slab.IsFull)
                slab = NextSlab(sizeClass);
            if (slab is not null)
            {
                var slot = slab.Take();
                sizeClass.LiveSlots++;
                Volatile.Write(ref sizeClass.LiveBytes, sizeClass.LiveBytes + length);
                extent = new Extent(slab.Segment, slab.Offset + (long)slot * sizeClass.SlotSize, length, sizeClass.Index);
                return true;
            }
        }
        Interlocked.Add(ref _used, -sizeClass.SlotSize);
        extent = default;
        return false;
    }

    /// <summary>Frees an extent this arena allocated or adopted. A second free of the same extent throws.</summary>
    public void Free(in Extent extent)
    {
        var file = extent.File;
        if (file is null)
            return;
        if (!ReferenceEquals(file.Owner, this))
            throw new ArgumentException($"{extent} belongs to another arena", nameof(extent));
        if (_disposed)
            return;
        if (file.IsLarge)
        {
            FreeLarge(file, extent);
            return;
        }

        var segment = (SlabSegment)file;
        var page = (int)(extent.Offset / _options.PageSize);
        var slab = Volatile.Read(ref segment.PageMap[page]);
        if (slab is null || slab.Class.Index != extent.SizeClass)
            throw new InvalidOperationException($"{extent} is not allocated (freed twice?)");
        var sizeClass = slab.Class;
        lock (sizeClass.Lock)
        {
            var relative = extent.Offset - slab.Offset;
            var wasFull = slab.IsFull;
            if (segment.PageMap[page] != slab || relative % sizeClass.SlotSize != 0 || !slab.Release((int)(relative / sizeClass.SlotSize)))
                throw new InvalidOperationException($"{extent} is not allocated (freed twice?)");
            sizeClass.LiveSlots--;
            Volatile.Write(ref sizeClass.LiveBytes, sizeClass.LiveBytes - extent.Length);
            if (slab != sizeClass.Current)
            {
                if (slab.Live == 0)
                {
                    if (!wasFull)
                        sizeClass.Partial.Remove(slab);
                    ReleaseSlab(slab);
                }
                else if (wasFull)
                {
                    sizeClass.Partial.Add(slab);
                }
            }
        }
        Interlocked.Add(ref _used, -sizeClass.SlotSize);
    }

    /// <summary>
    /// Takes over a file a worker wrote into the directory (its output), as an extent of its first
    /// <paramref name="length"/> bytes: a large one as it is (mapped, no copy, same file, renamed to
    /// one of the arena's own names), a small one copied into a slot and the file deleted.
    /// </summary>
    /// <exception cref="InvalidOperationException">Over capacity, or the OS refused the memory; the file is left as it was.</exception>
    public Extent Adopt(string fileName, long length)
    {
        if (!TryAdopt(fileName, length, out var extent))
            throw new InvalidOperationException($"cannot adopt {fileName} ({length} bytes): the arena is full ({Reserved} of {Capacity} bytes reserved) or /dev/shm refused the memory");
        return extent;
    }

    /// <summary>
    /// <see cref="Adopt"/>, but false when the arena is over capacity or the OS refuses the memory;
    /// the file is then left as it was. A file that cannot be taken over at all (see
    /// <see cref="OpenWorkerFile"/>) is deleted and the exception says why.
    /// </summary>
    /// <exception cref="ArgumentException">See <see cref="OpenWorkerFile"/>.</exception>
    /// <exception cref="FileNotFoundException">No such file.</exception>
    /// <exception cref="ArgumentOutOfRangeException">The file is shorter than <paramref name="length"/>.</exception>
    public bool TryAdopt(string fileName, long length, out Extent extent)
    {
        var file = OpenWorkerFile(fileName, length);
        bool adopted;
        try
        {
            adopted = TryAdopt(file, out extent);
        }
        catch
        {
            file.Dispose();
            throw;
        }
        if (adopted)
            file.Dispose();
        else
            file.Close(); // left as it was, for the caller
        return adopted;
    }

    /// <summary>
    /// Opens a file a worker wrote into the directory, once and for all: the name is resolved
    /// relative to the directory descriptor without following a symbolic link, and the opened file
    /// itself must be a regular file with one link, owned by the workers' user (the arena's
    /// <see cref="ArenaOptions.Owner"/>, else this process's user). Everything after this reads or
    /// changes that open file, never the name again, so a name swapped for a link after the check
    /// cannot lead anywhere. On any refusal the worker's entry is deleted (no file is left behind)
    /// and the exception names the file and what is wrong.
    /// </summary>
    /// <exception cref="ArgumentException">Not a plain file name, one of the arena's own names, a
    /// symbolic link, not a regular file, hard-linked, or owned by another user.</exception>
    /// <exception cref="FileNotFoundException">No such file.</exception>
    /// <exception cref="ArgumentOutOfRangeException">The file is shorter than <paramref name="length"/>.</exception>
    public WorkerFile OpenWorkerFile(string fileName, long length)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        ObjectDisposedException.ThrowIf(_disposed, this);
        CheckWorkerName(fileName);
        // Read-write: a large output is truncated to its length and mapped read-write. Opening
        // cannot block (O_NONBLOCK: a FIFO) and follows no link (O_NOFOLLOW).
        var handle = DirectoryFiles.OpenNoFollow(_directoryHandle, fileName, write: true, out var error);
        if (handle is null)
        {
            if (error == DirectoryFiles.ENOENT)
                throw new FileNotFoundException($"{fileName} does not exist in {Directory}", Path.Combine(Directory, fileName));
            DirectoryFiles.Unlink(_directoryHandle, fileName);
            throw new ArgumentException(error == DirectoryFiles.ELOOP
                ? $"{fileName} in {Directory} is a symbolic link; only regular files the worker wrote can be adopted (deleted)"
                : $"{fileName} in {Directory} cannot be opened: {System.Runtime.InteropServices.Marshal.GetPInvokeErrorMessage(error)} (deleted)", nameof(fileName));
        }
        try
        {
            var status = DirectoryFiles.Status(handle, fileName);
            var wrong = !status.IsRegular ? "is not a regular file"
                : status.Links != 1 ? $"has {status.Links} links (another name for a file the worker did not write)"
                : status.UserId != _workerUserId ? $"belongs to uid {status.UserId}, not to the workers' uid {_workerUserId}"
                : null;
            if (wrong is not null)
                throw new ArgumentException($"{fileName} in {Directory} {wrong}; only regular files the worker wrote can be adopted (deleted)", nameof(fileName));
            if (status.Size < length)
                throw new ArgumentOutOfRangeException(nameof(length), $"{fileName} in {Directory} holds {status.Size} bytes, fewer than the {length} the worker announced (deleted)");
            return new WorkerFile(this, fileName, handle, length);
        }
        catch
        {
            handle.Dispose();
            DirectoryFiles.Unlink(_directoryHandle, fileName);
            throw;
        }
    }

    /// <summary>
    /// Takes over a worker's file opened by <see cref="OpenWorkerFile"/> (see <see cref="Adopt"/>);
    /// false when the arena is over capacity or the OS refuses the memory, and the file is then
    /// still the caller's to read. On success the worker's name is gone: a large file lives on
    /// under an arena name ("l" + number), which a worker's clean-up of its own files cannot reach.
    /// </summary>
    public unsafe bool TryAdopt(WorkerFile file, out Extent extent)
    {
        ArgumentNullException.ThrowIfNull(file);
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (!ReferenceEquals(file.Arena, this))
            throw new ArgumentException($"{file.Name} was opened by another arena", nameof(file));
        var handle = file.Handle ?? throw new InvalidOperationException($"{file.Name} was adopted or closed already");
        var length = file.Length;
        if (length <= _options.LargeObjectThreshold)
        {
            if (!TryAllocate(length, out extent))
                return false;
            try
            {
                var window = length == 0 ? [] : new Span<byte>(extent.Pointer, (int)length);
                var done = 0;
                while (done < window.Length)
                {
                    var n = RandomAccess.Read(handle, window[done..], done);
                    if (n == 0)
                        throw new EndOfStreamException($"{file.Name} ended after {done} of {length} bytes");
                    done += n;
                }
            }
            catch
            {
                Free(extent);
                extent = default;
                throw;
            }
            file.Dispose(); // copied: the worker's file goes
            return true;
        }

        var charge = RoundUp(length, _osPage);
        if (!TryReserve(charge, null))
        {
            extent = default;
            return false;
        }
        string? linked = null;
        try
        {
            // Only through the descriptor: the mode, the length and the memory of the file that was
            // checked, whatever the name now points to.
            File.SetUnixFileMode(handle, FileMode600);
            if (RandomAccess.GetLength(handle) > length)
                RandomAccess.SetLength(handle, length);
            // Fill any holes the writer left, so that the object's memory is really there (and counted).
            FileSpace.Reserve(handle, file.Name, 0, length, _options.SimulateNoSpace);
            var (id, name) = LinkUnderOwnName(handle, file.Name);
            linked = name;
            file.TakeHandle(); // the mapped file owns the descriptor now
            var stream = new FileStream(handle, FileAccess.ReadWrite, bufferSize: 0);
            MappedFile mapped;
            try
            {
                mapped = new MappedFile(this, id, name, Path.Combine(Directory, name), stream, length, isLarge: true);
            }
            catch
            {
                stream.Dispose();
                throw;
            }
            _large[name] = mapped;
            Interlocked.Add(ref _used, charge);
            Interlocked.Add(ref _largeAllocated, length);
            extent = new Extent(mapped, 0, length, -1);
            file.Dispose(); // the worker's name goes; the file stays under the arena's
            return true;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            Interlocked.Add(ref _reserved, -charge);
            if (linked is null)
            {
                extent = default;
                return false;
            }
            DirectoryFiles.Unlink(_directoryHandle, linked);
            file.Dispose();
            throw;
        }
        catch
        {
            Interlocked.Add(ref _reserved, -charge);
            if (linked is not null)
            {
                DirectoryFiles.Unlink(_directoryHandle, linked);
                file.Dispose();
            }
            throw;
        }
    }

    /// <summary>Gives an adopted file a fresh large-object name of the arena (another process may
    /// have created a file under the next name: then the one after).</summary>
    private (long Id, string Name) LinkUnderOwnName(Microsoft.Win32.SafeHandles.SafeFileHandle handle, string fileName)
    {
        for (var attempt = 0; ; attempt++)
        {
            var (id, name, _) = NextFile(SharedMemoryNames.LargeObject);
            var error = -DirectoryFiles.Link(handle, _directoryHandle, name);
            if (error == 0)
                return (id, name);
            if (error != DirectoryFiles.EEXIST || attempt == 15)
                throw new IOException($"cannot give {fileName} the arena's name {name} in {Directory}: {System.Runtime.InteropServices.Marshal.GetPInvokeErrorMessage(error)}", error);
        }
    }

    /// <summary>Deletes a worker's entry in the directory (never following a link), e.g. an output
    /// nobody took over. False if there was none.</summary>
    internal bool RemoveWorkerEntry(string fileName) => !_disposed && DirectoryFiles.Unlink(_directoryHandle, fileName);

    /// <summary>
    /// Deletes a worker's output file that will not be taken over (see <c>BlobCache.DiscardWorkerFile</c>); only a name
    /// of a worker's output (w&lt;pid&gt;-…), never one of the cache's own files. False if there was none.
    /// </summary>
    /// <exception cref="ArgumentException">Not a worker's output name.</exception>
    public bool DiscardWorkerFile(string fileName)
    {
        CheckWorkerName(fileName);
        return RemoveWorkerEntry(fileName);
    }

    /// <summary>
    /// Creates a file of the cache's own beside the arena's (a temporary file of an object larger
    /// than the cache): O_EXCL relative to the directory descriptor, 0600, given to the owner.
    /// </summary>
    /// <exception cref="IOException">The name is taken, or the OS refused.</exception>
    internal FileStream CreateSideFile(string name)
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        return CreateFile(name);
    }

    /// <summary>Deletes a file made by <see cref="CreateSideFile"/>; best effort (Dispose deletes the directory).</summary>
    internal void DeleteSideFile(string name)
    {
        if (!_disposed)
            TryDelete(name);
    }

    /// <summary>
    /// Opens one of the cache's own files in the directory (a segment, a temporary file) for reading
    /// it out to a worker or a peer: relative to the directory descriptor, not through a symbolic
    /// link, and only if it is still a regular file of the workers' user (the workers may replace
    /// any name in the directory; the host must never read something else in its place).
    /// </summary>
    /// <exception cref="IOException">No such file of the cache's (the message names it and why).</exception>
    internal Microsoft.Win32.SafeHandles.SafeFileHandle OpenForReading(string name)
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (name.Length == 0 || name is "." or ".." || name.Contains('/', StringComparison.Ordinal) || name.Contains('\0', StringComparison.Ordinal))
            throw new IOException($"\"{name}\" is not a file name in {Directory}");
        var handle = DirectoryFiles.OpenNoFollow(_directoryHandle, name, write: false, out var error)
            ?? throw new IOException(error == DirectoryFiles.ELOOP
                ? $"{name} in {Directory} was replaced by a symbolic link; it is not read"
                : $"cannot open {name} in {Directory}: {System.Runtime.InteropServices.Marshal.GetPInvokeErrorMessage(error)}", error);
        try
        {
            var status = DirectoryFiles.Status(handle, name);
            if (!status.IsRegular || status.UserId != _workerUserId)
                throw new IOException($"{name} in {Directory} was replaced by {(status.IsRegular ? $"a file of uid {status.UserId}" : "something not a regular file")}; it is not read");
            return handle;
        }
        catch
        {
            handle.Dispose();
            throw;
        }
    }

    /// <summary>The conventional directory of an app instance: ROOT/PREFIX-PID (e.g. /dev/shm/faast-myapp-1234).</summary>
    public static string InstanceDirectory(string root, string prefix) =>
        SharedMemoryNames.InstanceDirectory(root, prefix, Environment.ProcessId);

    /// <summary>
    /// Deletes the directories ROOT/PREFIX-PID whose process is gone (segments of a crashed run).
    /// A directory counts as its process's only if that process started before the directory was
    /// last modified, so a recycled pid does not keep a stale directory alive. Returns how many it
    /// deleted; directories it cannot delete are skipped.
    /// </summary>
    public static int CleanStale(string root, string prefix)
    {
        ArgumentException.ThrowIfNullOrEmpty(root);
        ArgumentException.ThrowIfNullOrEmpty(prefix);
        if (!System.IO.Directory.Exists(root))
            return 0;
        var removed = 0;
        foreach (var dir in System.IO.Directory.EnumerateDirectories(root))
        {
            var name = Path.GetFileName(dir);
            if (name.Length <= prefix.Length + 1 || !name.StartsWith(prefix, StringComparison.Ordinal) || name[prefix.Length] != '-')
                continue;
            var digits = name.AsSpan(prefix.Length + 1);
            if (digits.ContainsAnyExceptInRange('0', '9') || !int.TryParse(digits, NumberStyles.None, CultureInfo.InvariantCulture, out var pid))
                continue;
            var info = new DirectoryInfo(dir);
            if (info.LinkTarget is not null || IsOwnerAlive(pid, info.LastWriteTimeUtc))
                continue;
            try
            {
                System.IO.Directory.Delete(dir, recursive: true);
                removed++;
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // someone else's, or going away already
            }
        }
        return removed;
    }

    /// <summary>Unmaps every file and deletes the directory with everything in it.</summary>
    public void Dispose()
    {
        if (_disposed)
            return;
        _disposed = true;
        lock (_pageLock)
        {
            foreach (var segment in _segments)
                segment.Dispose();
            _segments.Clear();
        }
        foreach (var file in _large.Values)
            file.Dispose();
        _large.Clear();
        _directoryHandle.Dispose();
        try
        {
            System.IO.Directory.Delete(Directory, recursive: true);
        }
        catch (DirectoryNotFoundException)
        {
            // already gone
        }
    }

    // ---- slabs --------------------------------------------------------------------------

    /// <summary>The next slab for a class whose current one is full or missing (class lock held).</summary>
    private Slab? NextSlab(SizeClass sizeClass)
    {
        if (sizeClass.Partial.Count > 0)
        {
            var lowest = sizeClass.Partial.Min!;
            sizeClass.Partial.Remove(lowest);
            sizeClass.Current = lowest;
            return lowest;
        }
        var fresh = AcquireSlab(sizeClass);
        if (fresh is not null)
            sizeClass.Current = fresh;
        return fresh;
    }

    /// <summary>Takes pages for a new slab of the class (class lock held), or null if no room.</summary>
    private Slab? AcquireSlab(SizeClass sizeClass)
    {
        var bytes = (long)sizeClass.SlabPages * _options.PageSize;
        if (!TryReserve(bytes, sizeClass))
            return null;
        Slab? slab = null;
        lock (_pageLock)
        {
            foreach (var segment in _segments)
            {
                if (segment.TryTakeRun(sizeClass.SlabPages, out var first))
                {
                    slab = new Slab(segment, first, sizeClass.SlabPages, sizeClass);
                    break;
                }
            }
            if (slab is null && TryCreateSegment() is { } created && created.TryTakeRun(sizeClass.SlabPages, out var start))
                slab = new Slab(created, start, sizeClass.SlabPages, sizeClass);
        }
        if (slab is null)
        {
            Interlocked.Add(ref _reserved, -bytes);
            return null;
        }
        try
        {
            FileSpace.Reserve(slab.Segment.Stream.SafeFileHandle, slab.Segment.Name, slab.Offset, bytes, _options.SimulateNoSpace);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            lock (_pageLock)
                ReturnPages(slab);
            Interlocked.Add(ref _reserved, -bytes);
            return null;
        }
        for (var p = slab.FirstPage; p < slab.FirstPage + slab.Pages; p++)
            Volatile.Write(ref slab.Segment.PageMap[p], slab);
        sizeClass.Slabs++;
        return slab;
    }

    /// <summary>Gives an empty slab's pages back (class lock held); its memory is punched out first.</summary>
    private void ReleaseSlab(Slab slab)
    {
        if (slab.Class.Current == slab)
            slab.Class.Current = null;
        slab.Class.Slabs--;
        FileSpace.Release(slab.Segment.Stream.SafeFileHandle, slab.Offset, slab.Bytes);
        lock (_pageLock)
            ReturnPages(slab);
        Interlocked.Add(ref _reserved, -slab.Bytes);
    }

    /// <summary>Page lock held. Deletes the segment if it fell empty and is not the last one.</summary>
    private void ReturnPages(Slab slab)
    {
        var segment = slab.Segment;
        segment.ReturnRun(slab.FirstPage, slab.Pages);
        if (segment.FreePages == segment.PageCount && _segments.Count > 1)
        {
            _segments.Remove(segment);
            segment.Dispose();
            TryDelete(segment.Name);
            FileDeleted?.Invoke(segment.Name);
        }
    }

    /// <summary>Counts bytes against the capacity, giving up idle slabs of other classes if that makes room.</summary>
    private bool TryReserve(long bytes, SizeClass? except)
    {
        if (TryAddBounded(ref _reserved, bytes, _options.Capacity))
            return true;
        ReclaimIdleSlabs(except);
        return TryAddBounded(ref _reserved, bytes, _options.Capacity);
    }

    /// <summary>Releases the empty current slabs of other classes (never blocks on their locks).</summary>
    private void ReclaimIdleSlabs(SizeClass? except)
    {
        foreach (var other in _classes)
        {
            if (other == except || other.Current is not { Live: 0 } || !other.Lock.TryEnter())
                continue;
            try
            {
                if (other.Current is { Live: 0 } idle)
                    ReleaseSlab(idle);
            }
            finally
            {
                other.Lock.Exit();
            }
        }
    }

    /// <summary>Page lock held. A new sparse segment file, or null if the OS refuses.</summary>
    private SlabSegment? TryCreateSegment()
    {
        var (id, name, path) = NextFile(SharedMemoryNames.SlabSegment);
        FileStream? stream = null;
        try
        {
            stream = CreateFile(name);
            stream.SetLength(_options.SlabSegmentSize);
            var segment = new SlabSegment(this, id, name, path, stream, _options.SlabSegmentSize, _options.PageSize);
            _segments.Add(segment);
            return segment;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            stream?.Dispose();
            if (stream is not null)
                TryDelete(name);
            return null;
        }
    }

    // ---- large objects ------------------------------------------------------------------

    private bool TryAllocateLarge(long length, out Extent extent)
    {
        var charge = RoundUp(length, _osPage);
        if (!TryReserve(charge, null))
        {
            extent = default;
            return false;
        }
        var (id, name, path) = NextFile(SharedMemoryNames.LargeObject);
        FileStream? stream = null;
        try
        {
            stream = CreateFile(name);
            FileSpace.Reserve(stream.SafeFileHandle, name, 0, length, _options.SimulateNoSpace);
            var file = new MappedFile(this, id, name, path, stream, length, isLarge: true);
            _large[name] = file;
            Interlocked.Add(ref _used, charge);
            Interlocked.Add(ref _largeAllocated, length);
            extent = new Extent(file, 0, length, -1);
            return true;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            stream?.Dispose();
            if (stream is not null)
                TryDelete(name);
            Interlocked.Add(ref _reserved, -charge);
            extent = default;
            return false;
        }
    }

    private void FreeLarge(MappedFile file, in Extent extent)
    {
        if (!_large.TryRemove(new KeyValuePair<string, MappedFile>(file.Name, file)))
            throw new InvalidOperationException($"{extent} is not allocated (freed twice?)");
        file.Dispose();
        TryDelete(file.Name);
        FileDeleted?.Invoke(file.Name);
        var charge = RoundUp(file.Size, _osPage);
        Interlocked.Add(ref _used, -charge);
        Interlocked.Add(ref _reserved, -charge);
        Interlocked.Add(ref _largeAllocated, -extent.Length);
    }

    // ---- helpers ------------------------------------------------------------------------

    private (long Id, string Name, string Path) NextFile(char kind)
    {
        var id = Interlocked.Increment(ref _nextFileId);
        var name = SharedMemoryNames.HostFile(kind, id);
        return (id, name, Path.Combine(Directory, name));
    }

    /// <summary>A new file of the arena (O_EXCL, relative to the directory descriptor: never an
    /// existing file or a link someone put under the name), 0600, given to the owner.</summary>
    private FileStream CreateFile(string name)
    {
        var handle = DirectoryFiles.CreateNew(_directoryHandle, name, FileMode600);
        try
        {
            _options.Owner?.ApplyTo(handle, Path.Combine(Directory, name));
            return new FileStream(handle, FileAccess.ReadWrite, bufferSize: 0);
        }
        catch
        {
            handle.Dispose();
            DirectoryFiles.Unlink(_directoryHandle, name);
            throw;
        }
    }

    /// <summary>Throws unless NAME is a plain file name of a worker's output (w&lt;pid&gt;-…), none of the arena's own files.</summary>
    private void CheckWorkerName(string fileName)
    {
        ArgumentException.ThrowIfNullOrEmpty(fileName);
        if (fileName is "." or ".." || fileName.Contains('/', StringComparison.Ordinal) || fileName.Contains('\0', StringComparison.Ordinal))
            throw new ArgumentException($"\"{fileName}\" is not a file name in {Directory}: adopted files must be in the arena's directory", nameof(fileName));
        if (SharedMemoryNames.IsHostFile(fileName))
            throw new ArgumentException($"{fileName} is named like the cache's own files (s, l or t + digits); it cannot be adopted", nameof(fileName));
        // Workers write outputs only to w<pid>-<n> files: any other name is not an output, whoever wrote it.
        if (!SharedMemoryNames.IsWorkerOutputFile(fileName))
            throw new ArgumentException($"{fileName} in {Directory} is not named like a worker's output file (w<pid>-<n>); it cannot be adopted", nameof(fileName));
    }

    private static bool IsOwnerAlive(int pid, DateTime directoryWriteUtc)
    {
        if (pid == Environment.ProcessId)
            return true;
        if (!System.IO.Directory.Exists("/proc/" + pid.ToString(CultureInfo.InvariantCulture)))
            return false;
        try
        {
            using var process = System.Diagnostics.Process.GetProcessById(pid);
            // The owner created (and since modified) the directory after it started; a process that
            // started later only recycled the pid. One second of slack for clock granularity.
            return process.StartTime.ToUniversalTime() <= directoryWriteUtc.AddSeconds(1);
        }
        catch (Exception e) when (e is ArgumentException or InvalidOperationException or System.ComponentModel.Win32Exception)
        {
            return false;
        }
    }

    /// <summary>Deletes one of the arena's files; best effort (Dispose deletes the directory).</summary>
    private void TryDelete(string name) => DirectoryFiles.Unlink(_directoryHandle, name);

    /// <summary>The fewest pages that hold at least one slot with an unusable tail of at most 1/8 of the slab.</summary>
    internal static int SlabPagesFor(long slot, int pageSize)
    {
        for (var pages = 1; ; pages++)
        {
            var bytes = (long)pages * pageSize;
            if (bytes >= slot && bytes % slot * 8 <= bytes)
                return pages;
        }
    }

    private static long RoundUp(long value, long unit) => (value + unit - 1) / unit * unit;

    private static bool TryAddBounded(ref long counter, long delta, long limit)
    {
        var current = Volatile.Read(ref counter);
        while (true)
        {
            var next = current + delta;
            if (next > limit)
                return false;
            var seen = Interlocked.CompareExchange(ref counter, next, current);
            if (seen == current)
                return true;
            current = seen;
        }
    }

    private static void Validate(ArenaOptions o)
    {
        if (o.Capacity <= 0)
            throw new ArgumentException($"Capacity must be positive, not {o.Capacity}", nameof(o));
        if (o.PageSize < Environment.SystemPageSize || !int.IsPow2(o.PageSize) || o.PageSize > 64 << 20)
            throw new ArgumentException($"PageSize must be a power of two between the OS page size ({Environment.SystemPageSize}) and 64 MiB, not {o.PageSize}", nameof(o));
        if (o.SlabSegmentSize <= 0 || o.SlabSegmentSize % o.PageSize != 0 || o.SlabSegmentSize / o.PageSize > int.MaxValue / 2)
            throw new ArgumentException($"SlabSegmentSize must be a positive multiple of PageSize ({o.PageSize}), not {o.SlabSegmentSize}", nameof(o));
        if (o.LargeObjectThreshold < SizeClasses.Granule)
            throw new ArgumentException($"LargeObjectThreshold must be at least {SizeClasses.Granule}, not {o.LargeObjectThreshold}", nameof(o));
        if (o.FragmentationReserve is < 0 or > 0.5 || double.IsNaN(o.FragmentationReserve))
            throw new ArgumentException($"FragmentationReserve must be between 0 and 0.5, not {o.FragmentationReserve}", nameof(o));
    }
}
