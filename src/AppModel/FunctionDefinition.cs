
namespace FaaST.AppModel;

/// <summary>One function of the app, as its function.json describes it.</summary>
public sealed record FunctionDefinition
{
    public required string Name { get; init; }
    public required string Directory { get; init; }
    public required string ScriptFile { get; init; }
    public string EntryPoint { get; init; } = "";
    public required IReadOnlyList<BindingMetadata> Bindings { get; init; }

    /// <summary>Disabled in function.json (or by the AzureWebJobs.NAME.Disabled setting).</summary>
    public bool Disabled { get; init; }

    /// <summary>What disabled it (function.json's "disabled" or the setting), when <see cref="Disabled"/>.</summary>
    public string? DisabledBy { get; init; }

    /// <summary>Why the function cannot run (bad function.json, missing script); null when it can.</summary>
    public string? Error { get; init; }

    /// <summary>The function that serves the same route with overlapping methods (loaded first), if any:
    /// this one is then in error and not served, as in Azure Functions.</summary>
    public string? ConflictsWith { get; init; }

    /// <summary>Where the function is defined, for messages: its function.json, or for a worker-indexed app
    /// "function_app.py (function 'NAME')" / "package.json (function 'NAME')"; null: the folder's function.json.</summary>
    public string? DefinedIn { get; init; }

    /// <summary><see cref="DefinedIn"/>, or the function.json in <see cref="Directory"/>.</summary>
    public string Source => DefinedIn ?? Path.Combine(Directory, "function.json");

    /// <summary>A stable id used on the worker channel.</summary>
    public string Id => Name;

    public BindingMetadata? Trigger => Bindings.FirstOrDefault(b => b.IsTrigger);
}
