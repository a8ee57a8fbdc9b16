using System.Globalization;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace FaaST.Bench;

/// <summary>Collects a scenario's metrics, prints them as a table and writes bench/results/SCENARIO.json.</summary>
public sealed class Report(string scenario, bool quick)
{
    private readonly JsonObject _metrics = [];
    private readonly List<(string Name, string Value, string Note)> _rows = [];
    private readonly JsonObject _config = [];

    public void Add(string name, double value, string note = "")
    {
        var rounded = Math.Round(value, value >= 100 ? 0 : 3);
        _metrics[name] = rounded;
        _rows.Add((name, rounded.ToString(CultureInfo.InvariantCulture), note));
    }

    public void Config(string name, JsonNode? value) => _config[name] = value;

    /// <summary>A metric added before (to derive another from it).</summary>
    public double Metric(string name) => _metrics[name]?.GetValue<double>() ?? throw new KeyNotFoundException($"no metric {name} yet");

    /// <summary>Adds <paramref name="other"/>'s rows after this one's (a part of a scenario measured on its own).</summary>
    public void Append(Report other)
    {
        foreach (var row in other._rows)
        {
            _rows.Add(row);
            _metrics[row.Name] = other._metrics[row.Name]?.DeepClone();
        }
    }

    public string Write(string home)
    {
        var width = _rows.Max(r => r.Name.Length);
        Console.WriteLine();
        Console.WriteLine($"{"metric".PadRight(width)}  {"value",10}  note");
        Console.WriteLine($"{new string('-', width)}  {new string('-', 10)}  ----");
        foreach (var (name, value, note) in _rows)
            Console.WriteLine($"{name.PadRight(width)}  {value,10}  {note}");
        var doc = new JsonObject
        {
            ["scenario"] = scenario,
            ["quick"] = quick,
            ["date"] = DateTime.UtcNow.ToString("yyyy-MM-ddTHH:mm:ssZ", CultureInfo.InvariantCulture),
            ["machine"] = MachineDescription.Describe(),
            ["config"] = _config,
            ["metrics"] = _metrics,
        };
        var dir = Path.Combine(home, "bench", "results");
        Directory.CreateDirectory(dir);
        // A quick run never replaces a full run's figures: it goes to SCENARIO.quick.json.
        var file = Path.Combine(dir, scenario + (quick ? ".quick.json" : ".json"));
        File.WriteAllText(file, doc.ToJsonString(new JsonSerializerOptions { WriteIndented = true }) + "\n");
        Console.WriteLine($"\nwrote {Path.GetRelativePath(home, file)}");
        return file;
    }
}
