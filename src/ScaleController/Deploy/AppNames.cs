namespace FaaST.ScaleController.Deploy;

/// <summary>
/// The names a deployed app may have. An app's name is its package folder in <c>faast-deployments</c>, the last
/// folder of its extracted copy (the runtime names the app, its membership folder and its workers' user after
/// that folder), and the <c>{app}.</c> label of host-based routing: so lowercase letters, digits and '-',
/// 1 to 60 characters, starting and ending with a letter or digit (a DNS label, a blob path segment and a
/// membership name all accept that; 60 leaves room under Linux's 32-character user names' hashing and DNS's 63).
/// </summary>
public static class AppNames
{
    public const int MaxLength = 60;

    /// <summary>Why <paramref name="name"/> cannot name an app, or null when it can.</summary>
    public static string? Problem(string? name)
    {
        if (string.IsNullOrEmpty(name))
            return "an app name is required (1 to 60 lowercase letters, digits and '-')";
        if (name.Length > MaxLength)
            return $"the app name \"{Printable(name)}\" has {name.Length} characters; at most {MaxLength} are allowed";
        foreach (var c in name)
            if (!char.IsAsciiLetterLower(c) && !char.IsAsciiDigit(c) && c != '-')
                return $"the app name \"{Printable(name)}\" has '{Printable(c.ToString())}'; use lowercase letters a-z, digits and '-'";
        if (name[0] == '-' || name[^1] == '-')
            return $"the app name \"{Printable(name)}\" must start and end with a letter or digit";
        return null;
    }

    /// <summary>Throws <see cref="ArgumentException"/> with <see cref="Problem"/>'s reason.</summary>
    public static void Validate(string? name, string paramName = "app")
    {
        if (Problem(name) is { } problem)
            throw new ArgumentException(problem, paramName);
    }

    private static string Printable(string s) =>
        new(s.Take(80).Select(c => char.IsControl(c) ? '?' : c).ToArray());
}
