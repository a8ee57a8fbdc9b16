using FaaST.Policy;

namespace FaaST.Cachelet.Daemon;

/// <summary>The cachelet's side of fitting faast.json's memory settings to the instance: it knows the
/// memory cgroup (<see cref="CgroupMemoryLimit"/>); the app model's <see cref="CachePolicy"/> holds the rule.</summary>
public static class CgroupPolicy
{
    /// <summary>The policy fitted to <paramref name="cgroup"/> (null: no memory cgroup), as
    /// <see cref="CachePolicy.WithMemoryCgroup"/> says; <paramref name="warning"/> names what was cut.</summary>
    public static CachePolicy WithCgroupLimit(this CachePolicy policy, CgroupMemoryLimit? cgroup, string policyFile, out string? warning)
    {
        ArgumentNullException.ThrowIfNull(policy);
        return policy.WithMemoryCgroup(cgroup?.Bytes, cgroup?.File, policyFile, out warning);
    }
}
