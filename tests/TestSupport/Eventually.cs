using System.Diagnostics;

namespace FaaST.TestSupport;

/// <summary>
/// Polls a condition until it holds, with a generous deadline: tests wait for what they need and never assert
/// on how long it took; on the deadline the test fails naming what it waited for.
/// </summary>
public static class Eventually
{
    /// <param name="state">What to add to the failure (e.g. what the condition looked at), read only then.</param>
    public static async Task TrueAsync(Func<bool> condition, string what, Func<string>? state = null, int seconds = 60)
    {
        var clock = Stopwatch.StartNew();
        while (!condition())
        {
            if (clock.Elapsed > TimeSpan.FromSeconds(seconds))
                Assert.Fail($"Not within {seconds} s: {what}.{(state is null ? "" : " State: " + state())}");
            await Task.Delay(50);
        }
    }

    public static async Task TrueAsync(Func<Task<bool>> condition, string what, int seconds = 60)
    {
        var clock = Stopwatch.StartNew();
        while (!await condition())
        {
            if (clock.Elapsed > TimeSpan.FromSeconds(seconds))
                Assert.Fail($"Not within {seconds} s: {what}.");
            await Task.Delay(50);
        }
    }
}
