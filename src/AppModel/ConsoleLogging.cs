using Microsoft.Extensions.Logging;

namespace FaaST.AppModel;

/// <summary>
/// The console output of both processes, the host's and the platform's, set up in one place so that their lines
/// look alike and an operator (or a test reading a child's output) reads one format: one line per message with a
/// millisecond timestamp, and ASP.NET Core's own chatter only from warnings up.
/// </summary>
public static class ConsoleLogging
{
    /// <summary>Adds the single-line console logger and the filter on the framework's categories.</summary>
    public static ILoggingBuilder AddFaaSTConsole(this ILoggingBuilder builder)
    {
        ArgumentNullException.ThrowIfNull(builder);
        builder.AddFilter("Microsoft", LogLevel.Warning);
        builder.AddSimpleConsole(c =>
        {
            c.SingleLine = true;
            c.TimestampFormat = "HH:mm:ss.fff ";
        });
        return builder;
    }
}
