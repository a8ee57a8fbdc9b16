using System.Buffers;
using System.Buffers.Binary;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Security.Cryptography;
using System.Text;

namespace FaaST.Membership;

/// <summary>
/// An immutable consistent-hash ring (Faa$T §5: SHA-256, 100 virtual nodes per cachelet). Virtual node i of a
/// member sits at the first 8 bytes (big-endian) of SHA-256(UTF-8 "{id}#{i}"); a key belongs to the first
/// virtual node at or after its own position, wrapping around. The same member set gives the same ring on every
/// instance, whatever the order it was given in. Lookups are lock-free: a new view builds a new ring.
/// </summary>
public sealed class HashRing
{
    /// <summary>Virtual nodes per member when not told otherwise.</summary>
    public const int DefaultVirtualNodes = 100;

    private const int MaxStackBytes = 1024;

    private readonly ulong[] _positions;   // sorted ascending
    private readonly int[] _owners;        // _owners[i] = index into _members of the vnode at _positions[i]
    private readonly Member[] _members;    // sorted by Id (ordinal)

    /// <summary>A ring without members: every lookup throws.</summary>
    public static HashRing Empty { get; } = new([], DefaultVirtualNodes);

    /// <summary>Builds the ring of <paramref name="members"/>; their Ids must be distinct.</summary>
    public HashRing(IEnumerable<Member> members, int virtualNodes = DefaultVirtualNodes)
    {
        ArgumentNullException.ThrowIfNull(members);
        ArgumentOutOfRangeException.ThrowIfLessThan(virtualNodes, 1);
        var sorted = members.ToArray();
        Array.Sort(sorted, static (a, b) => string.CompareOrdinal(a.Id, b.Id));
        for (var i = 1; i < sorted.Length; i++)
        {
            if (sorted[i].Id == sorted[i - 1].Id)
            {
                throw new ArgumentException($"Member id '{sorted[i].Id}' appears twice in the ring's members.", nameof(members));
            }
        }

        var count = checked(sorted.Length * virtualNodes);
        var vnodes = new (ulong Position, int Owner)[count];
        for (var m = 0; m < sorted.Length; m++)
        {
            for (var v = 0; v < virtualNodes; v++)
            {
                vnodes[(m * virtualNodes) + v] = (Position(string.Create(CultureInfo.InvariantCulture, $"{sorted[m].Id}#{v}")), m);
            }
        }

        // Ties (improbable in 64 bits) go to the smaller Id, so that every instance agrees.
        Array.Sort(vnodes);
        _positions = new ulong[count];
        _owners = new int[count];
        for (var i = 0; i < count; i++)
        {
            (_positions[i], _owners[i]) = vnodes[i];
        }

        _members = sorted;
        VirtualNodes = virtualNodes;
    }

    /// <summary>The members, ordered by Id (ordinal).</summary>
    public IReadOnlyList<Member> Members => _members;

    /// <summary>Virtual nodes per member.</summary>
    public int VirtualNodes { get; }

    /// <summary>The position of a key: the first 8 bytes of SHA-256(UTF-8 of key), big-endian.</summary>
    public static ulong Position(string key)
    {
        ArgumentNullException.ThrowIfNull(key);
        var max = Encoding.UTF8.GetMaxByteCount(key.Length);
        if (max <= MaxStackBytes)
        {
            Span<byte> utf8 = stackalloc byte[max];
            return Position(utf8[..Encoding.UTF8.GetBytes(key, utf8)]);
        }

        var rented = ArrayPool<byte>.Shared.Rent(max);
        try
        {
            return Position(rented.AsSpan(0, Encoding.UTF8.GetBytes(key, rented)));
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(rented);
        }
    }

    /// <summary>The position of a key given as UTF-8 bytes.</summary>
    public static ulong Position(ReadOnlySpan<byte> utf8Key)
    {
        Span<byte> hash = stackalloc byte[SHA256.HashSizeInBytes];
        SHA256.HashData(utf8Key, hash);
        return BinaryPrimitives.ReadUInt64BigEndian(hash);
    }

    /// <summary>The member owning <paramref name="key"/>.</summary>
    /// <exception cref="InvalidOperationException">The ring has no members.</exception>
    public Member OwnerOf(string key) => OwnerOf(Position(key));

    /// <summary>The member of the first virtual node at or after <paramref name="position"/>, wrapping around.</summary>
    /// <exception cref="InvalidOperationException">The ring has no members.</exception>
    public Member OwnerOf(ulong position)
    {
        var positions = _positions;
        if (positions.Length == 0)
        {
            ThrowEmpty();
        }

        // Lower bound: the first index whose position is >= the key's.
        int lo = 0, hi = positions.Length;
        while (lo < hi)
        {
            var mid = (int)((uint)(lo + hi) >> 1);
            if (positions[mid] < position)
            {
                lo = mid + 1;
            }
            else
            {
                hi = mid;
            }
        }

        return _members[_owners[lo == positions.Length ? 0 : lo]];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowEmpty() =>
        throw new InvalidOperationException("The hash ring has no members, so no key has an owner.");
}
