namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform-wide budget (issue 19, defect 6): at most <see cref="PlatformOptions.MaxInstances"/> instances of all
/// apps together and <see cref="PlatformOptions.MaxWorkers"/> language workers (each instance counts its worker
/// processes). An instance holds its share from the moment it is asked for until it is gone; one app's maximum
/// (faast.json's scale.maxInstances) is no promise of room on the platform.
/// </summary>
internal sealed class PlatformBudget(int maxInstances, int maxWorkers)
{
    private readonly Lock _gate = new();
    private int _instances;
    private int _workers;

    public int MaxInstances { get; } = maxInstances >= 1 ? maxInstances
        : throw new ArgumentOutOfRangeException(nameof(maxInstances), maxInstances, "PlatformOptions.MaxInstances must be at least 1");

    public int MaxWorkers { get; } = maxWorkers >= 1 ? maxWorkers
        : throw new ArgumentOutOfRangeException(nameof(maxWorkers), maxWorkers, "PlatformOptions.MaxWorkers must be at least 1");

    /// <summary>Instances held now (starting, ready or draining, of every app).</summary>
    public int Instances
    {
        get
        {
            lock (_gate)
                return _instances;
        }
    }

    /// <summary>Workers held now.</summary>
    public int Workers
    {
        get
        {
            lock (_gate)
                return _workers;
        }
    }

    /// <summary>Takes room for one instance of <paramref name="workers"/> workers; false with the reason when there is none.</summary>
    public bool TryTake(int workers, out string? reason)
    {
        lock (_gate)
        {
            if (_instances + 1 > MaxInstances)
            {
                reason = $"the platform runs {_instances} of its {MaxInstances} instances (PlatformOptions.MaxInstances, ./faast platform --max-instances)";
                return false;
            }
            if (_workers + workers > MaxWorkers)
            {
                reason = $"the platform runs {_workers} of its {MaxWorkers} workers and an instance of this app needs {workers} " +
                    "(PlatformOptions.MaxWorkers, ./faast platform --max-workers)";
                return false;
            }
            _instances++;
            _workers += workers;
            reason = null;
            return true;
        }
    }

    /// <summary>Counts an instance that runs already (taken over from a previous platform process), even beyond the budget.</summary>
    public void Hold(int workers)
    {
        lock (_gate)
        {
            _instances++;
            _workers += workers;
        }
    }

    public void Give(int workers)
    {
        lock (_gate)
        {
            _instances--;
            _workers -= workers;
        }
    }
}

/// <summary>The platform's budget has no room for even one instance an app needs (a deploy is refused with 503).</summary>
public sealed class PlatformBudgetException(string message) : Exception(message);
