using System.Runtime.InteropServices;

namespace FaaST.Common;

/// <summary>Ctrl-C and SIGTERM cancel a process's stop token instead of ending it, so it can drain and clean up.</summary>
public static class StopSignals
{
    /// <summary>Routes both to <paramref name="stop"/> until the returned registration is disposed.</summary>
    public static IDisposable Register(CancellationTokenSource stop)
    {
        Console.CancelKeyPress += (_, e) =>
        {
            e.Cancel = true;
            Cancel(stop);
        };
        return PosixSignalRegistration.Create(PosixSignal.SIGTERM, ctx =>
        {
            ctx.Cancel = true;
            Cancel(stop);
        });
    }

    private static void Cancel(CancellationTokenSource stop)
    {
        try
        {
            stop.Cancel();
        }
        catch (ObjectDisposedException)
        {
            // a signal after the process's life: nothing left to stop
        }
    }
}
