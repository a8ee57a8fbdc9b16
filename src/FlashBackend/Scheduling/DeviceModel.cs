namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// A simulated NVMe device on virtual time (issue 22 item 3), so scheduler experiments repeat exactly on a 2-core
/// machine: no wall clock, no threads; the caller advances time by passing a non-decreasing "now".
/// <para>Model: the device drains tokens at <see cref="DeviceProfile.TokensPerSecond"/> in submission order (a token
/// pipe: a request's token work starts when the previous one's ends, so a backlog shows up as queueing delay); on top
/// of that each request pays a service time drawn from a log-normal around the unloaded read/write time, stretched by
/// 1 + A·ρ/(1 − ρ) with ρ the utilization of the previous window (the bend near saturation), and, with a probability
/// proportional to the previous window's write share, a garbage-collection stall (the tail rising with writes).</para>
/// <para>Single-threaded by design: one device model per device queue, driven by the one thread that runs that queue's
/// scheduler. No locks, no per-request allocation (the completion heap is preallocated at the queue depth).</para>
/// </summary>
public sealed class DeviceModel
{
    private readonly DeviceProfile _profile;
    private readonly double _nsPerToken;
    private SeededRng _rng;

    // Completion min-heap ordered by (completion time, submission sequence): ties complete in submission order.
    private readonly long[] _heapKey;
    private readonly long[] _heapSeq;
    private readonly long[] _heapSubmit;
    private readonly IoRequest[] _heapReq;
    private int _count;
    private long _seq;

    private double _pipeFreeAtNs;
    private long _lastNowNs = long.MinValue;

    private long _windowStartNs;
    private double _windowTokens;
    private int _windowRequests;
    private int _windowWrites;
    private double _utilization;
    private double _writeShare;

    public DeviceModel(DeviceProfile profile, ulong seed)
    {
        ArgumentNullException.ThrowIfNull(profile);
        profile.Validate();
        _profile = profile;
        _nsPerToken = 1e9 / profile.TokensPerSecond;
        _rng = new SeededRng(seed);
        _heapKey = new long[profile.QueueDepth];
        _heapSeq = new long[profile.QueueDepth];
        _heapSubmit = new long[profile.QueueDepth];
        _heapReq = new IoRequest[profile.QueueDepth];
    }

    public DeviceProfile Profile => _profile;

    /// <summary>Requests submitted and not yet completed.</summary>
    public int InFlight => _count;

    /// <summary>The previous window's utilization estimate (tokens submitted / tokens the device drains), for tests and
    /// metrics.</summary>
    public double Utilization => _utilization;

    /// <summary>Virtual time of the earliest pending completion, or <see cref="long.MaxValue"/> when idle.</summary>
    public long NextCompletionNs => _count == 0 ? long.MaxValue : _heapKey[0];

    /// <summary>Submit <paramref name="request"/> (its <see cref="IoRequest.Cost"/> already set) at virtual time
    /// <paramref name="nowNs"/>. Returns false, changing nothing, when the submission queue is full.</summary>
    public bool TrySubmit(in IoRequest request, long nowNs)
    {
        AdvanceTo(nowNs);
        if (_count >= _heapKey.Length)
            return false;
        if (!(request.Cost > 0))
            throw new ArgumentException($"device model: request {request.Id} of tenant {request.Tenant} has cost {request.Cost}; the scheduler sets a positive cost before submitting", nameof(request));

        _windowTokens += request.Cost;
        _windowRequests++;
        if (request.Type == IoType.Write)
            _windowWrites++;

        double start = Math.Max(nowNs, _pipeFreeAtNs);
        double work = request.Cost * _nsPerToken;
        _pipeFreeAtNs = start + work;

        double rho = Math.Min(_utilization, 0.98); // beyond it the pipe's own backlog carries the overload
        double stretch = 1.0 + _profile.ContentionFactor * rho / (1.0 - rho);
        double baseNs = request.Type == IoType.Read ? _profile.ReadServiceNs : _profile.WriteServiceNs;
        double service = baseNs * Math.Exp(_profile.ServiceSigma * _rng.NextGaussian()) * stretch;
        double stallDraw = _rng.NextDouble();
        double stall = stallDraw < _writeShare * _profile.GcStallProbabilityAtAllWrites
            ? _rng.NextExponential(_profile.GcStallMeanNs)
            : 0;
        long complete = (long)Math.Ceiling(start + work + service + stall);
        Push(complete, nowNs, request);
        return true;
    }

    /// <summary>Pops the earliest completion at or before <paramref name="untilNs"/>, if any.</summary>
    public bool TryComplete(long untilNs, out DeviceCompletion completion)
    {
        if (_count == 0 || _heapKey[0] > untilNs)
        {
            completion = default;
            return false;
        }
        completion = new DeviceCompletion(_heapReq[0], _heapSubmit[0], _heapKey[0]);
        PopRoot();
        return true;
    }

    private void AdvanceTo(long nowNs)
    {
        if (nowNs < _lastNowNs)
            throw new ArgumentOutOfRangeException(nameof(nowNs), nowNs, $"device model: virtual time went backwards ({nowNs} ns after {_lastNowNs} ns)");
        if (_lastNowNs == long.MinValue)
            _windowStartNs = nowNs;
        _lastNowNs = nowNs;
        long w = _profile.UtilizationWindowNs;
        long elapsed = nowNs - _windowStartNs;
        if (elapsed < w)
            return;
        long windows = elapsed / w; // idle windows count as zero load
        _utilization = _windowTokens * _nsPerToken / (windows * (double)w);
        _writeShare = _windowRequests == 0 ? 0 : _windowWrites / (double)_windowRequests;
        _windowStartNs += windows * w;
        _windowTokens = 0;
        _windowRequests = 0;
        _windowWrites = 0;
    }

    private bool Less(int a, int b) =>
        _heapKey[a] < _heapKey[b] || (_heapKey[a] == _heapKey[b] && _heapSeq[a] < _heapSeq[b]);

    private void Swap(int a, int b)
    {
        (_heapKey[a], _heapKey[b]) = (_heapKey[b], _heapKey[a]);
        (_heapSeq[a], _heapSeq[b]) = (_heapSeq[b], _heapSeq[a]);
        (_heapSubmit[a], _heapSubmit[b]) = (_heapSubmit[b], _heapSubmit[a]);
        (_heapReq[a], _heapReq[b]) = (_heapReq[b], _heapReq[a]);
    }

    private void Push(long key, long submitNs, in IoRequest request)
    {
        int i = _count++;
        _heapKey[i] = key;
        _heapSeq[i] = _seq++;
        _heapSubmit[i] = submitNs;
        _heapReq[i] = request;
        while (i > 0)
        {
            int parent = (i - 1) >> 1;
            if (!Less(i, parent))
                break;
            Swap(i, parent);
            i = parent;
        }
    }

    private void PopRoot()
    {
        _count--;
        if (_count == 0)
            return;
        Swap(0, _count);
        int i = 0;
        while (true)
        {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < _count && Less(l, m)) m = l;
            if (r < _count && Less(r, m)) m = r;
            if (m == i)
                break;
            Swap(i, m);
            i = m;
        }
    }
}
