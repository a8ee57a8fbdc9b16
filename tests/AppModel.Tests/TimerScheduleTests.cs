namespace FaaST.AppModel.Tests;

/// <summary>timerTrigger schedules: NCRONTAB with seconds (steps, ranges, lists, names, month ends, the
/// day-and-weekday rule), TimeSpans, and refusals naming the field.</summary>
public sealed class TimerScheduleTests
{
    private static DateTime Utc(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) =>
        new(y, mo, d, h, mi, s, DateTimeKind.Utc);

    private static TimerSchedule Parse(string expression)
    {
        Assert.True(TimerSchedule.TryParse(expression, out var schedule, out var error), error);
        return schedule!;
    }

    private static List<DateTime> Next(string expression, DateTime from, int count)
    {
        var schedule = Parse(expression);
        var list = new List<DateTime>();
        var at = from;
        for (var i = 0; i < count; i++)
        {
            at = schedule.NextAfter(at) ?? throw new Xunit.Sdk.XunitException($"no occurrence after {at:O}");
            list.Add(at);
        }
        return list;
    }

    private static string Refuse(string expression)
    {
        Assert.False(TimerSchedule.TryParse(expression, out var schedule, out var error));
        Assert.Null(schedule);
        Assert.NotNull(error);
        return error!;
    }

    [Fact]
    public void Every_five_minutes_steps_from_zero()
    {
        Assert.Equal([Utc(2026, 1, 1, 10, 5), Utc(2026, 1, 1, 10, 10), Utc(2026, 1, 1, 10, 15)],
            Next("0 */5 * * * *", Utc(2026, 1, 1, 10, 3, 17), 3));
    }

    [Fact]
    public void Next_is_strictly_after_an_exact_match()
    {
        Assert.Equal([Utc(2026, 1, 1, 10, 5)], Next("0 */5 * * * *", Utc(2026, 1, 1, 10, 0), 1));
        // a fraction of a second past a match moves on to the next one
        Assert.Equal([Utc(2026, 1, 1, 0, 0, 2)], Next("*/2 * * * * *", Utc(2026, 1, 1).AddMilliseconds(1), 1));
    }

    [Fact]
    public void Ranges_lists_and_stepped_ranges()
    {
        // seconds 10 and 40, hours 9 to 11 only, minute 0
        Assert.Equal([Utc(2026, 3, 2, 9, 0, 10), Utc(2026, 3, 2, 9, 0, 40), Utc(2026, 3, 2, 10, 0, 10), Utc(2026, 3, 2, 10, 0, 40),
                      Utc(2026, 3, 2, 11, 0, 10), Utc(2026, 3, 2, 11, 0, 40), Utc(2026, 3, 3, 9, 0, 10)],
            Next("10,40 0 9-11 * * *", Utc(2026, 3, 2, 8), 7));
        Assert.Equal([Utc(2026, 3, 2, 0, 10), Utc(2026, 3, 2, 0, 25), Utc(2026, 3, 2, 0, 40), Utc(2026, 3, 2, 1, 10)],
            Next("0 10-40/15 * * * *", Utc(2026, 3, 2), 4));
        // "n/step": from n to the end of the field
        Assert.Equal([Utc(2026, 3, 2, 0, 0, 50), Utc(2026, 3, 2, 0, 1, 5)],
            Next("5/15 * * * * *", Utc(2026, 3, 2, 0, 0, 36), 2));
    }

    [Fact]
    public void Month_and_day_names_in_any_case()
    {
        // 2026-11-28 is a Saturday; the next Monday and Friday at 09:30
        Assert.Equal([Utc(2026, 11, 30, 9, 30), Utc(2026, 12, 4, 9, 30), Utc(2026, 12, 7, 9, 30)],
            Next("0 30 9 * * Mon,FRI", Utc(2026, 11, 28), 3));
        Assert.Equal([Utc(2027, 1, 1), Utc(2027, 3, 1)], Next("0 0 0 1 jan,Mar *", Utc(2026, 11, 28), 2));
        Assert.Equal([Utc(2026, 12, 1), Utc(2027, 1, 1)], Next("0 0 0 1 OCT-DEC,JAN *", Utc(2026, 11, 28), 2));
    }

    [Fact]
    public void Month_ends_and_leap_days()
    {
        // the 31st only exists in some months
        Assert.Equal([Utc(2026, 1, 31), Utc(2026, 3, 31), Utc(2026, 5, 31), Utc(2026, 7, 31)],
            Next("0 0 0 31 * *", Utc(2026, 1, 1), 4));
        Assert.Equal([Utc(2028, 2, 29), Utc(2032, 2, 29)], Next("0 0 0 29 2 *", Utc(2026, 1, 1), 2));
        // a year boundary
        Assert.Equal([Utc(2026, 12, 31, 23, 59, 59), Utc(2027, 1, 1)], Next("* * * * * *", Utc(2026, 12, 31, 23, 59, 58), 2));
    }

    [Fact]
    public void Day_and_weekday_must_both_match()
    {
        // Friday the 13th: 2026-02-13, 2026-03-13, 2026-11-13
        Assert.Equal([Utc(2026, 2, 13), Utc(2026, 3, 13), Utc(2026, 11, 13)], Next("0 0 0 13 * 5", Utc(2026, 1, 1), 3));
    }

    [Fact]
    public void An_impossible_date_has_no_occurrence()
    {
        Assert.Null(Parse("0 0 0 30 2 *").NextAfter(Utc(2026, 1, 1)));
    }

    [Theory]
    [InlineData("00:00:30", 30)]
    [InlineData("00:05:00", 300)]
    [InlineData("1.00:00:00", 86400)]
    public void TimeSpans_are_intervals(string text, int seconds)
    {
        var schedule = Parse(text);
        Assert.Equal(TimeSpan.FromSeconds(seconds), schedule.Interval);
        Assert.Equal(Utc(2026, 1, 1).AddSeconds(seconds), schedule.NextAfter(Utc(2026, 1, 1)));
    }

    [Fact]
    public void Cron_schedules_have_no_interval()
    {
        Assert.Null(Parse("0 */5 * * * *").Interval);
    }

    [Theory]
    [InlineData("60 * * * * *", "field 1 (second) \"60\" has the value 60 outside 0-59")]
    [InlineData("0 */0 * * * *", "field 2 (minute) \"*/0\" has the step \"0\"")]
    [InlineData("0 0 24 * * *", "field 3 (hour) \"24\" has the value 24 outside 0-23")]
    [InlineData("0 0 0 0 * *", "field 4 (day) \"0\" has the value 0 outside 1-31")]
    [InlineData("0 0 0 * 13 *", "field 5 (month) \"13\"")]
    [InlineData("0 0 0 * FOO *", "field 5 (month) \"FOO\" has \"FOO\", which is neither a number nor a month name")]
    [InlineData("0 0 0 * * 7", "field 6 (day-of-week) \"7\" has the value 7 outside 0-6")]
    [InlineData("0 0 0 * * MON-XYZ", "field 6 (day-of-week) \"MON-XYZ\"")]
    [InlineData("0 30-10 * * * *", "field 2 (minute) \"30-10\" has the range \"30-10\" whose end is before its start")]
    [InlineData("0 1,,2 * * * *", "field 2 (minute) \"1,,2\" has an empty list item")]
    [InlineData("a * * * * *", "field 1 (second) \"a\" has \"a\", which is not a number")]
    public void Bad_fields_are_refused_naming_the_field(string expression, string fragment)
    {
        var error = Refuse(expression);
        Assert.Contains($"\"{expression}\"", error);
        Assert.Contains(fragment, error);
    }

    [Theory]
    [InlineData("0 */5 * * *", "has 5 fields; NCRONTAB needs six")]
    [InlineData("0 0 */5 * * * *", "has 7 fields")]
    [InlineData("every5min", "neither a TimeSpan")]
    [InlineData("00:00:00", "not positive")]
    [InlineData("", "the schedule is empty")]
    public void Bad_shapes_are_refused(string expression, string fragment)
    {
        Assert.Contains(fragment, Refuse(expression));
    }
}

/// <summary>A timerTrigger binding's settings: %AppSetting% schedules, useMonitor's default, errors naming the function.</summary>
public sealed class TimerTriggerSettingsTests
{
    private static readonly Dictionary<string, string> Settings = new() { ["EveryFive"] = "0 */5 * * * *", ["Broken"] = "0 */5 * *" };

    private static string? Setting(string name) => Settings.TryGetValue(name, out var v) ? v : null;

    [Fact]
    public void An_app_setting_schedule_is_resolved()
    {
        var t = TimerTriggerSettings.Resolve("Tick", "%EveryFive%", null, null, Setting, out var error);
        Assert.Null(error);
        Assert.Equal("0 */5 * * * *", t!.Schedule.Expression);
        Assert.False(t.RunOnStartup);
        Assert.True(t.UseMonitor);
    }

    [Theory]
    [InlineData("0 */5 * * * *", true)]
    [InlineData("*/2 * * * * *", false)]
    [InlineData("0,30 * * * * *", false)]
    [InlineData("00:01:00", true)]
    [InlineData("00:00:30", false)]
    public void UseMonitor_defaults_to_true_only_a_minute_apart_or_more(string schedule, bool expected)
    {
        Assert.Equal(expected, TimerTriggerSettings.Resolve("Tick", schedule, null, null, Setting, out _)!.UseMonitor);
        Assert.False(TimerTriggerSettings.Resolve("Tick", schedule, true, false, Setting, out _)!.UseMonitor);
        Assert.True(TimerTriggerSettings.Resolve("Tick", schedule, true, true, Setting, out _)!.RunOnStartup);
    }

    [Fact]
    public void Errors_name_the_function_and_the_expression()
    {
        Assert.Null(TimerTriggerSettings.Resolve("Tick", "0 */5 * * *", null, null, Setting, out var error));
        Assert.Contains("function Tick", error);
        Assert.Contains("\"0 */5 * * *\"", error);
        Assert.Null(TimerTriggerSettings.Resolve("Tick", "%Broken%", null, null, Setting, out error));
        Assert.Contains("function Tick", error);
        Assert.Contains("\"%Broken%\" (from app settings)", error);
        Assert.Contains("\"0 */5 * *\" has 4 fields", error);
        Assert.Null(TimerTriggerSettings.Resolve("Tick", "%Missing%", null, null, Setting, out error));
        Assert.Contains("app setting %Missing%, which is not set", error);
        Assert.Null(TimerTriggerSettings.Resolve("Tick", null, null, null, Setting, out error));
        Assert.Contains("the schedule is empty", error);
    }
}
