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
        OutputBindings = function.Bindings.Where(b => b.Direction != BindingDirection.In && !b.IsTrigger).ToArray();
        ConditionalOutputs = OutputBindings.Where(b => b.IfMatch is not null).ToArray();
        // Load validated that each names a blob input of this function; its index among the inputs read.
        ConditionInputs = ConditionalOutputs
            .Select(o => Array.FindIndex(InputBlobs, i => i.Name.Equals(o.IfMatch, StringComparison.OrdinalIgnoreCase)))
            .ToArray();
    }

    /// <summary>Every output binding in declaration order (http, $return included).</summary>
    public BindingMetadata[] OutputBindings { get; }

    /// <summary>The blob outputs with "ifMatch", in declaration order: written first, one after another.</summary>
    public BindingMetadata[] ConditionalOutputs { get; }

    /// <summary>For each of <see cref="ConditionalOutputs"/>, the index in <see cref="InputBlobs"/> of the input it names.</summary>
    public int[] ConditionInputs { get; }

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
