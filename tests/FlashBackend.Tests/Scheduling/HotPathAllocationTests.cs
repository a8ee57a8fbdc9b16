using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

public class HotPathAllocationTests
{
    public static TheoryData<string> Schedulers => new() { "en4s", "reflex", "fcfs" };

    private static IIoScheduler Make(string name) => name switch
    {
        "en4s" => new En4sScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, En4sSettings.Conservative),
        "reflex" => new ReflexScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge),
        _ => new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default),
    };

    [Theory]
    [MemberData(nameof(Schedulers))]
    public void EnqueueDispatchAndCompletionAllocateNothingOnceTheQueuesHaveGrown(string name)
    {
        var s = Make(name);
        var tenants = new int[20];
        for (int i = 0; i < tenants.Length; i++)
            tenants[i] = s.Register(i % 2 == 0 ? new TenantSpec($"lc{i}", 6_000, 2000, 0.9) : new TenantSpec($"be{i}"));
        (s as En4sScheduler)?.RunAdmission(0);
        var device = new DeviceModel(DeviceProfile.I3XLarge, 9);
        var batch = new IoRequest[64];
        long now = 0, id = 0;
        void Cycle(int rounds)
        {
            for (int k = 0; k < rounds; k++)
            {
                now += 10_000;
                // 50K requests/s, one in seven a write, spread over the tenants: every tenant within its rate, so the
                // queues stop growing after warm-up.
                if (k % 2 == 0)
                {
                    id++;
                    s.Enqueue(new IoRequest(id, tenants[(int)(id % tenants.Length)], id % 7 == 0 ? IoType.Write : IoType.Read, 4096, now), now);
                }
                while (device.TryComplete(now, out var c))
                    s.OnCompletion(c.Request, now);
                int n = s.Dispatch(now, batch);
                for (int j = 0; j < n; j++)
                    Assert.True(device.TrySubmit(batch[j], now));
            }
        }
        Cycle(20_000); // rings grow to the workload's depth
        long before = GC.GetAllocatedBytesForCurrentThread();
        Cycle(20_000);
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        Assert.Equal(0, allocated);
    }
}
