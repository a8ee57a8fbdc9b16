using System.Globalization;
using System.Security.Cryptography;
using System.Text;
using Xunit.Abstractions;

namespace FaaST.Membership.Tests;

/// <summary>Properties of the consistent-hash ring, over many keys and seeded random member ids.</summary>
public sealed class HashRingTests(ITestOutputHelper output)
{
    private const int KeyCount = 100_000;
    private static readonly ulong[] Keys = MakeKeys(KeyCount, seed: 42);

    [Fact]
    public void Position_IsTheFirst8BytesOfSha256_BigEndian()
    {
        // sha256("hello") = 2cf24dba5fb0a30e 26e83b2a...
        Assert.Equal(0x2cf24dba5fb0a30eUL, HashRing.Position("hello"));
        Assert.Equal(0xe3b0c44298fc1c14UL, HashRing.Position(""));

        var longKey = new string('é', 5000); // past the stack buffer: the pooled path
        var hash = SHA256.HashData(Encoding.UTF8.GetBytes(longKey));
        Assert.Equal(System.Buffers.Binary.BinaryPrimitives.ReadUInt64BigEndian(hash), HashRing.Position(longKey));
        Assert.Equal(HashRing.Position("blob/ключ"), HashRing.Position(Encoding.UTF8.GetBytes("blob/ключ")));
    }

    [Fact]
    public void Position_OfShortKeys_DoesNotAllocate()
    {
        const string key = "devstoreaccount1/pipeline-raw/some/fairly/long/blob-name-0042.json";
        var ring = new HashRing(Members(8, seed: 1));
        ulong sink = 0;
        sink += HashRing.Position(key);
        sink += HashRing.Position(ring.OwnerOf(key).Id);

        var before = GC.GetAllocatedBytesForCurrentThread();
        for (var i = 0; i < 1000; i++)
        {
            sink += HashRing.Position(key);
            sink += (ulong)ring.OwnerOf(key).Id.Length;
        }

        Assert.Equal(0, GC.GetAllocatedBytesForCurrentThread() - before);
        Assert.NotEqual(0UL, sink);
    }

    [Fact]
    public void VirtualNodes_SitAtTheHashOf_IdHashIndex_AndOwnTheirOwnPosition()
    {
        var members = Members(5, seed: 2);
        var ring = new HashRing(members);
        Assert.Equal(100, ring.VirtualNodes);
        foreach (var m in members)
        {
            for (var i = 0; i < 100; i++)
            {
                var p = HashRing.Position(string.Create(CultureInfo.InvariantCulture, $"{m.Id}#{i}"));
                Assert.Same(m, ring.OwnerOf(p));
                if (p > 0)
                {
                    Assert.Same(m, ring.OwnerOf(p - 1)); // "first vnode at or after": just below also lands here
                }
            }
        }
    }

    [Fact]
    public void PositionsPastTheLastVirtualNode_WrapToTheFirst()
    {
        var members = Members(4, seed: 3);
        var ring = new HashRing(members);
        var (first, last) = (ulong.MaxValue, 0UL);
        Member? firstOwner = null;
        foreach (var m in members)
        {
            for (var i = 0; i < 100; i++)
            {
                var p = HashRing.Position($"{m.Id}#{i}");
                if (p < first)
                {
                    (first, firstOwner) = (p, m);
                }

                last = Math.Max(last, p);
            }
        }

        Assert.Same(firstOwner, ring.OwnerOf(ulong.MaxValue));
        Assert.Same(firstOwner, ring.OwnerOf(last + 1));
        Assert.Same(firstOwner, ring.OwnerOf(0UL));
    }

    [Fact]
    public void SingleMember_OwnsEveryKey()
    {
        var only = Members(1, seed: 4)[0];
        var ring = new HashRing([only]);
        Assert.All(Keys.Take(10_000), p => Assert.Same(only, ring.OwnerOf(p)));
        Assert.Same(only, ring.OwnerOf("any key at all"));
    }

    [Fact]
    public void EmptyRing_ThrowsAClearError()
    {
        var ex = Assert.Throws<InvalidOperationException>(() => HashRing.Empty.OwnerOf("k"));
        Assert.Contains("no members", ex.Message, StringComparison.Ordinal);
        Assert.Throws<InvalidOperationException>(() => new HashRing([]).OwnerOf(123UL));
        Assert.Empty(HashRing.Empty.Members);
    }

    [Fact]
    public void DuplicateIds_AndBadVirtualNodeCounts_AreRejected()
    {
        var m = Members(1, seed: 5)[0];
        var ex = Assert.Throws<ArgumentException>(() => new HashRing([m, m with { PeerAddress = new Uri("http://127.0.0.1:9/") }]));
        Assert.Contains(m.Id, ex.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentOutOfRangeException>(() => new HashRing([m], virtualNodes: 0));
    }

    [Fact]
    public void SameMembers_InAnyOrder_GiveTheSameOwners()
    {
        var members = Members(16, seed: 6);
        var a = new HashRing(members);
        var shuffled = members.ToArray();
        new Random(7).Shuffle(shuffled);
        var b = new HashRing(shuffled);
        Assert.Equal(a.Members.Select(m => m.Id), b.Members.Select(m => m.Id));
        Assert.Equal(a.Members.Select(m => m.Id).Order(StringComparer.Ordinal), a.Members.Select(m => m.Id));
        foreach (var p in Keys)
        {
            Assert.Equal(a.OwnerOf(p).Id, b.OwnerOf(p).Id);
        }
    }

    [Fact]
    public void Join_MovesAbout1OverN_OfTheKeys_AllToTheJoiner()
    {
        var pool = Members(65, seed: 9);
        var report = new StringBuilder();
        for (var n = 2; n <= 64; n++)
        {
            var before = new HashRing(pool.Take(n));
            var joiner = pool[n];
            var after = new HashRing(pool.Take(n).Append(joiner));
            var (moved, strays) = (0, 0);
            foreach (var p in Keys)
            {
                var (was, now) = (before.OwnerOf(p), after.OwnerOf(p));
                if (!ReferenceEquals(was, now))
                {
                    moved++;
                    strays += ReferenceEquals(now, joiner) ? 0 : 1;
                }
            }

            Assert.Equal(0, strays); // keys that moved somewhere else than to the joiner

            var fraction = (double)moved / Keys.Length;
            report.Append(CultureInfo.InvariantCulture, $"N={n}: {fraction * n:F2}/N  ");
            Assert.InRange(fraction, 0.5 / n, 2.0 / n);
        }

        output.WriteLine("moved on join, as a multiple of 1/N: " + report);
    }

    [Fact]
    public void Leave_MovesAbout1OverN_OfTheKeys_OnlyTheLeaversKeys()
    {
        var random = new Random(10);
        var pool = Members(64, seed: 11);
        var report = new StringBuilder();
        for (var n = 2; n <= 64; n++)
        {
            var members = pool.Take(n).ToArray();
            var leaver = members[random.Next(n)];
            var before = new HashRing(members);
            var after = new HashRing(members.Where(m => m != leaver));
            var (moved, strays) = (0, 0);
            foreach (var p in Keys)
            {
                var (was, now) = (before.OwnerOf(p), after.OwnerOf(p));
                moved += ReferenceEquals(was, now) ? 0 : 1;
                strays += ReferenceEquals(was, leaver) == ReferenceEquals(was, now) ? 1 : 0;
            }

            Assert.Equal(0, strays); // keys that moved without being the leaver's, or stayed with the leaver

            var fraction = (double)moved / Keys.Length;
            report.Append(CultureInfo.InvariantCulture, $"N={n}: {fraction * n:F2}/N  ");
            Assert.InRange(fraction, 0.5 / n, 2.0 / n);
        }

        output.WriteLine("moved on leave, as a multiple of 1/N: " + report);
    }

    [Theory]
    [InlineData(4, 1.5)]
    [InlineData(16, 1.5)]
    [InlineData(64, 1.6)]
    public void Load_IsBalanced_With100VirtualNodes(int n, double maxOverMean)
    {
        var ring = new HashRing(Members(n, seed: 12 + n));
        var load = ring.Members.ToDictionary(m => m.Id, _ => 0, StringComparer.Ordinal);
        foreach (var p in Keys)
        {
            load[ring.OwnerOf(p).Id]++;
        }

        var mean = (double)Keys.Length / n;
        var (max, min) = (load.Values.Max(), load.Values.Min());
        output.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"N={n}, 100 vnodes, {Keys.Length} keys: max/mean {max / mean:F3}, min/mean {min / mean:F3}"));
        Assert.True(max / mean < maxOverMean, string.Create(CultureInfo.InvariantCulture, $"max/mean = {max / mean:F3}"));
    }

    /// <summary>Member ids like the runtime's (random, seeded here), on made-up peer addresses.</summary>
    internal static Member[] Members(int count, int seed)
    {
        var random = new Random(seed);
        var started = new DateTimeOffset(2025, 1, 1, 0, 0, 0, TimeSpan.Zero);
        return Enumerable.Range(0, count).Select(i =>
        {
            var bytes = new byte[16];
            random.NextBytes(bytes);
            return new Member("i-" + Convert.ToHexStringLower(bytes), new Uri($"http://127.0.0.1:{20000 + i}/"), started);
        }).ToArray();
    }

    private static ulong[] MakeKeys(int count, int seed)
    {
        var random = new Random(seed);
        return Enumerable.Range(0, count)
            .Select(i => HashRing.Position(string.Create(CultureInfo.InvariantCulture, $"devstoreaccount1/data/{random.Next()}/{i}.bin")))
            .ToArray();
    }
}
