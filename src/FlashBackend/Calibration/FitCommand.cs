using FaaST.FlashBackend.Server;

namespace FaaST.FlashBackend.Calibration;

/// <summary>
/// `FaaST.FlashBackend fit` (`./faast flash fit`): sweeps a device and writes the profile `serve --device-profile`
/// loads. A block device is overwritten by the sweep, so it needs --allow-block-device-writes; an existing regular file
/// is refused outright (it may be a server's log: the sweep would fill it with random bytes), so the sweep always runs
/// on a file it creates on the file system to be measured, and deletes it afterwards.
/// </summary>
public static class FitCommand
{
    public const string Usage = "usage: FaaST.FlashBackend fit --device PATH --out FILE [--size SIZE] [--seconds-per-point S] [--allow-block-device-writes]";

    /// <summary>Parses the options after `fit`; throws <see cref="OptionException"/> naming the option.</summary>
    public static DeviceFitOptions Parse(IReadOnlyList<string> args)
    {
        string? device = null, output = null;
        long size = 1L << 30;
        double seconds = 2;
        bool allowBlock = false;
        for (int i = 0; i < args.Count; i++)
        {
            string a = args[i];
            string Value() => i + 1 < args.Count ? args[++i] : throw new OptionException($"{a}: a value is required");
            switch (a)
            {
                case "--device": device = Value(); break;
                case "--out": output = Value(); break;
                case "--size": size = ServeOptions.ParseSize(a, Value()); break;
                case "--seconds-per-point":
                    string s = Value();
                    if (!double.TryParse(s, System.Globalization.NumberStyles.Float, System.Globalization.CultureInfo.InvariantCulture, out seconds)
                        || !(seconds > 0 && seconds <= 600))
                        throw new OptionException($"--seconds-per-point: '{s}' is not a number of seconds in (0, 600]");
                    break;
                case "--allow-block-device-writes": allowBlock = true; break;
                default: throw new OptionException($"{a}: unknown option ({Usage})");
            }
        }
        if (device is null)
            throw new OptionException("--device: required (a file to create on the device to measure, or a block device)");
        if (output is null)
            throw new OptionException("--out: required (the profile JSON that serve --device-profile loads)");
        bool block = device.StartsWith("/dev/", StringComparison.Ordinal)
            || File.Exists(device) && (File.GetAttributes(device) & FileAttributes.Device) != 0;
        if (!block && (File.Exists(device) || Directory.Exists(device)))
            throw new OptionException($"--device: {device} exists; the sweep fills its file with random bytes, so it only creates its own (name a new file on the file system to measure)");
        if (block && !allowBlock)
            throw new OptionException($"--device: {device} is a block device and the sweep writes random blocks over its data; pass --allow-block-device-writes to agree");
        var options = new DeviceFitOptions
        {
            Path = device,
            SizeBytes = size,
            PointDuration = TimeSpan.FromSeconds(seconds),
            AllowWritesToBlockDevice = allowBlock,
            OutputPath = output,
        };
        try
        {
            options.Validate();
        }
        catch (ArgumentException e)
        {
            throw new OptionException(e.Message);
        }
        return options;
    }
}
