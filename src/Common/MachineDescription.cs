using System.Text.Json.Nodes;

namespace FaaST.Common;

/// <summary>The machine a benchmark or simulation ran on, as every bench/results/*.json records it.</summary>
public static class MachineDescription
{
    /// <summary>CPU model, cores, memory, OS and .NET version (from /proc where there is one).</summary>
    public static JsonObject Describe()
    {
        static string? Read(string file, string key) =>
            File.Exists(file) ? File.ReadLines(file).FirstOrDefault(l => l.StartsWith(key, StringComparison.Ordinal))?.Split(':', 2)[1].Trim() : null;
        return new JsonObject
        {
            ["cpu"] = Read("/proc/cpuinfo", "model name"),
            ["cores"] = Environment.ProcessorCount,
            ["memory"] = Read("/proc/meminfo", "MemTotal"),
            ["os"] = System.Runtime.InteropServices.RuntimeInformation.OSDescription,
            ["dotnet"] = Environment.Version.ToString(),
        };
    }
}
