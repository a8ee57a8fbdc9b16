using FaaST.Bench.Fuzz;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The in-process config fuzzers of <c>./faast bench fuzz</c> (bench/Bench/Fuzz), a few hundred
/// inputs per file with a fixed seed: a parser change that crashes on one of them, or accepts a
/// value the host then cannot use, fails here with the minimized input.
/// </summary>
public sealed class ConfigFuzzTests
{
    private const int Seed = 20261125;
    private const int Inputs = 300;

    [Theory]
    [InlineData("faast.json")]
    [InlineData("function.json")]
    [InlineData("host.json")]
    [InlineData("local.settings.json")]
    public void Every_mutated_file_loads_or_is_rejected_with_an_error_naming_it(string target)
    {
        using var fuzzer = new ConfigFuzzer();
        var result = FuzzRun.Config(fuzzer, target, Seed, Inputs, TimeSpan.MaxValue);
        Assert.True(result.Crashes == 0, $"{result.Crashes} of {result.Inputs} inputs crashed {target}'s loader (seed {Seed}):\n" +
            string.Join("\n", result.Findings.Select(f => $"x{f.Count} {f.Signature}\n  input {f.Index}: {f.Input}\n  {f.Detail.Split('\n')[0]}")));
        Assert.Equal(Inputs, result.Inputs);
        // The generator reaches both sides of the parser, else the test would prove nothing.
        Assert.True(result.Accepted > 0, "no input was accepted");
        Assert.True(result.Rejected > 0, "no input was rejected");
    }

    [Fact]
    public void An_input_depends_only_on_the_seed_the_file_and_its_index()
    {
        foreach (var target in ConfigFuzzer.Targets)
        {
            Assert.Equal(ConfigFuzzer.Input(target, 5, 17), ConfigFuzzer.Input(target, 5, 17));
            Assert.NotEqual(ConfigFuzzer.Input(target, 5, 17), ConfigFuzzer.Input(target, 6, 17));
        }
    }

    [Fact]
    public void A_value_the_host_cannot_use_counts_as_a_crash_even_when_the_loader_accepts_it()
    {
        // The oracle itself: a route with a constraint the host's routing lacks is caught.
        Assert.NotNull(ConfigFuzzer.RouteProblem("/api/{id:nosuchconstraint}"));
        Assert.NotNull(ConfigFuzzer.RouteProblem("/api/a/{*rest}/b"));
        Assert.Null(ConfigFuzzer.RouteProblem("/api/items/{id:int}/{name?}"));
    }
}
