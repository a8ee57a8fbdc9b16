namespace FaaST.ScaleController;

/// <summary>The platform process: <c>faast-platform start APPDIR ...</c>, <c>platform</c>, <c>deploy</c>, <c>status</c>.</summary>
public static class Program
{
    public const string Usage = "usage: faast start APPDIR [options] | faast platform [options] | faast deploy APPDIR [--name NAME] [--platform URL] | faast status [--platform URL]";

    public static async Task<int> Main(string[] args)
    {
        await Console.Error.WriteLineAsync($"faast: no command \"{string.Join(' ', args)}\" yet");
        await Console.Error.WriteLineAsync(Usage);
        return 2;
    }
}
