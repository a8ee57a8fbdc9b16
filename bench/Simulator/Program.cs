namespace FaaST.Simulator;

/// <summary>./faast simulate: see <see cref="SimulateCommand"/>.</summary>
public static class Program
{
    public static Task<int> Main(string[] args) => SimulateCommand.RunAsync(args);
}
