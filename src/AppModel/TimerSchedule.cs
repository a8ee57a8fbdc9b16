using System.Globalization;

namespace FaaST.AppModel;

/// <summary>
/// A timerTrigger's <c>schedule</c>, validated: either an NCRONTAB expression with seconds (six fields,
/// "{second} {minute} {hour} {day} {month} {day-of-week}") or a TimeSpan interval ("00:00:30",
/// "1.00:00:00"). Kept in AppModel, apart from the listener, so that function.json and (later)
/// worker-indexed bindings are validated by the same code with the same messages.
/// Times are UTC: the caller passes and receives UTC instants.
/// </summary>
public sealed class TimerSchedule
{
    private static readonly string[] FieldNames = ["second", "minute", "hour", "day", "month", "day-of-week"];
    private static readonly int[] Min = [0, 0, 0, 1, 1, 0];
    private static readonly int[] Max = [59, 59, 23, 31, 12, 6];
    private static readonly string[] MonthNames = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
    private static readonly string[] DayNames = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

    // One bit per allowed value of each field (bit v set = value v allowed); 64 bits cover 0..59.
    private readonly ulong[] _sets = new ulong[6];

    /// <summary>The expression as written.</summary>
    public string Expression { get; }

    /// <summary>Set for a TimeSpan schedule (Azure accepts these only on dedicated plans; FaaST accepts them everywhere).</summary>
    public TimeSpan? Interval { get; }

    private TimerSchedule(string expression, TimeSpan? interval)
    {
        Expression = expression;
        Interval = interval;
    }

    /// <summary>
    /// Parses <paramref name="expression"/>; on failure returns false and <paramref name="error"/> says which
    /// field is wrong and why (the caller prefixes the function's name).
    /// </summary>
    public static bool TryParse(string? expression, out TimerSchedule? schedule, out string? error)
    {
        schedule = null;
        error = null;
        var text = expression?.Trim() ?? "";
        if (text.Length == 0)
        {
            error = "the schedule is empty; give an NCRONTAB expression with six fields such as \"0 */5 * * * *\" or a TimeSpan such as \"00:00:30\"";
            return false;
        }
        var fields = text.Split([' ', '\t'], StringSplitOptions.RemoveEmptyEntries);
        if (fields.Length == 1)
        {
            // No spaces: a TimeSpan ("c" format: [d.]hh:mm:ss[.fffffff]), as Azure's host reads it.
            if (TimeSpan.TryParseExact(text, "c", CultureInfo.InvariantCulture, out var span))
            {
                if (span <= TimeSpan.Zero)
                {
                    error = $"the schedule \"{text}\" is a TimeSpan that is not positive";
                    return false;
                }
                schedule = new TimerSchedule(text, span);
                return true;
            }
            error = $"the schedule \"{text}\" is neither a TimeSpan (such as \"00:00:30\" or \"1.00:00:00\") nor an NCRONTAB expression with six fields";
            return false;
        }
        if (fields.Length != 6)
        {
            error = $"the schedule \"{text}\" has {fields.Length} fields; NCRONTAB needs six: {{second}} {{minute}} {{hour}} {{day}} {{month}} {{day-of-week}}";
            return false;
        }
        var result = new TimerSchedule(text, null);
        for (var i = 0; i < 6; i++)
        {
            var fieldError = ParseField(fields[i], i, out result._sets[i]);
            if (fieldError is not null)
            {
                error = $"the schedule \"{text}\": field {i + 1} ({FieldNames[i]}) \"{fields[i]}\" {fieldError}";
                return false;
            }
        }
        schedule = result;
        return true;
    }

    private static string? ParseField(string field, int index, out ulong set)
    {
        set = 0;
        foreach (var item in field.Split(','))
        {
            if (item.Length == 0)
                return "has an empty list item";
            var rangePart = item;
            var step = 1;
            var slash = item.IndexOf('/');
            if (slash >= 0)
            {
                rangePart = item[..slash];
                if (!int.TryParse(item[(slash + 1)..], NumberStyles.None, CultureInfo.InvariantCulture, out step) || step < 1)
                    return $"has the step \"{item[(slash + 1)..]}\"; a step is a whole number of at least 1";
            }
            int low, high;
            if (rangePart == "*")
            {
                (low, high) = (Min[index], Max[index]);
            }
            else
            {
                var dash = rangePart.IndexOf('-');
                var lowText = dash >= 0 ? rangePart[..dash] : rangePart;
                var lowError = ParseValue(lowText, index, out low);
                if (lowError is not null)
                    return lowError;
                if (dash >= 0)
                {
                    var highError = ParseValue(rangePart[(dash + 1)..], index, out high);
                    if (highError is not null)
                        return highError;
                    if (high < low)
                        return $"has the range \"{rangePart}\" whose end is before its start";
                }
                else
                {
                    // "n/step" means from n to the field's maximum by step, as NCRONTAB reads it.
                    high = slash >= 0 ? Max[index] : low;
                }
            }
            for (var v = low; v <= high; v += step)
                set |= 1UL << v;
        }
        return null;
    }

    private static string? ParseValue(string text, int index, out int value)
    {
        value = 0;
        if (int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out value))
        {
            return value < Min[index] || value > Max[index]
                ? $"has the value {value} outside {Min[index]}-{Max[index]}"
                : null;
        }
        var names = index switch { 4 => MonthNames, 5 => DayNames, _ => null };
        if (names is not null && text.Length >= 3)
        {
            var at = Array.FindIndex(names, n => text.StartsWith(n, StringComparison.OrdinalIgnoreCase)
                && (text.Length == 3 || IsFullName(text, index)));
            if (at >= 0)
            {
                value = at + Min[index];
                return null;
            }
        }
        return names is null
            ? $"has \"{text}\", which is not a number"
            : $"has \"{text}\", which is neither a number nor a {(index == 4 ? "month" : "day")} name";
    }

    private static bool IsFullName(string text, int index) => index == 4
        ? CultureInfo.InvariantCulture.DateTimeFormat.MonthNames.Any(n => n.Equals(text, StringComparison.OrdinalIgnoreCase))
        : CultureInfo.InvariantCulture.DateTimeFormat.DayNames.Any(n => n.Equals(text, StringComparison.OrdinalIgnoreCase));

    /// <summary>
    /// Whether occurrences are at least a minute apart: a TimeSpan of a minute or more, or an NCRONTAB expression
    /// allowing exactly one second per minute (two allowed seconds put two occurrences within one minute). Azure
    /// turns useMonitor on by default only for such schedules ("Defaults to true for schedules with interval >= 1
    /// minute", @azure/functions TimerTriggerOptions.useMonitor on learn.microsoft.com).
    /// </summary>
    public bool AtLeastAMinuteApart => Interval is { } span
        ? span >= TimeSpan.FromMinutes(1)
        : System.Numerics.BitOperations.PopCount(_sets[0]) == 1;

    private bool Has(int field, int value) => (_sets[field] & (1UL << value)) != 0;

    /// <summary>
    /// The first occurrence strictly after <paramref name="afterUtc"/> (UTC). For an interval, after + interval.
    /// Day and day-of-week must both match (NCRONTAB's rule, unlike Vixie cron's "either").
    /// Null when no date within 28 years matches (e.g. "0 0 0 30 FEB *").
    /// </summary>
    public DateTime? NextAfter(DateTime afterUtc)
    {
        afterUtc = DateTime.SpecifyKind(afterUtc, DateTimeKind.Utc);
        if (Interval is { } span)
            return afterUtc + span;
        // Whole seconds: the first candidate is the next whole second after afterUtc.
        var start = new DateTime(afterUtc.Ticks - afterUtc.Ticks % TimeSpan.TicksPerSecond, DateTimeKind.Utc).AddSeconds(1);
        var day = start.Date;
        // 28 years: the Gregorian calendar's weekday/leap cycle, so any satisfiable date appears within it.
        var limit = day.AddYears(28);
        for (; day < limit; day = day.AddDays(1))
        {
            if (!Has(4, day.Month) || !Has(3, day.Day) || !Has(5, (int)day.DayOfWeek))
                continue;
            var first = day == start.Date;
            for (var h = first ? start.Hour : 0; h <= 23; h++)
            {
                if (!Has(2, h))
                    continue;
                var sameHour = first && h == start.Hour;
                for (var m = sameHour ? start.Minute : 0; m <= 59; m++)
                {
                    if (!Has(1, m))
                        continue;
                    var sameMinute = sameHour && m == start.Minute;
                    for (var s = sameMinute ? start.Second : 0; s <= 59; s++)
                    {
                        if (Has(0, s))
                            return new DateTime(day.Year, day.Month, day.Day, h, m, s, DateTimeKind.Utc);
                    }
                }
            }
        }
        return null;
    }
}
