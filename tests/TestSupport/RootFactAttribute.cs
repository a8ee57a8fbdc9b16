namespace FaaST.TestSupport;

/// <summary>
/// A fact that needs root (cgroups, per-app users): skipped, with the reason, when the tests run as
/// another user, rather than returning early and reporting a pass that tested nothing.
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class RootFactAttribute : FactAttribute
{
    /// <param name="why">What the test needs root for (shown with the skip).</param>
    public RootFactAttribute(string why)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(why);
        Why = why;
        if (!Environment.IsPrivilegedProcess)
            Skip = $"needs root ({why}); running as {Environment.UserName}";
    }

    public string Why { get; }
}
