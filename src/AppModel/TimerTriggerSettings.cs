namespace FaaST.AppModel;

/// <summary>
/// A timerTrigger binding's settings, validated in one place so that function.json bindings and (later)
/// worker-indexed ones (Python v2 <c>@app.schedule</c>, Node v4 <c>app.timer</c>) get the same checks and
/// the same messages.
/// </summary>
public sealed record TimerTriggerSettings(TimerSchedule Schedule, bool RunOnStartup, bool UseMonitor)
{
    /// <summary>
    /// Resolves a %AppSetting% schedule, parses it, and applies Azure's useMonitor default (true when occurrences
    /// are at least a minute apart, false for sub-minute schedules). On failure returns null and an error naming
    /// the function and the expression; the caller disables that function and the rest of the app serves.
    /// </summary>
    public static TimerTriggerSettings? Resolve(string function, string? schedule, bool? runOnStartup, bool? useMonitor,
        Func<string, string?> setting, out string? error)
    {
        error = null;
        string expanded;
        try
        {
            expanded = BindingTemplate.ExpandAppSettings(schedule ?? "", setting, $"function {function}: timerTrigger schedule");
        }
        catch (FormatException e)
        {
            error = e.Message;
            return null;
        }
        if (!TimerSchedule.TryParse(expanded, out var parsed, out var parseError))
        {
            error = schedule is not null && schedule != expanded
                ? $"function {function}: timerTrigger schedule \"{schedule}\" (from app settings): {parseError}"
                : $"function {function}: timerTrigger {parseError}";
            return null;
        }
        return new TimerTriggerSettings(parsed!, runOnStartup ?? false, useMonitor ?? parsed!.AtLeastAMinuteApart);
    }
}
