namespace FaaST.FlashBackend.Scheduling;

/// <summary>One tenant of a driven workload: its SLO and the load it offers (4 KiB-block requests of
/// <see cref="SizeBytes"/>, Poisson arrivals at <see cref="OfferedIops"/>, reads with probability
/// <see cref="ReadRatio"/>).</summary>
public sealed record WorkloadTenant(TenantSpec Spec, double OfferedIops, double ReadRatio, int SizeBytes = 4096)
{
    /// <summary>The group the tenant is reported in (Fig. 10's LC G0 … BE G1); empty: its own name.</summary>
    public string Group { get; init; } = "";

    /// <summary>A periodically bursting tenant (Fig. 11's malicious LC G0): for the first <see cref="BurstOnNs"/> of
    /// every <see cref="BurstPeriodNs"/> it offers <see cref="BurstFactor"/> times <see cref="WorkloadTenant.OfferedIops"/>.
    /// Period 0: steady.</summary>
    public double BurstFactor { get; init; } = 1;
    public long BurstPeriodNs { get; init; }
    public long BurstOnNs { get; init; }

    internal double RateAt(long nowNs) =>
        BurstPeriodNs > 0 && nowNs % BurstPeriodNs < BurstOnNs ? OfferedIops * BurstFactor : OfferedIops;
}

/// <summary>What a group of tenants got, measured after the warm-up: latencies pooled over its tenants; goodput and
/// SLO summed; per-window completed and good IOPS when <see cref="WorkloadRun.WindowNs"/> is set.</summary>
public sealed record GroupOutcome(string Group, int Tenants, double SloIops, double OfferedIops, double CompletedIops,
    double GoodputIops, double P95Us, double ReadP95Us, double[] WindowIops, double[] WindowGoodputIops)
{
    public double GoodputFraction => SloIops > 0 ? GoodputIops / SloIops : 0;
}

/// <summary>The per-tenant and per-group outcomes of one run, and the read p95 pooled over every tenant that registered
/// an LC SLO (Fig. 10's "LC read tail").</summary>
public sealed record WorkloadResult(IReadOnlyList<TenantOutcome> Tenants, IReadOnlyList<GroupOutcome> Groups, double LcReadP95Us);

/// <summary>What one tenant got, measured after the warm-up.</summary>
public sealed record TenantOutcome(
    string Name, bool LatencyCritical, double SloIops, int SloP95Us, double OfferedIops,
    double CompletedIops, double GoodputIops, double P95Us, double ReadP95Us, string Admission)
{
    /// <summary>Goodput as a fraction of the IOPS SLO (LC tenants; 0 for BE).</summary>
    public double GoodputFraction => SloIops > 0 ? GoodputIops / SloIops : 0;
}

/// <summary>The driver's knobs: virtual duration, warm-up excluded from the measurements, poll period (the IX-style
/// loop that collects arrivals and completions and calls the scheduler once per poll) and seeds.</summary>
public sealed record WorkloadRun
{
    public long DurationNs { get; init; } = 1_000_000_000;
    public long WarmupNs { get; init; } = 100_000_000;
    /// <summary>10 µs: the order of one IX poll iteration at load; 64-request batches at this period allow 6.4M
    /// dispatches/s, far above the device, so the scheduler, not the loop, decides.</summary>
    public long PollNs { get; init; } = 10_000;
    public ulong DeviceSeed { get; init; } = 1;
    public ulong ArrivalSeed { get; init; } = 2;
    /// <summary>Slow LC admission runs this often (En4S only); the first run is at time 0, before any load.</summary>
    public long AdmissionEveryNs { get; init; } = 1_000_000;
    /// <summary>Per-group IOPS and goodput over windows of this length from time 0 (Fig. 11's 25 ms); 0: none.</summary>
    public long WindowNs { get; init; }
}

/// <summary>
/// Runs a workload through a scheduler on the device model, all on virtual time: the same seeds give the same
/// outcomes. The base of the flash benchmarks (issue 22: Fig. 8, 10–12). Goodput counts requests completed within
/// the tenant's p95 latency SLO (§2.2); a BE tenant's goodput is its completed IOPS.
/// </summary>
public static class WorkloadDriver
{
    public static IReadOnlyList<TenantOutcome> Run(IIoScheduler scheduler, DeviceModel device,
        IReadOnlyList<WorkloadTenant> tenants, WorkloadRun run) => RunDetailed(scheduler, device, tenants, run).Tenants;

    public static WorkloadResult RunDetailed(IIoScheduler scheduler, DeviceModel device,
        IReadOnlyList<WorkloadTenant> tenants, WorkloadRun run)
    {
        ArgumentNullException.ThrowIfNull(scheduler);
        ArgumentNullException.ThrowIfNull(device);
        ArgumentNullException.ThrowIfNull(tenants);
        ArgumentNullException.ThrowIfNull(run);
        if (run.WarmupNs >= run.DurationNs || run.PollNs < 1)
            throw new ArgumentException($"workload run: warm-up {run.WarmupNs} ns must be shorter than duration {run.DurationNs} ns and poll {run.PollNs} ns >= 1");
        int count = tenants.Count;
        var ids = new int[count];
        var admission = new string[count];
        var byId = new Dictionary<int, int>();
        for (int i = 0; i < count; i++)
        {
            ids[i] = scheduler.Register(tenants[i].Spec);
            byId[ids[i]] = i;
            admission[i] = tenants[i].Spec.IsLatencyCritical ? "pending" : "best-effort";
        }
        var en4s = scheduler as En4sScheduler;
        long nextAdmission = 0;

        var rng = new SeededRng(run.ArrivalSeed);
        var arrivals = new PriorityQueue<int, long>(count);
        var next = new double[count];
        for (int i = 0; i < count; i++)
            if (tenants[i].OfferedIops > 0)
            {
                next[i] = rng.NextExponential(1e9 / tenants[i].RateAt(0));
                arrivals.Enqueue(i, (long)next[i]);
            }

        var latencies = new List<long>[count];
        var readLatencies = new List<long>[count];
        var good = new long[count];
        for (int i = 0; i < count; i++)
        {
            latencies[i] = [];
            readLatencies[i] = [];
        }
        var groupNames = new List<string>();
        var groupOf = new int[count];
        for (int i = 0; i < count; i++)
        {
            string g = tenants[i].Group.Length > 0 ? tenants[i].Group : tenants[i].Spec.Name;
            int gi = groupNames.IndexOf(g);
            if (gi < 0) { gi = groupNames.Count; groupNames.Add(g); }
            groupOf[i] = gi;
        }
        int windows = run.WindowNs > 0 ? (int)((run.DurationNs + run.WindowNs - 1) / run.WindowNs) : 0;
        var windowDone = new long[groupNames.Count, Math.Max(windows, 1)];
        var windowGood = new long[groupNames.Count, Math.Max(windows, 1)];
        var batch = new IoRequest[64];
        long id = 0;
        for (long now = 0; now < run.DurationNs; now += run.PollNs)
        {
            if (en4s is not null && now >= nextAdmission)
            {
                foreach (var d in en4s.RunAdmission(now))
                    admission[byId[d.Tenant]] = d.Admitted ? "admitted" : d.Reason;
                nextAdmission += run.AdmissionEveryNs;
            }
            while (arrivals.TryPeek(out int i, out long at) && at <= now)
            {
                arrivals.Dequeue();
                var w = tenants[i];
                var type = rng.NextDouble() < w.ReadRatio ? IoType.Read : IoType.Write;
                scheduler.Enqueue(new IoRequest(id++, ids[i], type, w.SizeBytes, at), now);
                next[i] += rng.NextExponential(1e9 / w.RateAt(at));
                arrivals.Enqueue(i, (long)next[i]);
            }
            while (device.TryComplete(now, out var c))
            {
                scheduler.OnCompletion(c.Request, now);
                int i = byId[c.Request.Tenant];
                bool inSlo = tenants[i].Spec.P95LatencyUs == 0 || c.LatencyNs <= tenants[i].Spec.P95LatencyUs * 1000L;
                if (windows > 0 && c.CompleteNs < run.DurationNs)
                {
                    int wi = (int)(c.CompleteNs / run.WindowNs);
                    windowDone[groupOf[i], wi]++;
                    if (inSlo) windowGood[groupOf[i], wi]++;
                }
                if (c.CompleteNs < run.WarmupNs)
                    continue; // measured by completion time: a backlog carried past the warm-up still counts
                latencies[i].Add(c.LatencyNs);
                if (c.Request.Type == IoType.Read)
                    readLatencies[i].Add(c.LatencyNs);
                if (inSlo)
                    good[i]++;
            }
            int n = scheduler.Dispatch(now, batch);
            for (int k = 0; k < n; k++)
                if (!device.TrySubmit(batch[k], now))
                    throw new InvalidOperationException($"{scheduler.Name}: dispatched request {batch[k].Id} but the device queue ({device.Profile.QueueDepth}) is full; the in-flight caps exceed the queue depth");
        }

        double seconds = (run.DurationNs - run.WarmupNs) * 1e-9;
        var outcomes = new TenantOutcome[count];
        for (int i = 0; i < count; i++)
        {
            var spec = tenants[i].Spec;
            bool lc = spec.IsLatencyCritical && (en4s is null || admission[i] == "admitted");
            outcomes[i] = new TenantOutcome(spec.Name, lc, spec.IopsSlo, spec.P95LatencyUs, tenants[i].OfferedIops,
                latencies[i].Count / seconds, good[i] / seconds,
                P95(latencies[i]) / 1000.0, P95(readLatencies[i]) / 1000.0, admission[i]);
        }
        var groups = new GroupOutcome[groupNames.Count];
        for (int g = 0; g < groups.Length; g++)
        {
            var all = new List<long>();
            var reads = new List<long>();
            double slo = 0, offered = 0, goodSum = 0;
            int members = 0;
            for (int i = 0; i < count; i++)
            {
                if (groupOf[i] != g) continue;
                members++;
                all.AddRange(latencies[i]);
                reads.AddRange(readLatencies[i]);
                slo += tenants[i].Spec.IopsSlo;
                offered += tenants[i].OfferedIops;
                goodSum += good[i];
            }
            var wIops = new double[windows];
            var wGood = new double[windows];
            for (int w = 0; w < windows; w++)
            {
                wIops[w] = windowDone[g, w] * 1e9 / run.WindowNs;
                wGood[w] = windowGood[g, w] * 1e9 / run.WindowNs;
            }
            groups[g] = new GroupOutcome(groupNames[g], members, slo, offered, all.Count / seconds, goodSum / seconds,
                P95(all) / 1000.0, P95(reads) / 1000.0, wIops, wGood);
        }
        var lcReads = new List<long>();
        for (int i = 0; i < count; i++)
            if (tenants[i].Spec.IsLatencyCritical)
                lcReads.AddRange(readLatencies[i]);
        return new WorkloadResult(outcomes, groups, P95(lcReads) / 1000.0);
    }

    private static double P95(List<long> values)
    {
        if (values.Count == 0)
            return double.NaN;
        values.Sort();
        return values[(int)Math.Ceiling(0.95 * values.Count) - 1];
    }
}
