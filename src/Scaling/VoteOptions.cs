namespace FaaST.Scaling;

/// <summary>
/// The settings of an instance's vote rules (Faa$T §4), with the defaults of docs/scaling.md. They are
/// the vote half of faast.json's <c>scale</c> section (<c>band</c>, <c>rareAccessesPerSecond</c>,
/// <c>votes</c>, <c>bandwidth.minObjectSize</c>); the controller's half (cool-downs, min/max
/// instances) lives with the controller.
/// </summary>
public sealed record VoteOptions
{
    /// <summary>The defaults: band 0.6–0.8, 1 access a second is rare, large objects from 64 MiB, every vote on.</summary>
    public static readonly VoteOptions Default = new();

    /// <summary><c>scale.band.low</c>, default 0.6: below this utilisation the compute vote says in (Pocket's band).</summary>
    public double BandLow { get; init; } = 0.6;

    /// <summary><c>scale.band.high</c>, default 0.8: above this utilisation the compute vote says out.</summary>
    public double BandHigh { get; init; } = 0.8;

    /// <summary>
    /// <c>scale.rareAccessesPerSecond</c>, default 1.0: fewer cache accesses a second than this are rare
    /// (the cache-size vote says in), and likewise for accesses to large objects (the bandwidth vote).
    /// </summary>
    public double RareAccessesPerSecond { get; init; } = 1.0;

    /// <summary><c>scale.bandwidth.minObjectSize</c>, default 64 MiB: an object this large counts as large for the bandwidth vote.</summary>
    public long LargeObjectBytes { get; init; } = 64L << 20;

    /// <summary><c>scale.votes.compute</c>, default true.</summary>
    public bool ComputeEnabled { get; init; } = true;

    /// <summary><c>scale.votes.cacheSize</c>, default true.</summary>
    public bool CacheSizeEnabled { get; init; } = true;

    /// <summary><c>scale.votes.bandwidth</c>, default true.</summary>
    public bool BandwidthEnabled { get; init; } = true;

    /// <summary>The middle of the band: what a scale-out aims the utilisation at.</summary>
    public double Target => (BandLow + BandHigh) / 2;

    /// <summary>
    /// Checks the ranges; <paramref name="source"/> names where the values came from (say, "faast.json")
    /// and goes into the message with the key at fault.
    /// </summary>
    /// <exception cref="ArgumentException">A value out of range, naming the source, the key and the value.</exception>
    public VoteOptions Validate(string source)
    {
        if (!(BandLow > 0 && BandLow < BandHigh) || double.IsInfinity(BandHigh))
            throw new ArgumentException($"{source}: scale.band must have 0 < low < high (a finite utilisation), not low {BandLow} and high {BandHigh}");
        if (!(RareAccessesPerSecond >= 0) || double.IsInfinity(RareAccessesPerSecond))
            throw new ArgumentException($"{source}: scale.rareAccessesPerSecond must be a finite number of accesses a second, 0 or more, not {RareAccessesPerSecond}");
        if (LargeObjectBytes <= 0)
            throw new ArgumentException($"{source}: scale.bandwidth.minObjectSize must be positive, not {LargeObjectBytes} bytes");
        return this;
    }
}
