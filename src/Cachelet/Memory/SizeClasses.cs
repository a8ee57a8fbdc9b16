using System.Numerics;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// The slab size classes. Up to 128 bytes: every multiple of 16. Above: eight classes per power of
/// two (2^k + m·2^(k−3), m = 1..8), as in jemalloc with a finer step. An object of length n goes to
/// the smallest class ≥ n, so the slot wastes less than max(16 B, n/8): for n &gt; 128 in
/// (2^k, 2^(k+1)] the step is 2^(k−3) &lt; n/8. That is the 12.5% internal-fragmentation bound.
/// Every class is a multiple of 16, so slots are 16-byte aligned.
/// </summary>
internal static class SizeClasses
{
    public const int Granule = 16;
    public const int LinearLimit = 128;
    private const int LinearClasses = LinearLimit / Granule; // 8
    private const int StepsPerDoubling = 8;

    /// <summary>The class of a length in 1..<see cref="SizeOf"/>(last class).</summary>
    public static int IndexOf(long length)
    {
        if (length <= LinearLimit)
            return (int)((length - 1) >> 4);
        var m = (ulong)(length - 1);
        var k = 63 - BitOperations.LeadingZeroCount(m); // 2^k <= length-1 < 2^(k+1), k >= 7
        return LinearClasses + (k - 7) * StepsPerDoubling + (int)((m - (1UL << k)) >> (k - 3));
    }

    /// <summary>Slot size of class <paramref name="index"/>.</summary>
    public static long SizeOf(int index)
    {
        if (index < LinearClasses)
            return (index + 1L) * Granule;
        var j = index - LinearClasses;
        var k = 7 + j / StepsPerDoubling;
        return (1L << k) + (j % StepsPerDoubling + 1L) * (1L << (k - 3));
    }

    /// <summary>Number of classes needed so that the last one holds <paramref name="maxLength"/>.</summary>
    public static int CountFor(long maxLength) => IndexOf(maxLength) + 1;
}
