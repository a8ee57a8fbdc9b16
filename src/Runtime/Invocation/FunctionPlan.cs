namespace FaaST.Runtime.Invocation;

/// <summary>What an invocation of one function has to do, worked out once at start-up.</summary>
internal sealed class FunctionPlan
{
    public FunctionPlan(FunctionDefinition function)
    {
        Function = function;
        Trigger = function.Trigger!;
        InputBlobs = function.Bindings.Where(b => b.Type == BindingMetadata.Blob && b.Direction != BindingDirection.Out).ToArray();
        InputTables = function.Bindings.Where(b => b.Type == BindingMetadata.Table && b.Direction == BindingDirection.In).ToArray();
        Outputs = function.Bindings.Where(b => b.Direction != BindingDirection.In && !b.IsTrigger)
            .ToDictionary(b => b.Name, StringComparer.OrdinalIgnoreCase);
        HttpOutput = function.Bindings.FirstOrDefault(b => b.Type == BindingMetadata.Http);
        Return = function.Bindings.FirstOrDefault(b => b.Name == BindingMetadata.ReturnName);
    }

    public FunctionDefinition Function { get; }
    public BindingMetadata Trigger { get; }
    public BindingMetadata[] InputBlobs { get; }
    public BindingMetadata[] InputTables { get; }
    public Dictionary<string, BindingMetadata> Outputs { get; }
    public BindingMetadata? HttpOutput { get; }
    public BindingMetadata? Return { get; }

    /// <summary>The function's invocation metrics (tag arrays made once, not per invocation).</summary>
    public required Telemetry.HostMetrics.FunctionMetrics Metrics { get; init; }
}
