using System.Net.Http.Json;
using FaaST.Hosting.Status;
using FaaST.Runtime.Hosting;

namespace FaaST.Bench;

/// <summary>What the scenarios that start instance groups (distributed, faults) share.</summary>
internal static class GroupReadiness
{
    /// <summary>"warn: Category[0] ...", with or without a timestamp before it.</summary>
    public static readonly System.Text.RegularExpressions.Regex LogProblem = new(@"^(\S+ )?(warn|fail|crit): ");

    /// <summary>
    /// Waits (up to 60 s) until every instance of <paramref name="group"/> has <paramref name="workers"/>
    /// ready workers; otherwise stops the group and throws, naming the instance and its log folder.
    /// </summary>
    public static async Task WaitForWorkersAsync(InstanceGroup group, int workers, string logDirectory)
    {
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(5) };
        var deadline = DateTime.UtcNow.AddSeconds(60);
        foreach (var instance in group.Instances)
        {
            while ((await http.GetFromJsonAsync(new Uri(instance.BaseAddress, "admin/host/status"), StatusJsonContext.Default.HostStatus))!.ReadyWorkers < workers)
            {
                if (DateTime.UtcNow > deadline)
                {
                    await group.DisposeAsync();
                    throw new TimeoutException($"instance {instance.Index} has not {workers} ready worker(s) after 60 s (log: {logDirectory})");
                }
                await Task.Delay(100);
            }
        }
    }
}
