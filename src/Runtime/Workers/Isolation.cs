
namespace FaaST.Runtime.Workers;

/// <summary>Whom an app's workers run as (--isolation): the app's own user (<see cref="WorkerIdentity"/>) or the host's.</summary>
internal static class Isolation
{
    /// <summary>
    /// Decides whom the app's workers run as. Returns the app's user, or null (the host's user) with
    /// <paramref name="reason"/> saying why, after logging it.
    /// </summary>
    /// <param name="mustRead">What the workers read: the app directory, the worker's folder, node_modules.</param>
    /// <exception cref="AppConfigException">Isolation is required and not possible; the message says why.</exception>
    public static WorkerIdentity? Choose(IsolationMode mode, string userName, IEnumerable<string> mustRead, ILogger logger, out string reason)
    {
        if (mode == IsolationMode.Off)
        {
            reason = "isolation is off (--isolation off)";
            Log.WorkersRunAsHostUser(logger, Environment.UserName, reason);
            return null;
        }
        WorkerIdentity? identity = null;
        if (!Environment.IsPrivilegedProcess)
        {
            reason = $"per-app isolation needs root; the host runs as {Environment.UserName}";
        }
        else
        {
            try
            {
                identity = WorkerIdentity.Ensure(userName);
                reason = identity.FirstUnreadable(mustRead) is { } path
                    ? $"the app user {userName} cannot read {path}"
                    : "";
            }
            catch (Exception e) when (e is InvalidOperationException or System.ComponentModel.Win32Exception)
            {
                reason = $"cannot run workers as {userName}: {e.Message}";
            }
        }
        if (reason.Length == 0)
        {
            Log.WorkersRunAs(logger, identity!.UserName, identity.UserId, identity.GroupId);
            return identity;
        }
        if (mode == IsolationMode.Required)
            throw new AppConfigException($"--isolation required: {reason}");
        Log.IsolationUnavailable(logger, Environment.IsPrivilegedProcess ? LogLevel.Warning : LogLevel.Information, reason);
        return null;
    }
}
