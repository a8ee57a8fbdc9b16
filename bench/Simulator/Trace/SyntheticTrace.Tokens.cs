using System.Globalization;

namespace FaaST.Simulator.Trace;

public static partial class SyntheticTrace
{
    /// <summary>
    /// Anonymised ids shaped like the public trace's (its sample rows: a 3-character region, a decimal user id, an
    /// 8-character app name, a decimal invocation id, a 16-character blob name and a 10-character ETag, base 36). Blob
    /// names and invocation ids are bijections of counters, so two blobs or invocations never share one; the seed's
    /// salt makes them differ between seeds.
    /// </summary>
    private sealed class Tokens(long salt)
    {
        private const uint Mask31 = 0x7FFF_FFFF;
        private long _blobs;
        private uint _invocations;

        public string Region(int region) => Base36(Mix((ulong)salt ^ (0x5EED_0000UL + (ulong)region)), 3);

        public string User(int user) => Permute31((uint)user, (uint)(salt >> 7)).ToString(CultureInfo.InvariantCulture);

        public string AppName(int app) => Base36(Mix((ulong)salt ^ (0xA99_0000_0000UL + (ulong)app)), 8);

        public string Invocation() => Permute31(_invocations++, (uint)salt).ToString(CultureInfo.InvariantCulture);

        public (long Number, string Name) NewBlob()
        {
            var number = _blobs++;
            // 13 base-36 digits hold the whole 64-bit value (unique); the 3 before them come from another hash, so
            // names do not all start with zeros.
            var value = Mix((ulong)salt ^ (ulong)number);
            return (number, string.Concat(Base36(Mix(value), 3), Base36(value, 13)));
        }

        public SharedBlob NewShared(Random rng, string type)
        {
            var (number, name) = NewBlob();
            return new SharedBlob(number, name, type, SampleBytes(rng));
        }

        /// <summary>A blob version's ETag: a new version (a write) gets a new one.</summary>
        public string ETag(long blob, int version) => Base36(Mix(Mix((ulong)blob ^ (ulong)salt) + (ulong)version), 10);

        /// <summary>splitmix64's finaliser: a bijection of 64-bit values that scatters neighbours.</summary>
        private static ulong Mix(ulong z)
        {
            z = (z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9UL;
            z = (z ^ (z >> 27)) * 0x94D0_49BB_1331_11EBUL;
            return z ^ (z >> 31);
        }

        /// <summary>A bijection of 31-bit values (odd multipliers and right xor-shifts are invertible mod 2^31).</summary>
        private static uint Permute31(uint x, uint salt31)
        {
            x &= Mask31;
            x = (x * 0x2545_F491u) & Mask31;
            x ^= x >> 13;
            x = (x * 0x6C8E_9CF5u) & Mask31;
            x ^= x >> 16;
            return (x ^ salt31) & Mask31;
        }

        private static string Base36(ulong value, int width) => string.Create(width, value, static (span, v) =>
        {
            for (var i = span.Length - 1; i >= 0; i--)
            {
                span[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[(int)(v % 36)];
                v /= 36;
            }
        });
    }
}
