namespace FaaST.AppModel;

/// <summary>
/// An httpTrigger's authLevel, ordered as Azure Functions orders them: a key grants a level, and a
/// request passes when that level is at least the function's.
/// </summary>
public enum AuthLevel
{
    Anonymous,
    Function,
    System,
    Admin,
}

public enum BindingDirection
{
    In,
    Out,
    InOut,
}

/// <summary>One entry of a function.json "bindings" array, validated.</summary>
public sealed record BindingMetadata
{
    public const string HttpTrigger = "httpTrigger";
    public const string Http = "http";
    public const string Blob = "blob";
    public const string BlobTrigger = "blobTrigger";
    public const string Queue = "queue";
    public const string QueueTrigger = "queueTrigger";
    public const string TimerTrigger = "timerTrigger";
    public const string Table = "table";
    public const string ReturnName = "$return";
    public static readonly string[] SupportedTypes = [HttpTrigger, Http, Blob, BlobTrigger, Queue, QueueTrigger, TimerTrigger, Table];

    public required string Name { get; init; }
    public required string Type { get; init; }
    public required BindingDirection Direction { get; init; }

    /// <summary>binary, string or stream ("" when unset), as the worker should present it.</summary>
    public string DataType { get; init; } = "";

    /// <summary>blob / blobTrigger: "container/path/{expr}".</summary>
    public BindingTemplate? Path { get; init; }

    /// <summary>
    /// A blob output's <c>"ifMatch"</c> (a FaaST extension): the name of a blob input of the same function. The output is
    /// written only if its blob still has the version (ETag) that input read in the invocation, or, when the input found
    /// no blob, only if there still is none; otherwise the invocation fails with a conflict and writes nothing more.
    /// Null for an unconditional output.
    /// </summary>
    public string? IfMatch { get; init; }

    /// <summary>queue / queueTrigger: the queue's name ({expressions} in an output; a trigger's is literal).</summary>
    public BindingTemplate? QueueName { get; init; }

    /// <summary>blob / blobTrigger / queue / queueTrigger: the app setting with the storage connection string.</summary>
    public string Connection { get; init; } = "AzureWebJobsStorage";

    /// <summary>httpTrigger: the route template (defaults to the function name).</summary>
    public string? Route { get; init; }

    /// <summary>httpTrigger: the allowed methods (upper case); null allows all.</summary>
    public IReadOnlyList<string>? Methods { get; init; }

    /// <summary>httpTrigger: which key a request needs (Azure's default when unset: function).</summary>
    public AuthLevel AuthLevel { get; init; } = AuthLevel.Function;

    /// <summary>timerTrigger: the parsed schedule, runOnStartup and useMonitor (defaults applied).</summary>
    public TimerTriggerSettings? Timer { get; init; }

    /// <summary>table: the table, its partition key and row key ({expressions} and %settings%), an OData filter and
    /// take (inputs that query); null when unused.</summary>
    public TableBindingSettings? TableSettings { get; init; }

    public bool IsTrigger => Type.EndsWith("Trigger", StringComparison.Ordinal);
}

/// <summary>A table binding's settings (Azure's names): <c>tableName</c>, <c>partitionKey</c>, <c>rowKey</c>, <c>filter</c>,
/// <c>take</c>. An input with both keys reads one entity; otherwise it queries (partitionKey and filter combined, at most
/// take entities). An output's keys fill entities that lack them.</summary>
public sealed record TableBindingSettings(BindingTemplate TableName, BindingTemplate? PartitionKey, BindingTemplate? RowKey, string? Filter, int? Take);
