namespace FaaST.FlashBackend.Scheduling;

/// <summary>One tenant of a driven workload: its SLO and the load it offers (4 KiB-block requests of
/// <see cref="SizeBytes"/>, Poisson arrivals at <see cref="OfferedIops"/>, reads with probability
/// <see cref="ReadRatio"/>).</summary>
public sealed record WorkloadTenant(TenantSpec Spec, double OfferedIops, double ReadRatio, int SizeBytes = 4096);

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
}

/// <summary>
/// Runs a workload through a scheduler on the device model, all on virtual time: the same seeds give the same
/// outcomes. The base of the flash benchmarks (issue 22: Fig. 8, 10–12). Goodput counts requests completed within
/// the tenant's p95 latency SLO (§2.2); a BE tenant's goodput is its completed IOPS.
/// </summary>
public static class WorkloadDriver
{
    public static IReadOnlyList<TenantOutcome> Run(IIoScheduler scheduler, DeviceModel device,
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
                next[i] = rng.NextExponential(1e9 / tenants[i].OfferedIops);
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
                next[i] += rng.NextExponential(1e9 / w.OfferedIops);
                arrivals.Enqueue(i, (long)next[i]);
            }
            while (device.TryComplete(now, out var c))
            {
                scheduler.OnCompletion(c.Request, now);
                if (c.CompleteNs < run.WarmupNs)
                    continue; // measured by completion time: a backlog carried past the warm-up still counts
                int i = byId[c.Request.Tenant];
                latencies[i].Add(c.LatencyNs);
                if (c.Request.Type == IoType.Read)
                    readLatencies[i].Add(c.LatencyNs);
                int slo = tenants[i].Spec.P95LatencyUs;
                if (slo == 0 || c.LatencyNs <= slo * 1000L)
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
        return outcomes;
    }

    private static double P95(List<long> values)
    {
        if (values.Count == 0)
            return double.NaN;
        values.Sort();
        return values[(int)Math.Ceiling(0.95 * values.Count) - 1];
    }
}
