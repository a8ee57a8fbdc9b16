using System.Globalization;
using Microsoft.AspNetCore.Routing.Constraints;
using Microsoft.AspNetCore.Routing.Patterns;

namespace FaaST.AppModel;

/// <summary>
/// Checks an httpTrigger route template at load time. ASP.NET Core resolves route constraints only
/// when it builds its matcher, on the first request, for every endpoint at once: one template with
/// an unknown constraint (or bad arguments) made every route, the admin API and the workers' gRPC
/// channel answer 500. Checked here, such a template disables only its own function.
/// </summary>
internal static class RouteTemplates
{
    /// <summary>The constraints Azure Functions supports (ASP.NET Core's, by the same names).</summary>
    public static readonly string[] SupportedConstraints =
    [
        "alpha", "bool", "datetime", "decimal", "double", "float", "guid", "int", "long",
        "min", "max", "range", "length", "minlength", "maxlength", "regex",
    ];

    /// <summary>
    /// Throws <see cref="AppConfigException"/> naming <paramref name="file"/>, <paramref name="key"/>
    /// and what is wrong when <paramref name="route"/> is not a template the host can serve.
    /// </summary>
    public static void Validate(string route, string file, string key)
    {
        // Azure Functions keeps these for its own endpoints and refuses such a function ("The specified
        // route conflicts with one or more built in routes"), whatever the routePrefix; so does FaaST,
        // whose /admin endpoints would otherwise be shadowed with an empty routePrefix.
        foreach (var reserved in ReservedRoutePrefixes)
            if (route.StartsWith(reserved, StringComparison.OrdinalIgnoreCase))
                throw new AppConfigException(
                    $"{file}: {key} \"{route}\" conflicts with the host's built-in routes (a route may not start with \"{reserved}\", as in Azure Functions)");
        RoutePattern pattern;
        try
        {
            pattern = RoutePatternFactory.Parse(route);
        }
        catch (RoutePatternException e)
        {
            throw new AppConfigException($"{file}: {key} \"{route}\" is not a valid route template: {e.Message}");
        }
        foreach (var parameter in pattern.Parameters)
        {
            foreach (var policy in parameter.ParameterPolicies)
            {
                var text = policy.Content ?? "";
                var reason = Check(text);
                if (reason is not null)
                    throw new AppConfigException(
                        $"{file}: {key} \"{route}\": the constraint \"{text}\" of {{{parameter.Name}}} {reason}");
            }
        }
    }

    /// <summary>Route beginnings Azure Functions reserves for the host (compared without case).</summary>
    public static readonly string[] ReservedRoutePrefixes = ["admin", "runtime"];

    /// <summary>
    /// Azure Functions' rule for two HTTP functions: their routes conflict when the templates are the
    /// same text (without case, outer slashes aside) and their methods overlap (no methods: all).
    /// The function loaded later (folders in ordinal order) is put in error naming the earlier one and
    /// is not served; the earlier one is served. Disabled functions count, as in Azure (they keep their
    /// route). Functions already in error do not.
    /// </summary>
    public static List<FunctionDefinition> MarkConflicts(List<FunctionDefinition> functions)
    {
        var served = new List<FunctionDefinition>();
        for (var i = 0; i < functions.Count; i++)
        {
            var f = functions[i];
            if (f.Error is not null || f.Trigger is not { Type: BindingMetadata.HttpTrigger } trigger)
                continue;
            var other = served.FirstOrDefault(s => Conflict(trigger, s.Trigger!));
            if (other is null)
            {
                served.Add(f);
                continue;
            }
            var o = other.Trigger!;
            functions[i] = f with
            {
                ConflictsWith = other.Name,
                Error = $"{f.Source}: the route \"{trigger.Route}\" ({MethodList(trigger)}) conflicts with the route " +
                    $"\"{o.Route}\" ({MethodList(o)}) defined by function {other.Name} ({other.Source}); " +
                    "two functions may share a route only with different methods, so this one is not served",
            };
        }
        return functions;
    }

    private static bool Conflict(BindingMetadata a, BindingMetadata b) =>
        string.Equals(a.Route!.Trim('/'), b.Route!.Trim('/'), StringComparison.OrdinalIgnoreCase) &&
        (a.Methods is null || b.Methods is null || a.Methods.Intersect(b.Methods, StringComparer.OrdinalIgnoreCase).Any());

    private static string MethodList(BindingMetadata t) => t.Methods is { } m ? string.Join(", ", m) : "all methods";

    /// <summary>Why the inline constraint <paramref name="text"/> cannot be used; null when it can.</summary>
    private static string? Check(string text)
    {
        var open = text.IndexOf('(');
        string name, argument;
        if (open < 0)
        {
            name = text;
            argument = "";
        }
        else
        {
            if (!text.EndsWith(')'))
                return "has no closing parenthesis";
            name = text[..open];
            argument = text[(open + 1)..^1];
        }
        var known = SupportedConstraints.FirstOrDefault(c => c.Equals(name, StringComparison.OrdinalIgnoreCase));
        if (known is null)
            return $"is not supported (supported: {string.Join(", ", SupportedConstraints)})";
        var args = argument.Length == 0 ? [] : argument.Split(',');
        try
        {
            // The same constructors ASP.NET Core's constraint resolver calls, so a template accepted
            // here is accepted when the matcher is built.
            _ = known switch
            {
                "regex" => open < 0 || argument.Length == 0 ? throw new FormatException("needs a pattern: regex(PATTERN)") : new RegexInlineRouteConstraint(argument).Constraint, // compiled lazily: force it (a bad pattern throws ArgumentException)
                "min" => new MinRouteConstraint(Long(args, 1, "min(N)")[0]),
                "max" => new MaxRouteConstraint(Long(args, 1, "max(N)")[0]),
                "range" => RangeOf(Long(args, 2, "range(MIN,MAX)")),
                "minlength" => new MinLengthRouteConstraint(Int(args, 1, "minlength(N)")[0]),
                "maxlength" => new MaxLengthRouteConstraint(Int(args, 1, "maxlength(N)")[0]),
                "length" => args.Length == 1
                    ? new LengthRouteConstraint(Int(args, 1, "length(N) or length(MIN,MAX)")[0])
                    : LengthOf(Int(args, 2, "length(N) or length(MIN,MAX)")),
                _ => open >= 0 ? throw new FormatException("takes no arguments") : (object)known,
            };
        }
        catch (Exception e) when (e is FormatException or ArgumentException)
        {
            return e.Message.Split(" (Parameter", 2)[0];
        }
        return null;
    }

    private static object RangeOf(long[] a) =>
        a[0] <= a[1] ? new RangeRouteConstraint(a[0], a[1]) : throw new FormatException($"needs MIN <= MAX, got {a[0]} > {a[1]}");

    private static object LengthOf(int[] a) =>
        a[0] <= a[1] ? new LengthRouteConstraint(a[0], a[1]) : throw new FormatException($"needs MIN <= MAX, got {a[0]} > {a[1]}");

    private static long[] Long(string[] args, int count, string form)
    {
        if (args.Length != count)
            throw new FormatException($"must be written {form}");
        return args.Select(a => long.TryParse(a.Trim(), NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out var n)
            ? n : throw new FormatException($"must be written {form} with whole numbers, not \"{a}\"")).ToArray();
    }

    private static int[] Int(string[] args, int count, string form)
    {
        var values = Long(args, count, form);
        return values.Select(v => v is >= 0 and <= int.MaxValue
            ? (int)v : throw new FormatException($"must be written {form} with lengths from 0 to {int.MaxValue}, not {v}")).ToArray();
    }
}
