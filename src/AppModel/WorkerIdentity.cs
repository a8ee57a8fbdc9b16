using System.Diagnostics;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace FaaST.AppModel;

/// <summary>Whether an app's workers run as a Unix user of their own (--isolation).</summary>
public enum IsolationMode
{
    /// <summary>The app's user when the host is root and that user can read what the workers need;
    /// otherwise the host's user, with a log line saying why.</summary>
    Auto,

    /// <summary>The app's user, or the host does not start.</summary>
    Required,

    /// <summary>Workers run as the host's user.</summary>
    Off,
}

/// <summary>
/// The Unix user an app's workers run as: a system user per app ("faast-" + the app's name), created
/// on first use. It owns the app's shared-memory segments (0700/0600), so the workers of another app,
/// another user, cannot open them.
/// </summary>
public sealed record WorkerIdentity(string UserName, int UserId, int GroupId)
{
    private const string Prefix = "faast-";
    private const int MaxUserName = 32; // useradd's limit on Linux
    private const string UserAdd = "/usr/sbin/useradd";
    private static readonly Lock Gate = new();

    /// <summary>The owner the cache gives its segment directory and files to.</summary>
    public FileOwner Owner => new(UserId, GroupId);

    /// <summary>"faast-" + the app's name in lowercase letters, digits and '-', starting with a letter;
    /// a name too long for Linux is cut and ends with a hash of the whole app name instead.</summary>
    public static string UserNameFor(string appName)
    {
        var body = new string(appName.ToLowerInvariant().Select(c => char.IsAsciiLetterLower(c) || char.IsAsciiDigit(c) ? c : '-').ToArray());
        body = body.TrimStart(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']).TrimEnd('-');
        if (body.Length == 0)
            body = "app";
        if (Prefix.Length + body.Length <= MaxUserName)
            return Prefix + body;
        var hash = Convert.ToHexStringLower(SHA256.HashData(Encoding.UTF8.GetBytes(appName)))[..8];
        return Prefix + body[..(MaxUserName - Prefix.Length - hash.Length - 1)].TrimEnd('-') + "-" + hash;
    }

    /// <summary>Looks the user up, first creating it (a system user with its own group, no home, no
    /// shell) if it does not exist. Needs root to create.</summary>
    /// <exception cref="InvalidOperationException">useradd failed, or could not be run.</exception>
    public static WorkerIdentity Ensure(string userName)
    {
        lock (Gate)
        {
            if (Lookup(userName) is { } known)
                return known;
            for (var attempt = 1; ; attempt++)
            {
                var (exit, _, error) = Run(new ProcessStartInfo(File.Exists(UserAdd) ? UserAdd : "useradd",
                    ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group", userName]));
                // 9: it exists (another host created it first). 1: /etc/passwd is locked by another useradd, for a moment.
                if (exit is 0 or 9)
                    break;
                if (exit == 1 && attempt < 10)
                {
                    Thread.Sleep(200);
                    if (Lookup(userName) is { } created)
                        return created;
                    continue;
                }
                throw new InvalidOperationException($"useradd {userName} failed (exit {exit}): {error}");
            }
            return Lookup(userName) ?? throw new InvalidOperationException($"useradd created {userName}, but getent passwd does not find it");
        }
    }

    /// <summary>
    /// The first of <paramref name="paths"/> this user cannot read (a directory: list and enter), found
    /// by running test(1) as the user, so ACLs, parent directories and groups all count; null when it
    /// can read them all.
    /// </summary>
    /// <exception cref="InvalidOperationException">The test could not run as the user.</exception>
    public string? FirstUnreadable(IEnumerable<string> paths)
    {
        var info = AsThisUser(new ProcessStartInfo("/bin/sh") { WorkingDirectory = "/" });
        info.ArgumentList.Add("-c");
        info.ArgumentList.Add("""for p do if [ -d "$p" ]; then [ -r "$p" ] && [ -x "$p" ]; else [ -r "$p" ]; fi || { printf '%s\n' "$p"; exit 1; }; done""");
        info.ArgumentList.Add("sh");
        foreach (var path in paths)
            info.ArgumentList.Add(path);
        var (exit, output, error) = Run(info);
        return exit switch
        {
            0 => null,
            1 when output.Length > 0 => output,
            _ => throw new InvalidOperationException($"cannot run a test as {UserName} (exit {exit}): {error}"),
        };
    }

    /// <summary>Makes <paramref name="info"/> start its process as this user (the child calls
    /// setgroups, setgid and setuid before exec), with a HOME that is no one's.</summary>
    public ProcessStartInfo AsThisUser(ProcessStartInfo info)
    {
        info.UserName = UserName;
        SetEnvironment(info.Environment);
        return info;
    }

    /// <summary>Sets the variables that name the user (HOME, USER, LOGNAME) in a worker's environment.</summary>
    public void SetEnvironment(IDictionary<string, string?> environment)
    {
        environment["HOME"] = "/nonexistent";
        environment["USER"] = UserName;
        environment["LOGNAME"] = UserName;
    }

    private static WorkerIdentity? Lookup(string userName)
    {
        var (exit, output, error) = Run(new ProcessStartInfo("getent", ["passwd", userName]));
        if (exit == 2)
            return null; // no such user
        var fields = output.Split(':');
        if (exit != 0 || fields.Length < 4
            || !int.TryParse(fields[2], NumberStyles.None, CultureInfo.InvariantCulture, out var uid)
            || !int.TryParse(fields[3], NumberStyles.None, CultureInfo.InvariantCulture, out var gid))
            throw new InvalidOperationException($"getent passwd {userName} failed (exit {exit}): {error}{output}");
        return new WorkerIdentity(userName, uid, gid);
    }

    private static (int Exit, string Output, string Error) Run(ProcessStartInfo info)
    {
        info.UseShellExecute = false;
        info.RedirectStandardOutput = true;
        info.RedirectStandardError = true;
        using var process = Process.Start(info) ?? throw new InvalidOperationException($"cannot start {info.FileName}");
        var error = process.StandardError.ReadToEndAsync();
        var output = process.StandardOutput.ReadToEnd();
        process.WaitForExit();
        return (process.ExitCode, output.Trim(), error.Result.Trim());
    }
}
