namespace FaaST.ScaleController.Telemetry;

/// <summary>The platform's telemetry's log lines (event ids 8310-8319, in the platform's 8300-8349).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8310, Level = LogLevel.Warning, Message = "Cannot write the Prometheus targets file {File}: {Reason}")]
    public static partial void TargetsNotWritten(ILogger logger, string file, string reason);

    [LoggerMessage(EventId = 8311, Level = LogLevel.Information, Message = "Platform telemetry: exporting {Signals} over OTLP to {Endpoint}")]
    public static partial void OtlpExporting(ILogger logger, string signals, string endpoint);
}
