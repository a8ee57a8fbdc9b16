namespace FaaST.ScaleController.Deploy;

/// <summary>A deploy refused before anything changed in storage (a bad app, a bad package): the caller's input is
/// wrong, the running version keeps serving (issue 13: "An invalid deploy: refused with file, key and reason;
/// nothing changes").</summary>
public abstract class DeployRefusedException(string message, Exception? inner = null) : Exception(message, inner);

/// <summary>One thing wrong with an app: the file (relative to the app folder, '/'-separated), the JSON key
/// (null when the problem is the whole file, e.g. a syntax error), and the reason.</summary>
public sealed record DeployProblem(string File, string? Key, string Reason)
{
    /// <summary>"FILE: KEY: REASON" (or "FILE: REASON" without a key).</summary>
    public override string ToString() => Key is null ? $"{File}: {Reason}" : $"{File}: {Key}: {Reason}";
}

/// <summary>
/// The app is invalid. <see cref="Problems"/> lists every bad file found (each once, in the order host.json,
/// local.settings.json, faast.json, the functions by folder name, then links leading out of the app); <see cref="File"/>, <see cref="Key"/> and
/// <see cref="Reason"/> are the first. The message is one "FILE: KEY: REASON" line per problem.
/// </summary>
public sealed class DeployValidationException : DeployRefusedException
{
    public DeployValidationException(IReadOnlyList<DeployProblem> problems)
        : base(string.Join('\n', Require(problems)))
    {
        Problems = problems;
    }

    public IReadOnlyList<DeployProblem> Problems { get; }

    public string File => Problems[0].File;

    public string? Key => Problems[0].Key;

    public string Reason => Problems[0].Reason;

    private static IReadOnlyList<DeployProblem> Require(IReadOnlyList<DeployProblem> problems)
    {
        ArgumentNullException.ThrowIfNull(problems);
        if (problems.Count == 0)
            throw new ArgumentException("a validation error needs at least one problem", nameof(problems));
        return problems;
    }
}

/// <summary>A package (zip) or app folder that cannot be packaged or extracted safely: an entry escaping the
/// folder, a link, a file over the size cap, a corrupt archive. <see cref="Entry"/> names the entry or file.</summary>
public sealed class PackageException(string entry, string reason, Exception? inner = null)
    : DeployRefusedException($"{entry}: {reason}", inner)
{
    public string Entry { get; } = entry;

    public string Reason { get; } = reason;
}

/// <summary>Other deployers kept winning the race for the next version of an app; nothing of this deploy is current.</summary>
public sealed class DeployConflictException(string message) : Exception(message);

/// <summary>A deployment in storage is unusable: an app.json that is not a deployment record, a package whose
/// SHA-256 or size is not the one app.json promises, a package that is gone. The message names the blob.</summary>
public sealed class DeploymentStoreException(string message, Exception? inner = null) : Exception(message, inner);

/// <summary>The upload is larger than <see cref="DeployOptions.MaxPackageBytes"/> (HTTP 413); nothing changed.</summary>
public sealed class PackageTooLargeException(string app, long limit)
    : DeployRefusedException($"the package for app \"{app}\" is larger than the {limit}-byte cap (DeployOptions.MaxPackageBytes)")
{
    public long Limit { get; } = limit;
}

/// <summary>Another deploy of the same app is in progress (HTTP 409); deploys of one app are one at a time.</summary>
public sealed class DeployInProgressException(string app)
    : Exception($"another deploy of app \"{app}\" is in progress; deploys of one app run one at a time: try again when it has finished");

/// <summary>The platform already receives <see cref="DeployOptions.MaxConcurrentDeploys"/> uploads (HTTP 503 with Retry-After).</summary>
public sealed class DeployCapacityException(int limit, TimeSpan retryAfter)
    : Exception($"the platform is receiving {limit} deploys already (DeployOptions.MaxConcurrentDeploys); try again in {retryAfter.TotalSeconds:0} s")
{
    public TimeSpan RetryAfter { get; } = retryAfter;
}
