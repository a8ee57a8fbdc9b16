namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// En4S's knobs the paper leaves open, with the values of the authors' code (mhxie/En4S storage/inc/nvme/nvmedev.h,
/// storage/nvme/scheduling.c — read, not copied) and the reasons.
/// </summary>
public sealed record En4sSettings
{
    /// <summary>An LC tenant's deficit limit (how far below zero its credit may go: its burst allowance, §4.4) as a
    /// fraction of its wTPS: 50 %, the top of §3.2's sweep (Fig. 3a: "a higher burst allowance is key to maintaining
    /// goodput ... with high concurrency and many SLOs"), where the authors' code uses 10 % (TOKEN_DEFICIT_LIMIT_PERC).
    /// Measured here (bench flash, Fig. 10, 1,000 tenants of open-loop Poisson clients at their SLO, 2 virtual s): at 10 %
    /// a small LC tenant's credit random-walks to the floor and its queue builds, LC G0/G1 goodput 0.66/0.47 and LC read
    /// p95 162 ms; at 25 % 0.95/0.80; at 50 % 0.99/0.96 with read p95 1.5 ms. A high allowance is safe because the
    /// consecutive-burst limit halves it for a tenant that keeps borrowing (the misbehaving tenant of Fig. 11).</summary>
    public double DeficitLimitFraction { get; init; } = 0.50;

    /// <summary>A scheduling visit counts as a loan when the tenant has work queued and its credit is below
    /// −deficit / this (the authors' TOKEN_DEFICIT_LIMIT_DIV = 2: half the allowance in use is "borrowing").</summary>
    public double LoanThresholdDivisor { get; init; } = 2;

    /// <summary>Consecutive loans after which the deficit limit is halved (the multiplicative decrease of §4.4's
    /// consecutive-burst limit); the count restarts after each halving, and a visit that is not a loan (repayment)
    /// resets the count. 50 = the authors' TOKEN_DEFICIT_MAX_TIMES.</summary>
    public int ConsecutiveLoansToHalve { get; init; } = 50;

    /// <summary>After repayment the allowance grows back additively (§4.4: "additive increase ... up to the original
    /// percentage"), at reclaim time, in proportion to elapsed time: from zero to the original over this period. The
    /// authors' code restores it in one step; measured here (bench flash, Fig. 11), a one-step reset hands a tenant that
    /// bursts to 3× its SLO and falls back below it its whole allowance again at every burst, so it is never contained.
    /// 1 s (conservative): a tenant that stops borrowing has its full burst back within a second.</summary>
    public long AllowanceRecoveryNs { get; init; } = 1_000_000_000;

    /// <summary>Token reclaim runs at this fixed period, below the scheduling frequency (§4.5): 1 ms, the authors'
    /// SCHED_FREQUENCY unit; ~100 scheduling rounds at a 10 µs poll, enough to average an LC tenant's short bursts.</summary>
    public long ReclaimIntervalNs { get; init; } = 1_000_000;

    /// <summary>An LC tenant's credit is reclaimed when it exceeds this multiple of its last increment (the tokens it
    /// gained over the previous reclaim interval): 3 (the authors' POS_LIMIT_FACTOR).</summary>
    public double ReclaimCreditMultiple { get; init; } = 3;

    /// <summary>Fraction of such a tenant's credit moved to the BE pool: 60 % (TOKEN_FRAC_GIVEAWAY); the 40 % it keeps
    /// still covers a burst at its next activation.</summary>
    public double ReclaimFraction { get; init; } = 0.6;

    /// <summary>The global BE pool holds at most this many reclaim intervals of the device's tokens: borrowed tokens
    /// are for the present, never a bank for a later BE burst that would hit LC tenants.</summary>
    public double PoolCapIntervals { get; init; } = 1;

    /// <summary>Individual burst schedule (§4.4 (2)): one visit dequeues at most the tenant's token rate over this
    /// period (and at least its head request); a tenant with more work and credit left goes to the tail so the next
    /// tenant is visited. Exhaustive dequeue alone would let a tenant spending its burst allowance hold every free device
    /// slot until the allowance is gone (a 10 % deficit is 100 ms of its rate); 1 ms is the authors' smoothing unit
    /// (SMOOTHING_FACTOR 1000 per second).</summary>
    public long VisitQuantumNs { get; init; } = 1_000_000;

    /// <summary>Conservative burst control (Fig. 11b): the authors' 50 consecutive loans before halving.</summary>
    public static En4sSettings Conservative { get; } = new();

    /// <summary>Aggressive burst control (Fig. 11a): ten times as sensitive (the paper's 3‰ against 3 % detection
    /// settings differ by 10x): halving after 5 consecutive loans, and the allowance regained over 10 s.</summary>
    public static En4sSettings Aggressive { get; } = new() { ConsecutiveLoansToHalve = 5, AllowanceRecoveryNs = 10_000_000_000 };

    public void Validate()
    {
        if (!(DeficitLimitFraction >= 0) || !(LoanThresholdDivisor >= 1) || ConsecutiveLoansToHalve < 1)
            throw new ArgumentException($"En4S settings: deficit fraction {DeficitLimitFraction} must be >= 0, loan divisor {LoanThresholdDivisor} >= 1, loans to halve {ConsecutiveLoansToHalve} >= 1");
        if (AllowanceRecoveryNs < 1)
            throw new ArgumentException($"En4S settings: allowance recovery {AllowanceRecoveryNs} ns must be >= 1");
        if (ReclaimIntervalNs < 1 || VisitQuantumNs < 1 || !(ReclaimCreditMultiple >= 0) || !(ReclaimFraction >= 0 && ReclaimFraction <= 1) || !(PoolCapIntervals >= 0))
            throw new ArgumentException($"En4S settings: reclaim interval {ReclaimIntervalNs} ns must be >= 1, credit multiple {ReclaimCreditMultiple} >= 0, fraction {ReclaimFraction} in [0, 1], pool cap {PoolCapIntervals} >= 0");
    }
}
