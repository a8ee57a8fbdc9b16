namespace FaaST.Scaling;

/// <summary>
/// The three numbers bandwidth scaling plans with (Faa$T §4): T_Load, the time to add an instance;
/// BW_BS, one instance's bandwidth to blob storage; BW_Inst, the bandwidth between two instances.
/// Each starts at a documented default (<see cref="ProfiledBandwidthDefaults"/>) and is then an
/// exponentially weighted average of what this instance observed (§4: "profiled periodically").
/// </summary>
/// <remarks>
/// Updated once per observed transfer of a large object and read once per planned fetch: a small lock,
/// never on a per-request path.
/// </remarks>
public sealed class ProfiledBandwidth
{
    private readonly Lock _lock = new();
    private readonly double _weight;
    private double _loadSeconds;
    private double _storageBytesPerSecond;
    private double _instanceBytesPerSecond;

    /// <param name="defaults">The values used until measured; null: <see cref="ProfiledBandwidthDefaults"/>.</param>
    /// <param name="weight">The weight of a new observation in the average, in (0, 1].</param>
    public ProfiledBandwidth(ProfiledBandwidthDefaults? defaults = null, double weight = ProfiledBandwidthDefaults.ObservationWeight)
    {
        defaults ??= new ProfiledBandwidthDefaults();
        if (!(weight > 0 && weight <= 1))
            throw new ArgumentOutOfRangeException(nameof(weight), weight, "the weight of an observation must be in (0, 1]");
        Check(defaults.LoadSeconds, nameof(defaults.LoadSeconds), allowZero: true);
        Check(defaults.StorageBytesPerSecond, nameof(defaults.StorageBytesPerSecond), allowZero: false);
        Check(defaults.InstanceBytesPerSecond, nameof(defaults.InstanceBytesPerSecond), allowZero: false);
        _weight = weight;
        _loadSeconds = defaults.LoadSeconds;
        _storageBytesPerSecond = defaults.StorageBytesPerSecond;
        _instanceBytesPerSecond = defaults.InstanceBytesPerSecond;
    }

    /// <summary>T_Load, seconds.</summary>
    public double LoadSeconds
    {
        get
        {
            lock (_lock)
                return _loadSeconds;
        }
    }

    /// <summary>BW_BS, bytes per second.</summary>
    public double StorageBytesPerSecond
    {
        get
        {
            lock (_lock)
                return _storageBytesPerSecond;
        }
    }

    /// <summary>BW_Inst, bytes per second.</summary>
    public double InstanceBytesPerSecond
    {
        get
        {
            lock (_lock)
                return _instanceBytesPerSecond;
        }
    }

    /// <summary>How many observations of each kind were taken (0: still the default).</summary>
    public (long Load, long Storage, long Instance) Observations
    {
        get
        {
            lock (_lock)
                return (_loadObservations, _storageObservations, _instanceObservations);
        }
    }

    private long _loadObservations;
    private long _storageObservations;
    private long _instanceObservations;

    /// <summary>The three values at one moment (what a plan uses).</summary>
    public BandwidthSnapshot Snapshot()
    {
        lock (_lock)
            return new BandwidthSnapshot(_loadSeconds, _storageBytesPerSecond, _instanceBytesPerSecond);
    }

    /// <summary>An instance was added and became usable after <paramref name="elapsed"/>.</summary>
    public void ObserveLoad(TimeSpan elapsed)
    {
        if (elapsed <= TimeSpan.Zero)
            return;
        lock (_lock)
        {
            _loadSeconds = _loadObservations++ == 0 ? elapsed.TotalSeconds : Blend(_loadSeconds, elapsed.TotalSeconds);
        }
    }

    /// <summary><paramref name="bytes"/> came from storage to this instance in <paramref name="elapsed"/>.</summary>
    public void ObserveStorageTransfer(long bytes, TimeSpan elapsed)
    {
        if (bytes <= 0 || elapsed <= TimeSpan.Zero)
            return;
        var rate = bytes / elapsed.TotalSeconds;
        lock (_lock)
        {
            _storageBytesPerSecond = _storageObservations++ == 0 ? rate : Blend(_storageBytesPerSecond, rate);
        }
    }

    /// <summary><paramref name="bytes"/> came from another instance's memory in <paramref name="elapsed"/>.</summary>
    public void ObserveInstanceTransfer(long bytes, TimeSpan elapsed)
    {
        if (bytes <= 0 || elapsed <= TimeSpan.Zero)
            return;
        var rate = bytes / elapsed.TotalSeconds;
        lock (_lock)
        {
            _instanceBytesPerSecond = _instanceObservations++ == 0 ? rate : Blend(_instanceBytesPerSecond, rate);
        }
    }

    // The first measurement replaces the default outright: the default describes the paper's VMs, not
    // this machine, and averaging it in would bias the profile for many transfers.
    private double Blend(double average, double observed) => average + _weight * (observed - average);

    private static void Check(double value, string name, bool allowZero)
    {
        if (double.IsNaN(value) || double.IsInfinity(value) || value < 0 || (!allowZero && value == 0))
            throw new ArgumentOutOfRangeException(name, value, $"the bandwidth profile's {name} must be a finite number {(allowZero ? ">= 0" : "> 0")}");
    }
}

/// <summary>The profile's values at one moment: T_Load (s), BW_BS and BW_Inst (bytes/s).</summary>
public readonly record struct BandwidthSnapshot(double LoadSeconds, double StorageBytesPerSecond, double InstanceBytesPerSecond);

/// <summary>
/// What the profile assumes before it has measured anything. The bandwidths are the paper's VMs
/// (Faa$T §6.5: about 90 MB/s from one instance to blob storage, 750 MB/s between instances); T_Load
/// is the time a local FaaST.Runtime host takes from its start to its first ready answer on this
/// kind of machine (about 2 s). Each is replaced by the first measurement of it.
/// </summary>
public sealed record ProfiledBandwidthDefaults
{
    /// <summary>The weight of a new observation in the averages.</summary>
    public const double ObservationWeight = 0.3;

    /// <summary>T_Load before measured, seconds (default 2).</summary>
    public double LoadSeconds { get; init; } = 2.0;

    /// <summary>BW_BS before measured, bytes per second (default 90 MB/s).</summary>
    public double StorageBytesPerSecond { get; init; } = 90e6;

    /// <summary>BW_Inst before measured, bytes per second (default 750 MB/s).</summary>
    public double InstanceBytesPerSecond { get; init; } = 750e6;
}
