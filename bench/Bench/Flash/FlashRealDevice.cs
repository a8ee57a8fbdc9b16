using System.Diagnostics;
using System.Globalization;
using System.Text.Json.Nodes;
using FaaST.FlashBackend.Calibration;

namespace FaaST.Bench.Flash;

/// <summary>
/// The real file device here (issue 22: <c>real_device_read_p95_us</c> beside fio): one file in /var/tmp (disk-backed;
/// /dev/shm is tmpfs) filled with random data through O_DIRECT, then 4 KiB random reads through the engine's DirectFile
/// at queue depth 1 and 32 (synchronous preads, one thread per outstanding request) and fio 3.33 reading the same file
/// the same way (<c>--direct=1 --rw=randread --bs=4k --ioengine=psync --numjobs=QD</c>), in turn, in the same run;
/// then the cost-model fit (<see cref="DeviceFit"/>) on it. The file is removed at the end.
/// </summary>
internal static class FlashRealDevice
{
    public static async Task<JsonObject> RunAsync(Report report, bool quick)
    {
        long size = quick ? 256L << 20 : 1L << 30;
        var seconds = TimeSpan.FromSeconds(quick ? 2 : 5);
        string file = Path.Combine("/var/tmp", $"faast-flash-bench-{Environment.ProcessId}.dat");
        var result = new JsonObject { ["file"] = file, ["size_bytes"] = size };
        try
        {
            DeviceFit.CreateFilled(file, size);
            foreach (int qd in new[] { 1, 32 })
            {
                var ours = DeviceFit.MeasureReads(file, size, qd, seconds);
                var fio = await FioAsync(file, size, qd, seconds);
                report.Add($"real_device_read_p95_us_qd{qd}", ours.ReadP95Us, $"DirectFile, {ours.Iops:0} IOPS");
                report.Add($"real_device_read_iops_qd{qd}", ours.Iops, "");
                report.Add($"fio_read_p95_us_qd{qd}", fio.P95Us, $"fio psync numjobs={qd}, {fio.Iops:0} IOPS");
                report.Add($"fio_read_iops_qd{qd}", fio.Iops, "");
                result[$"qd{qd}"] = new JsonObject
                {
                    ["ours_iops"] = Math.Round(ours.Iops), ["ours_p50_us"] = ours.ReadP50Us, ["ours_p95_us"] = ours.ReadP95Us,
                    ["fio_iops"] = Math.Round(fio.Iops), ["fio_p50_us"] = fio.P50Us, ["fio_p95_us"] = fio.P95Us,
                };
                if (qd == 1)
                    report.Add("real_device_read_p95_us", ours.ReadP95Us, "4 KiB O_DIRECT random reads, QD 1, through DirectFile");
            }
            var log = new StringWriter();
            var fit = await DeviceFit.RunAsync(new DeviceFitOptions
            {
                Path = file,
                SizeBytes = size,
                QueueDepths = [1, 8, 32],
                PointDuration = TimeSpan.FromSeconds(quick ? 0.5 : 2),
                DeleteCreatedFile = false,
            }, log);
            Console.Write(log.ToString());
            report.Add("fit_tokens_per_second", fit.TokensPerSecond, $"read peak at QD {fit.PeakQueueDepth}");
            foreach (var tier in fit.WriteCostTiers)
                report.Add($"fit_write_cost_r{tier.MinReadRatio * 100:0}", tier.WriteCost, $"C*(WR, r >= {tier.MinReadRatio:0.##})");
            result["fit"] = JsonNode.Parse(fit.ToJson());
        }
        finally
        {
            File.Delete(file);
        }
        return result;
    }

    private sealed record FioResult(double Iops, double P50Us, double P95Us);

    private static async Task<FioResult> FioAsync(string file, long size, int qd, TimeSpan duration)
    {
        var info = new ProcessStartInfo("fio") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var a in new[]
        {
            "--name=faast-randread", $"--filename={file}", $"--size={size}", "--direct=1", "--rw=randread", "--bs=4k",
            "--ioengine=psync", $"--numjobs={qd}", "--group_reporting", "--time_based",
            $"--runtime={duration.TotalSeconds.ToString(CultureInfo.InvariantCulture)}s", "--randrepeat=0",
            "--percentile_list=50:95", "--output-format=json",
        })
            info.ArgumentList.Add(a);
        using var fio = Process.Start(info) ?? throw new InvalidOperationException("fio did not start; install Debian's fio (./faast bench installs it)");
        var stdout = fio.StandardOutput.ReadToEndAsync();
        var stderr = fio.StandardError.ReadToEndAsync();
        await fio.WaitForExitAsync();
        if (fio.ExitCode != 0)
            throw new InvalidOperationException($"fio on {file} at numjobs={qd} exited {fio.ExitCode}: {(await stderr).Trim()}");
        var text = await stdout;
        var json = JsonNode.Parse(text[text.IndexOf('{')..])!;
        var read = json["jobs"]![0]!["read"]!;
        var pct = read["clat_ns"]!["percentile"]!;
        return new FioResult(read["iops"]!.GetValue<double>(),
            pct["50.000000"]!.GetValue<double>() / 1000, pct["95.000000"]!.GetValue<double>() / 1000);
    }
}
