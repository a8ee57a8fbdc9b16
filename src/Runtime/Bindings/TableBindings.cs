using System.Collections.Concurrent;
using System.Text;
using System.Text.Json;
using Azure;
using Azure.Data.Tables;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;

namespace FaaST.Runtime.Bindings;

/// <summary>
/// Table input and output bindings (Azure Tables; Azurite's table service in development), through Azure.Data.Tables
/// with the binding's connection (the app's own account, as its blob and queue bindings). An input with partitionKey
/// and rowKey reads one entity (JSON; null when it does not exist); otherwise it queries (the partitionKey and the
/// filter combined, at most take entities; a JSON array, empty when the table does not exist). An output takes one
/// entity or an array of them (JSON objects; PartitionKey and RowKey from the binding when they lack them) and inserts
/// each, as Azure's output binding adds entities: one that exists already fails the invocation naming its keys.
/// Azure's limits are checked before anything is written, naming the binding: 1 MiB an entity, 252 properties, 64 KiB
/// a string property, keys of at most 1 KiB without / \ # ? or control characters.
/// </summary>
internal sealed class TableBindings(StorageAccounts accounts)
{
    private const int MaxProperties = 252;
    private const int MaxStringBytes = 64 * 1024;
    private const int MaxEntityBytes = 1024 * 1024;
    private const int MaxKeyBytes = 1024;

    private readonly ConcurrentDictionary<string, TableServiceClient> _services = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<(string, string), Task> _created = new();

    private TableServiceClient Service(FunctionDefinition function, BindingMetadata binding) =>
        _services.GetOrAdd(binding.Connection, connection => new TableServiceClient(accounts.ConnectionString(connection)
            ?? throw new BindingResolutionException($"function {function.Name}: table binding \"{binding.Name}\": the app setting {connection} holds no storage connection string")));

    public async Task<TypedData> ReadAsync(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation, CancellationToken ct)
    {
        var settings = binding.TableSettings!;
        var table = Service(function, binding).GetTableClient(ResolveTable(function, binding, invocation));
        var partitionKey = settings.PartitionKey is { } pk ? Resolve(function, binding, "partitionKey", pk, invocation) : null;
        var rowKey = settings.RowKey is { } rk ? Resolve(function, binding, "rowKey", rk, invocation) : null;
        try
        {
            if (partitionKey is not null && rowKey is not null)
            {
                var one = await table.GetEntityIfExistsAsync<TableEntity>(partitionKey, rowKey, cancellationToken: ct);
                return one.HasValue ? new TypedData { Json = ToJson(w => Write(w, one.Value!)) } : new TypedData();
            }
            var filter = partitionKey is null ? settings.Filter
                : settings.Filter is null ? TableClient.CreateQueryFilter($"PartitionKey eq {partitionKey}")
                : $"({TableClient.CreateQueryFilter($"PartitionKey eq {partitionKey}")}) and ({settings.Filter})";
            var entities = new List<TableEntity>();
            await foreach (var entity in table.QueryAsync<TableEntity>(filter, maxPerPage: settings.Take, cancellationToken: ct))
            {
                entities.Add(entity);
                if (entities.Count == settings.Take)
                    break;
            }
            return new TypedData { Json = ToJson(w => { w.WriteStartArray(); foreach (var e in entities) Write(w, e); w.WriteEndArray(); }) };
        }
        catch (RequestFailedException e) when (e.Status == 404)
        {
            // No such table: no entity, as Azure's binding reads it.
            return partitionKey is not null && rowKey is not null ? new TypedData() : new TypedData { Json = "[]" };
        }
        catch (RequestFailedException e) when (e.Status == 400)
        {
            throw new BindingResolutionException($"function {function.Name}: table input \"{binding.Name}\": the table service refused the query: {e.Message.Split('\n')[0]}");
        }
    }

    public async Task WriteAsync(FunctionDefinition function, BindingMetadata binding, TypedData value, InvocationContext invocation, CancellationToken ct)
    {
        var settings = binding.TableSettings!;
        var text = value.DataCase switch
        {
            TypedData.DataOneofCase.Json => value.Json,
            TypedData.DataOneofCase.String => value.String,
            TypedData.DataOneofCase.Bytes => value.Bytes.ToStringUtf8(),
            _ => throw new FunctionFailedException($"function {function.Name}: table output \"{binding.Name}\" got a {value.DataCase} value; it takes an entity or an array of entities (JSON objects)", null),
        };
        JsonDocument document;
        try
        {
            document = JsonDocument.Parse(text);
        }
        catch (JsonException e)
        {
            throw new FunctionFailedException($"function {function.Name}: table output \"{binding.Name}\": the value is not JSON ({e.Message})", null);
        }
        using (document)
        {
            var root = document.RootElement;
            var items = root.ValueKind == JsonValueKind.Array ? root.EnumerateArray().ToList() : [root];
            var partitionKey = settings.PartitionKey is { } pk ? Resolve(function, binding, "partitionKey", pk, invocation) : null;
            var rowKey = settings.RowKey is { } rk ? Resolve(function, binding, "rowKey", rk, invocation) : null;
            var entities = items.Select((item, i) => ToEntity(function, binding, item, items.Count > 1 ? $"entity {i}" : "the entity", partitionKey, rowKey)).ToList();
            var table = Service(function, binding).GetTableClient(ResolveTable(function, binding, invocation));
            await _created.GetOrAdd((binding.Connection, table.Name), _ => table.CreateIfNotExistsAsync(ct));
            foreach (var entity in entities)
            {
                try
                {
                    await table.AddEntityAsync(entity, ct);
                }
                catch (RequestFailedException e) when (e.Status == 409)
                {
                    throw new FunctionFailedException($"function {function.Name}: table output \"{binding.Name}\": the entity ({entity.PartitionKey}, {entity.RowKey}) exists already in {table.Name}; the output binding adds entities", null);
                }
                catch (RequestFailedException e) when (e.Status == 404)
                {
                    // The table was deleted since it was created here: once more.
                    _created.TryRemove((binding.Connection, table.Name), out _);
                    await table.CreateIfNotExistsAsync(ct);
                    await table.AddEntityAsync(entity, ct);
                }
            }
        }
    }

    private static TableEntity ToEntity(FunctionDefinition function, BindingMetadata binding, JsonElement item, string which, string? partitionKey, string? rowKey)
    {
        string Where() => $"function {function.Name}: table output \"{binding.Name}\": {which}";
        if (item.ValueKind != JsonValueKind.Object)
            throw new FunctionFailedException($"{Where()} is a JSON {item.ValueKind.ToString().ToLowerInvariant()}, not an object", null);
        var entity = new TableEntity();
        long bytes = 0;
        foreach (var p in item.EnumerateObject())
        {
            if (p.Name is "odata.etag" or "ETag" or "Timestamp")
                continue;
            object? v = p.Value.ValueKind switch
            {
                JsonValueKind.String => p.Value.GetString(),
                // Each arm boxed on its own: a conditional of int, long and double would make every number a double.
                JsonValueKind.Number => p.Value.TryGetInt32(out var i) ? (object)i : p.Value.TryGetInt64(out var l) ? (object)l : p.Value.GetDouble(),
                JsonValueKind.True or JsonValueKind.False => p.Value.GetBoolean(),
                JsonValueKind.Null or JsonValueKind.Undefined => null,
                _ => p.Value.GetRawText(), // an object or array is kept as its JSON text
            };
            if (v is null)
                continue;
            if (v is string s && Encoding.Unicode.GetByteCount(s) > MaxStringBytes)
                throw new FunctionFailedException($"{Where()}: property \"{p.Name}\" is {Encoding.Unicode.GetByteCount(s)} bytes; Azure Tables takes at most 64 KiB a string property", null);
            bytes += Encoding.Unicode.GetByteCount(p.Name) + (v is string t ? Encoding.Unicode.GetByteCount(t) : 8);
            entity[p.Name] = v;
        }
        if (entity.GetString("PartitionKey") is null)
            entity.PartitionKey = partitionKey ?? throw new FunctionFailedException($"{Where()} has no PartitionKey, and the binding gives none", null);
        if (entity.GetString("RowKey") is null)
            entity.RowKey = rowKey ?? throw new FunctionFailedException($"{Where()} has no RowKey, and the binding gives none", null);
        foreach (var (name, key) in new[] { ("PartitionKey", entity.PartitionKey), ("RowKey", entity.RowKey) })
        {
            if (Encoding.Unicode.GetByteCount(key) > MaxKeyBytes || key.Any(c => c is '/' or '\\' or '#' or '?' || char.IsControl(c)))
                throw new FunctionFailedException($"{Where()}: {name} \"{LogText.Escape(key)}\" must be at most 1 KiB without / \\ # ? or control characters", null);
        }
        if (entity.Count - 2 > MaxProperties)
            throw new FunctionFailedException($"{Where()} has {entity.Count - 2} properties; Azure Tables takes at most {MaxProperties} besides the keys", null);
        if (bytes > MaxEntityBytes)
            throw new FunctionFailedException($"{Where()} is about {bytes} bytes; Azure Tables takes at most 1 MiB an entity", null);
        return entity;
    }

    private static void Write(Utf8JsonWriter w, TableEntity entity)
    {
        w.WriteStartObject();
        foreach (var (name, value) in entity)
        {
            if (name == "odata.etag")
                continue;
            switch (value)
            {
                case null: w.WriteNull(name); break;
                case string s: w.WriteString(name, s); break;
                case bool b: w.WriteBoolean(name, b); break;
                case int i: w.WriteNumber(name, i); break;
                case long l: w.WriteNumber(name, l); break;
                case double d: w.WriteNumber(name, d); break;
                case DateTimeOffset t: w.WriteString(name, t.UtcDateTime.ToString("o", System.Globalization.CultureInfo.InvariantCulture)); break;
                case DateTime t: w.WriteString(name, t.ToUniversalTime().ToString("o", System.Globalization.CultureInfo.InvariantCulture)); break;
                case Guid g: w.WriteString(name, g); break;
                case byte[] bytes: w.WriteBase64String(name, bytes); break;
                case BinaryData data: w.WriteBase64String(name, data.ToArray()); break;
                default: w.WriteString(name, Convert.ToString(value, System.Globalization.CultureInfo.InvariantCulture)); break;
            }
        }
        w.WriteEndObject();
    }

    private static string ToJson(Action<Utf8JsonWriter> write)
    {
        var buffer = new System.Buffers.ArrayBufferWriter<byte>();
        using (var w = new Utf8JsonWriter(buffer))
            write(w);
        return Encoding.UTF8.GetString(buffer.WrittenSpan);
    }

    private static string ResolveTable(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation)
    {
        var name = Resolve(function, binding, "tableName", binding.TableSettings!.TableName, invocation);
        if (FunctionApp.TableNameProblem(name) is { } problem)
            throw new BindingResolutionException($"function {function.Name}: table binding \"{binding.Name}\" tableName resolved to \"{LogText.Escape(name)}\": {problem}");
        return name;
    }

    private static string Resolve(FunctionDefinition function, BindingMetadata binding, string key, BindingTemplate template, InvocationContext invocation)
    {
        if (!template.TryResolve(invocation.Lookup, out var value, out var missing, out var why))
            throw new BindingResolutionException(
                $"function {function.Name}: table binding \"{binding.Name}\" {key} \"{template.Pattern}\" needs a value for {{{missing}}}" +
                (why is null ? ", which the trigger did not supply" : ": " + why));
        return value;
    }
}
