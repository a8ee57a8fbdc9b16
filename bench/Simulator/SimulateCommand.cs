namespace FaaST.Simulator;

/// <summary>./faast simulate [options]: replays a trace through Faa$T's policies (being built on this branch).</summary>
public static class SimulateCommand
{
    public static Task<int> RunAsync(string[] args)
    {
        Console.Error.WriteLine("faast simulate: the simulation is being built on this branch");
        return Task.FromResult(2);
    }
}
