using FaaST.Common;
using FaaST.FlashBackend.Server;

// `FaaST.FlashBackend serve [options]` (`./faast flash`): the flash tier's server in the foreground until SIGTERM or
// Ctrl-C, which drain it (running calls finish, the store closes). Exit codes: 0 stopped, 1 could not start (the
// message names the file or address), 2 bad options (one line naming the option).
if (args.Length == 0 || args[0] != "serve")
{
    Console.Error.WriteLine("usage: FaaST.FlashBackend serve --device PATH --capacity SIZE --state DIR [--listen 127.0.0.1:PORT] [--allow-remote] [--ready-file PATH] [--scheduler en4s|reflex|fcfs] [--ephemeral] [--device-tokens N]");
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
