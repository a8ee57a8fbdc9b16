using System.Globalization;
using System.Net;

namespace FaaST.FlashBackend.Server;

/// <summary>The scheduler a server runs: En4S (the default), or one of the baselines behind the same interface.</summary>
public enum SchedulerKind
{
    En4s,
    Reflex,
    Fcfs,
}

/// <summary>
/// Everything `FaaST.FlashBackend serve` takes, with the defaults documented beside each; <see cref="Validate"/>
/// names the option and what is wrong. <see cref="Parse"/> turns a command line into one (the process answers a
/// <see cref="OptionException"/> with its message and exit code 2).
/// </summary>
public sealed record ServeOptions
{
    /// <summary>The file (created and preallocated) or block device the log lives on (--device). Required.</summary>
    public required string Device { get; init; }

    /// <summary>Bytes of the log (--capacity; sizes like 4GiB). Required; a whole number of segments.</summary>
    public required long Capacity { get; init; }

    /// <summary>The state folder (--state): keys/admin, keys/tenant and tenants.json. Made 0700. Required.</summary>
    public required string StateDirectory { get; init; }

    /// <summary>Where gRPC listens (--listen): 127.0.0.1:0 by default, a free loopback port the ready file names.</summary>
    public IPEndPoint Listen { get; init; } = new(IPAddress.Loopback, 0);

    /// <summary>--allow-remote: listen beyond loopback. The admin key and tenant tokens travel in clear headers over
    /// h2c, so a remote listener needs TLS in front (a proxy terminating TLS); off by default.</summary>
    public bool AllowRemote { get; init; }

    /// <summary>--reuse-port: bind the listener with SO_REUSEPORT, so that a supervisor which holds the port (a socket of
    /// the same user bound to it with SO_REUSEPORT and never listening) keeps it reserved while this server is down: no
    /// other process can bind it, and no outgoing connection is given it as its local port. The platform does this
    /// (FlashServerChild) because a restarted server must come back on the address its instances were given; without
    /// it a CI run saw the restart fail with "address already in use" when the dead server's port was taken meanwhile.
    /// Off by default: only a server with such a supervisor needs it. Linux.</summary>
    public bool ReusePort { get; init; }

    /// <summary>--ready-file: written (atomically, 0600) once serving, with the address as its one line.</summary>
    public string? ReadyFile { get; init; }

    public SchedulerKind Scheduler { get; init; } = SchedulerKind.En4s;

    /// <summary>--ephemeral: start the engine empty instead of recovering the log (the default is Recover, so a
    /// restarted server keeps serving what it held; docs/flash.md).</summary>
    public bool Ephemeral { get; init; }

    /// <summary>--io io_uring|pread: how GetMany's small reads reach the device. io_uring by default (one thread
    /// submits and reaps them in batches; docs/flash.md, "The server's read path", measured it against pread); a
    /// kernel or sandbox that refuses io_uring falls back to pread with a log line saying why. Whole-value gets and
    /// puts stream with pread/pwrite either way.</summary>
    public bool UseIoUring { get; init; } = true;

    /// <summary>
    /// The device's 4 KiB read tokens per second (--device-tokens), the rate the scheduler divides among tenants
    /// (En4S §4.2). 50,000 for a file device here: docs/flash.md measured 57,100 4 KiB O_DIRECT reads/s at QD 32 (fio
    /// psync, 32 jobs) and 55,120 with .NET RandomAccess on this VM's disk, run alone; 50K sits ~10 % under that, below
    /// the knee where queueing inflates the tail (§2.3, Fig. 1a), and still above what the server drives at QD 32 (so
    /// a lone tenant is never held below the device by its own share). An NVMe device gives its own figure (the bench
    /// engineer's sweep tool fits it).
    /// </summary>
    public double DeviceTokensPerSecond { get; init; } = 50_000;

    /// <summary>
    /// --device-profile FILE: the device as `fit` measured it (Calibration/DeviceFit: its token rate, its rate by p95
    /// bound, which LC admission reads, and its write costs C*(WR, r)), instead of the i3.xlarge shape scaled to
    /// --device-tokens. Exclusive with --device-tokens. Null: that scaled shape.
    /// </summary>
    public string? DeviceProfilePath { get; init; }

    /// <summary>Segments of the log: 64 MiB (FlashStoreOptions' reasoning), or smaller for a small capacity so the
    /// log holds at least 4 segments (tests run on a few MiB).</summary>
    public int SegmentSize => (int)Math.Min(64L << 20, Math.Max(64 << 10, Capacity / 4 / 4096 * 4096));

    /// <summary>Flows without a request for this long are closed by the server (proto: CloseFlow). 10 minutes: longer
    /// than the platform keeps an idle instance alive, so a live instance's flow is never closed under it, while a
    /// crashed instance's flow does not hold a scheduler slot for long.</summary>
    public TimeSpan FlowIdleTimeout { get; init; } = TimeSpan.FromMinutes(10);

    /// <summary>The window TenantStats' rates and p95 cover (the proto: 10 s by default).</summary>
    public TimeSpan StatsWindow { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>A put stream that sends nothing for this long is cancelled and leaves nothing stored: its log space
    /// is reserved while it streams and a reclaim of that segment waits for it. 30 s: far above a busy client's gap.</summary>
    public TimeSpan PutIdleTimeout { get; init; } = TimeSpan.FromSeconds(30);

    public void Validate()
    {
        if (string.IsNullOrWhiteSpace(Device))
            throw new OptionException("--device: a file or block device path is required");
        if (string.IsNullOrWhiteSpace(StateDirectory))
            throw new OptionException("--state: a folder is required");
        if (Capacity < 2 * SegmentSize || Capacity % SegmentSize != 0)
            throw new OptionException($"--capacity: {Capacity} bytes must be a multiple of the {SegmentSize}-byte segment and hold at least two (e.g. 256MiB, 4GiB)");
        if (ReusePort && Listen.Port == 0)
            throw new OptionException("--reuse-port: needs --listen with a port (the port a supervisor holds), not port 0");
        if (!AllowRemote && !IPAddress.IsLoopback(Listen.Address))
            throw new OptionException($"--listen: {Listen} is not a loopback address; tokens travel in clear headers, so listening beyond loopback needs --allow-remote and TLS in front");
        if (!(DeviceTokensPerSecond >= 1000) || double.IsInfinity(DeviceTokensPerSecond))
            throw new OptionException($"--device-tokens: {DeviceTokensPerSecond} must be a finite number of 4 KiB reads per second, at least 1000");
        if (FlowIdleTimeout <= TimeSpan.Zero || StatsWindow < TimeSpan.FromSeconds(1) || PutIdleTimeout <= TimeSpan.Zero)
            throw new OptionException("flow idle timeout and put idle timeout must be positive and the stats window at least 1 s");
    }

    /// <summary>Parses the options after `serve`; throws <see cref="OptionException"/> naming the option.</summary>
    public static ServeOptions Parse(IReadOnlyList<string> args)
    {
        string? device = null, state = null, ready = null, profile = null;
        bool tokensGiven = false;
        long? capacity = null;
        IPEndPoint listen = new(IPAddress.Loopback, 0);
        bool allowRemote = false, ephemeral = false, ioUring = true, reusePort = false;
        var scheduler = SchedulerKind.En4s;
        double tokens = 50_000;
        for (int i = 0; i < args.Count; i++)
        {
            string a = args[i];
            string Value() => i + 1 < args.Count ? args[++i] : throw new OptionException($"{a}: a value is required");
            switch (a)
            {
                case "--device": device = Value(); break;
                case "--state": state = Value(); break;
                case "--ready-file": ready = Value(); break;
                case "--capacity": capacity = ParseSize(a, Value()); break;
                case "--listen": listen = ParseEndPoint(a, Value()); break;
                case "--allow-remote": allowRemote = true; break;
                case "--reuse-port": reusePort = true; break;
                case "--ephemeral": ephemeral = true; break;
                case "--io":
                    string io = Value();
                    ioUring = io switch
                    {
                        "io_uring" => true,
                        "pread" => false,
                        _ => throw new OptionException($"--io: '{io}' is not one of io_uring, pread"),
                    };
                    break;
                case "--scheduler":
                    string s = Value();
                    scheduler = s switch
                    {
                        "en4s" => SchedulerKind.En4s,
                        "reflex" => SchedulerKind.Reflex,
                        "fcfs" => SchedulerKind.Fcfs,
                        _ => throw new OptionException($"--scheduler: '{s}' is not one of en4s, reflex, fcfs"),
                    };
                    break;
                case "--device-profile": profile = Value(); break;
                case "--device-tokens":
                    tokensGiven = true;
                    string t = Value();
                    if (!double.TryParse(t, NumberStyles.Float, CultureInfo.InvariantCulture, out tokens))
                        throw new OptionException($"--device-tokens: '{t}' is not a number");
                    break;
                default: throw new OptionException($"{a}: unknown option (see ./faast flash --help)");
            }
        }
        if (profile is not null && tokensGiven)
            throw new OptionException("--device-profile: the profile gives the device's token rate; drop --device-tokens");
        var options = new ServeOptions
        {
            Device = device ?? throw new OptionException("--device: required (a file, created and preallocated, or a block device)"),
            Capacity = capacity ?? throw new OptionException("--capacity: required (bytes; 256MiB, 4GiB, ...)"),
            StateDirectory = state ?? throw new OptionException("--state: required (a folder for the keys and tenants.json)"),
            ReadyFile = ready,
            Listen = listen,
            AllowRemote = allowRemote,
            ReusePort = reusePort,
            Ephemeral = ephemeral,
            UseIoUring = ioUring,
            Scheduler = scheduler,
            DeviceTokensPerSecond = tokens,
            DeviceProfilePath = profile,
        };
        options.Validate();
        return options;
    }

    /// <summary>Bytes, or a number with KiB, MiB, GiB, TiB (or K, M, G, T: also binary).</summary>
    public static long ParseSize(string option, string text)
    {
        string s = text.Trim();
        long unit = 1;
        foreach ((string suffix, long mult) in (ReadOnlySpan<(string, long)>)[("KiB", 1L << 10), ("MiB", 1L << 20), ("GiB", 1L << 30), ("TiB", 1L << 40), ("K", 1L << 10), ("M", 1L << 20), ("G", 1L << 30), ("T", 1L << 40)])
        {
            if (s.EndsWith(suffix, StringComparison.OrdinalIgnoreCase))
            {
                unit = mult;
                s = s[..^suffix.Length];
                break;
            }
        }
        if (!long.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out long n) || n <= 0 || n > long.MaxValue / unit)
            throw new OptionException($"{option}: '{text}' is not a positive size (bytes, or with KiB, MiB, GiB, TiB)");
        return n * unit;
    }

    private static IPEndPoint ParseEndPoint(string option, string text)
    {
        if (!IPEndPoint.TryParse(text, out IPEndPoint? ep) || ep.Port < 0 || ep.Port > 65535 || !text.Contains(':'))
            throw new OptionException($"--listen: '{text}' is not an address and port such as 127.0.0.1:0 (names are not resolved)");
        return ep;
    }
}

/// <summary>A bad command-line option: the message names it and what is wrong (the process exits 2).</summary>
public sealed class OptionException(string message) : Exception(message);
