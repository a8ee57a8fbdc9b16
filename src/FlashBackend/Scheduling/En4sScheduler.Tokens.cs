namespace FaaST.FlashBackend.Scheduling;

/// <summary>En4S's token bookkeeping off the dispatch loop: refill, the periodic reclaim (§4.5) with the burst
/// allowance's additive increase (§4.4), and parking of tenants blocked for want of tokens.</summary>
public sealed partial class En4sScheduler
{
    private static void RefillLc(ref TenantState s, long nowNs)
    {
        double inc = s.Rate * (nowNs - s.LastRefillNs) * 1e-9;
        s.LastRefillNs = nowNs;
        s.Credit += inc;
        s.IncrementSinceReclaim += inc;
    }

    /// <summary>
    /// Token reclaim (§4.5), once per <see cref="En4sSettings.ReclaimIntervalNs"/>: every LC tenant is brought up to
    /// date; one whose credit exceeds 3× what it gained over the last interval gives 60 % of it to the BE pool. Idle BE
    /// tenants' shares for the interval go to the pool too, so BE stays work-conserving. LC tokens are thus lent only
    /// after a whole interval of not being used, which keeps an LC tenant's short bursts covered (the leak §4.5 fixes).
    /// Without BE tenants the reclaimed tokens only bound the LC tenant's bank (the pool is capped).
    /// </summary>
    private void Reclaim(long nowNs)
    {
        // Additive increase (§4.4): a tenant whose last visit was not a loan regains its allowance in proportion to the
        // time since the last reclaim, reaching the original after AllowanceRecoveryNs.
        double regain = _lastReclaimNs == long.MinValue ? 0 : (nowNs - _lastReclaimNs) / (double)_settings.AllowanceRecoveryNs;
        _lastReclaimNs = nowNs;
        // Every LC tenant is visited here (O(LC tenants) once per interval, not per round): counted as visits.
        Visits += LcTenants.Count;
        foreach (int t in LcTenants)
        {
            ref var s = ref Tenants[t];
            if (s.LoanTimes == 0 && s.DeficitLimit < s.BaseDeficitLimit)
                s.DeficitLimit = Math.Min(s.BaseDeficitLimit, s.DeficitLimit + regain * s.BaseDeficitLimit);
            RefillLc(ref s, nowNs);
            s.LastIncrement = s.IncrementSinceReclaim;
            s.IncrementSinceReclaim = 0;
            if (s.Credit > _settings.ReclaimCreditMultiple * s.LastIncrement && s.Credit > 0)
            {
                double give = _settings.ReclaimFraction * s.Credit;
                s.Credit -= give;
                _pool += give;
                ReclaimedTotal += give;
            }
        }
        // The pool is refilled now: every BE tenant parked for want of pool tokens gets a visit (once per interval,
        // so the cost is O(BE tenants) per millisecond, not per scheduling round).
        while (_parkedBe.Count > 0)
            Unpark(_parkedBe.PopHead());
        int idleBe = BeTenants.Count - _activeBeCount;
        if (idleBe > 0 && _nextReclaimNs != long.MinValue)
            _pool += idleBe * _beShare * _settings.ReclaimIntervalNs * 1e-9;
        CapPool();
        _nextReclaimNs = _nextReclaimNs == long.MinValue
            ? nowNs + _settings.ReclaimIntervalNs
            : Math.Max(_nextReclaimNs + _settings.ReclaimIntervalNs, nowNs - nowNs % _settings.ReclaimIntervalNs + _settings.ReclaimIntervalNs);
    }

    private void Park(int tenant, ref TenantState s, long wakeNs, bool fromBe)
    {
        s.Parked = true;
        s.ParkedFromBe = fromBe;
        _parked.Push(tenant, wakeNs);
    }

    /// <summary>A BE tenant whose tokens (share, saved credit and the whole pool) do not cover its head request: parked
    /// until its own share covers it if that comes before the next reclaim, else until the pool refills (the reclaim,
    /// or tokens other BE tenants lend back — see <see cref="WakeBeOnPool"/>).</summary>
    private void ParkBe(int tenant, ref TenantState s, long nowNs)
    {
        double need = s.Queue.Head.Cost - s.Credit;
        if (s.Rate > 0)
        {
            double dtNs = need / s.Rate * 1e9;
            if (nowNs + dtNs < _nextReclaimNs)
            {
                Park(tenant, ref s, nowNs + (long)dtNs + 1, fromBe: true);
                return;
            }
        }
        s.Parked = true;
        s.ParkedFromBe = true;
        _parkedBe.PushTail(tenant);
    }

    /// <summary>Tokens lent back to the pool between reclaims go to the BE tenants parked for the pool, front first,
    /// as far as they cover each one's head request: O(woken) per round.</summary>
    private void WakeBeOnPool(long nowNs)
    {
        double avail = _pool;
        while (_parkedBe.Count > 0)
        {
            ref var s = ref Tenants[_parkedBe.Head];
            double need = s.Queue.Head.Cost - s.Credit - s.Rate * (nowNs - s.LastRefillNs) * 1e-9;
            if (need > avail)
                break;
            avail -= Math.Max(need, 0);
            Unpark(_parkedBe.PopHead());
        }
    }

    /// <summary>Back to the tail of the list it was parked from (activation order, §4.3.2). A tenant admitted as LC
    /// while parked from the BE list goes back to the BE list, whose pass moves it to the LC list.</summary>
    private void Unpark(int tenant)
    {
        Visits++; // a heap or list pop and a push: one visit
        ref var s = ref Tenants[tenant];
        s.Parked = false;
        if (s.ParkedFromBe)
            _activeBe.PushTail(tenant);
        else
            _activeLc.PushTail(tenant);
    }

    private void CapPool()
    {
        double cap = _device.TokensPerSecond * _settings.ReclaimIntervalNs * 1e-9 * _settings.PoolCapIntervals;
        if (_pool > cap)
            _pool = cap;
    }
}
