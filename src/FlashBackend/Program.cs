using FaaST.Common;
using FaaST.FlashBackend.Calibration;
using FaaST.FlashBackend.Server;

// `FaaST.FlashBackend serve [options]` (`./faast flash`): the flash tier's server in the foreground until SIGTERM or
// Ctrl-C, which drain it (running calls finish, the store closes). Exit codes: 0 stopped, 1 could not start (the
// message names the file or address), 2 bad options (one line naming the option).
// `FaaST.FlashBackend fit [options]` (`./faast flash fit`): the cost-model sweep of a device (Calibration/DeviceFit),
// writing the profile `serve --device-profile` loads. Exit codes: 0 written, 1 the sweep failed, 2 bad options.
if (args.Length > 0 && args[0] == "fit")
    return await FitAsync(args[1..]);
if (args.Length == 0 || args[0] != "serve")
{
    Console.Error.WriteLine("usage: FaaST.FlashBackend serve --device PATH --capacity SIZE --state DIR [--listen 127.0.0.1:PORT] [--reuse-port] [--allow-remote] [--ready-file PATH] [--scheduler en4s|reflex|fcfs] [--ephemeral] [--io io_uring|pread] [--device-tokens N | --device-profile FILE]");
    Console.Error.WriteLine("       " + FitCommand.Usage["usage: ".Length..]);
    return 2;
}
ServeOptions options;
try
{
    options = ServeOptions.Parse(args[1..]);
}
catch (OptionException e)
{
    Console.Error.WriteLine($"flash serve: {e.Message}");
    return 2;
}

using var stop = new CancellationTokenSource();
using IDisposable signals = StopSignals.Register(stop);
FlashServer server;
try
{
    server = await FlashServer.StartAsync(options);
}
catch (Exception e) when (e is IOException or InvalidDataException or UnauthorizedAccessException or ArgumentException)
{
    Console.Error.WriteLine($"flash serve: cannot start: {e.Message}");
    return 1;
}
await using (server)
{
    Console.WriteLine($"flash server on {server.Address} (device {options.Device}, {options.Scheduler}, admin key in {server.AdminKeyPath})");
    try
    {
        await Task.Delay(Timeout.Infinite, stop.Token);
    }
    catch (OperationCanceledException)
    {
        Console.WriteLine("flash server: stopping (draining calls, closing the store)");
    }
}
return 0;

static async Task<int> FitAsync(string[] args)
{
    DeviceFitOptions fit;
    try
    {
        fit = FitCommand.Parse(args);
    }
    catch (OptionException e)
    {
        Console.Error.WriteLine($"flash fit: {e.Message}");
        return 2;
    }
    try
    {
        DeviceFitResult result = await DeviceFit.RunAsync(fit, Console.Out);
        Console.WriteLine($"flash fit: {result.TokensPerSecond:0} tokens/s at queue depth {result.PeakQueueDepth}; write cost "
            + string.Join(", ", result.WriteCostTiers.Select(t => $"{t.WriteCost:0.##} at >= {t.MinReadRatio:P0} reads")));
        return 0;
    }
    catch (Exception e) when (e is IOException or UnauthorizedAccessException or ArgumentException or InvalidOperationException)
    {
        Console.Error.WriteLine($"flash fit: {fit.Path}: {e.Message}");
        return 1;
    }
}
