namespace FaaST.ScaleController.Platform.Flash;

/// <summary>The platform's flash server lines (event ids 8260-8269).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8260, Level = LogLevel.Information, Message = "Flash server started at {Address} (pid {Pid}; device {Device}, state {State}; device profile {Profile})")]
    public static partial void Started(ILogger logger, Uri address, int pid, string device, string state, string profile);

    [LoggerMessage(EventId = 8261, Level = LogLevel.Warning, Message = "Flash server (pid {Pid}) exited with {ExitCode}; restarting it on {Address} (instances read from storage meanwhile)")]
    public static partial void Exited(ILogger logger, int pid, int exitCode, Uri address);

    [LoggerMessage(EventId = 8262, Level = LogLevel.Error, Message = "Flash server did not restart ({Reason}); trying again in {Delay}")]
    public static partial void RestartFailed(ILogger logger, string reason, TimeSpan delay);

    [LoggerMessage(EventId = 8263, Level = LogLevel.Information, Message = "App {App}: registered with the flash tier as {Class} ({Slo})")]
    public static partial void Registered(ILogger logger, string app, string @class, string slo);

    [LoggerMessage(EventId = 8264, Level = LogLevel.Information, Message = "App {App}: deregistered from the flash tier ({Objects} objects deleted)")]
    public static partial void Deregistered(ILogger logger, string app, long objects);

    [LoggerMessage(EventId = 8265, Level = LogLevel.Warning, Message = "App {App}: deregistering from the flash tier failed: {Reason}")]
    public static partial void DeregisterFailed(ILogger logger, string app, string reason);

    [LoggerMessage(EventId = 8266, Level = LogLevel.Information, Message = "[flash] {Line}")]
    public static partial void Output(ILogger logger, string line);
}
