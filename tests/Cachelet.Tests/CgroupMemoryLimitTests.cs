using FaaST.Cachelet.Daemon;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The cgroup reader over a fake root (its own /proc/self and /sys/fs/cgroup files); the real
/// cgroup, with a host process moved into it, is tested in Runtime.Tests (ProcessTests).
/// </summary>
public sealed class CgroupMemoryLimitTests : IDisposable
{
    private const long MiB = 1024 * 1024;
    private const string V1Mount = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory";
    private const string V2Mount = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";
    private readonly string _root = Directory.CreateTempSubdirectory("faast-cgroup-").FullName;

    public void Dispose() => Directory.Delete(_root, recursive: true);

    private void Proc(string mountinfo, string cgroup)
    {
        Write("/proc/self/mountinfo", mountinfo + "\n");
        Write("/proc/self/cgroup", cgroup + "\n");
    }

    private void Write(string path, string text)
    {
        var full = Path.Join(_root, path);
        Directory.CreateDirectory(Path.GetDirectoryName(full)!);
        File.WriteAllText(full, text);
    }

    [Fact]
    public void Version_1_the_memory_groups_limit()
    {
        Proc(V1Mount, "5:devices:/\n4:memory:/apps/photo\n0::/");
        Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
        Write("/sys/fs/cgroup/memory/apps/memory.limit_in_bytes", "9223372036854771712\n");
        Write("/sys/fs/cgroup/memory/apps/photo/memory.limit_in_bytes", $"{768 * MiB}\n");
        var limit = CgroupMemoryLimit.Find(_root);
        Assert.NotNull(limit);
        Assert.Equal(768 * MiB, limit.Bytes);
        Assert.Equal("/sys/fs/cgroup/memory/apps/photo/memory.limit_in_bytes", limit.File);
    }

    [Fact]
    public void Version_2_a_parents_smaller_limit_binds()
    {
        Proc("41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw", "0::/system.slice/faast.service");
        Write("/sys/fs/cgroup/system.slice/memory.max", $"{512 * MiB}\n");
        Write("/sys/fs/cgroup/system.slice/faast.service/memory.max", "max\n");
        var limit = CgroupMemoryLimit.Find(_root);
        Assert.Equal(new CgroupMemoryLimit(512 * MiB, "/sys/fs/cgroup/system.slice/memory.max"), limit);
    }

    [Fact]
    public void Hybrid_both_hierarchies_the_smaller_wins()
    {
        Proc(V1Mount + "\n" + V2Mount, "4:memory:/a\n0::/b");
        Write("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", $"{2048 * MiB}");
        Write("/sys/fs/cgroup/unified/b/memory.max", $"{1024 * MiB}");
        Assert.Equal(1024 * MiB, CgroupMemoryLimit.Find(_root)?.Bytes);
    }

    [Fact]
    public void Inside_a_container_the_mount_root_is_the_containers_group()
    {
        // The container sees its own group as the mount's root; /proc/self/cgroup names it from the host's root.
        Proc("35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory", "4:memory:/docker/abc");
        Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", $"{300 * MiB}");
        Assert.Equal(300 * MiB, CgroupMemoryLimit.Find(_root)?.Bytes);
    }

    [Fact]
    public void No_limit_anywhere_is_none()
    {
        Proc(V1Mount + "\n" + V2Mount, "4:memory:/x\n0::/");
        Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712");
        Write("/sys/fs/cgroup/memory/x/memory.limit_in_bytes", "9223372036854771712");
        Write("/sys/fs/cgroup/unified/memory.max", "max");
        Assert.Null(CgroupMemoryLimit.Find(_root));
    }

    [Fact]
    public void No_cgroup_file_system_or_no_proc_is_none()
    {
        Assert.Null(CgroupMemoryLimit.Find(_root)); // no /proc/self at all
        Proc("22 1 8:1 / / rw - ext4 /dev/sda1 rw", "0::/");
        Assert.Null(CgroupMemoryLimit.Find(_root));
    }

    [Fact]
    public void A_garbled_limit_file_is_skipped_not_believed()
    {
        Proc(V1Mount, "4:memory:/a");
        Write("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", "lots");
        Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", $"{100 * MiB}");
        Assert.Equal(100 * MiB, CgroupMemoryLimit.Find(_root)?.Bytes);
    }

    [Fact]
    public void Mount_points_with_escaped_spaces()
    {
        Proc(@"35 31 0:32 / /sys/fs/cgroup/mem\040ory rw - cgroup cgroup rw,memory", "4:memory:/");
        Write("/sys/fs/cgroup/mem ory/memory.limit_in_bytes", $"{64 * MiB}");
        Assert.Equal(64 * MiB, CgroupMemoryLimit.Find(_root)?.Bytes);
    }

    [Fact]
    public void The_cgroup_limit_is_the_default_memory_limit()
    {
        var policy = CachePolicy.Default.WithCgroupLimit(new CgroupMemoryLimit(3L << 30, "/m"), "app/faast.json", out var warning);
        Assert.Null(warning);
        Assert.Equal(3L << 30, policy.MemoryLimit);
        Assert.Equal(MemoryLimitSource.Cgroup, policy.MemoryLimitSource);
    }

    [Fact]
    public void A_smaller_memory_limit_from_faast_json_stands()
    {
        var file = CachePolicy.Default with { MemoryLimit = 256 * MiB, MemoryLimitSource = MemoryLimitSource.PolicyFile };
        var policy = file.WithCgroupLimit(new CgroupMemoryLimit(512 * MiB, "/m"), "app/faast.json", out var warning);
        Assert.Null(warning);
        Assert.Same(file, policy);
    }

    [Fact]
    public void A_larger_memory_limit_or_capacity_is_cut_to_the_cgroup_with_a_warning()
    {
        var file = CachePolicy.Default with { MemoryLimit = 4L << 30, MemoryLimitSource = MemoryLimitSource.PolicyFile, CacheCapacity = 2L << 30 };
        var policy = file.WithCgroupLimit(new CgroupMemoryLimit(768 * MiB, "/sys/fs/cgroup/memory/x/memory.limit_in_bytes"), "app/faast.json", out var warning);
        Assert.Equal(768 * MiB, policy.MemoryLimit);
        Assert.Equal(768 * MiB, policy.CacheCapacity);
        Assert.Equal(MemoryLimitSource.Cgroup, policy.MemoryLimitSource);
        Assert.NotNull(warning);
        Assert.Contains("cache.memoryLimit (4GiB) is more than the memory cgroup allows (768MiB, /sys/fs/cgroup/memory/x/memory.limit_in_bytes)", warning);
        Assert.Contains("cache.cacheCapacity (2GiB) is cut", warning);
    }

    [Fact]
    public void A_capacity_without_a_memory_limit_is_checked_against_the_cgroups_limit()
    {
        var file = CachePolicy.Default with { CacheCapacity = 2L << 30 }; // faast.json: only "cacheCapacity": "2GiB"
        var policy = file.WithCgroupLimit(new CgroupMemoryLimit(8L << 30, "/m"), "app/faast.json", out var warning);
        Assert.Null(warning);
        Assert.Equal(8L << 30, policy.MemoryLimit);
        Assert.Equal(2L << 30, policy.MaxCachedBytes);

        // Without a cgroup the default 1 GiB limit stands, and the file is wrong.
        var e = Assert.Throws<PolicyFileException>(() => file.WithCgroupLimit(null, "app/faast.json", out _));
        Assert.Equal("app/faast.json", e.FileName);
        Assert.Equal("cache.cacheCapacity", e.KeyPath);
        Assert.Equal("2GiB is more than cache.memoryLimit (1GiB, the default where no memory cgroup sets one); set cache.memoryLimit too", e.Reason);
    }

    [Fact]
    public void Without_a_cgroup_the_policy_is_unchanged()
    {
        Assert.Same(CachePolicy.Default, CachePolicy.Default.WithCgroupLimit(null, "app/faast.json", out var warning));
        Assert.Null(warning);
    }
}
