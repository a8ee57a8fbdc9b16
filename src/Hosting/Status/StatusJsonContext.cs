using System.Text.Json;
using System.Text.Json.Serialization;

namespace FaaST.Hosting.Status;

/// <summary>
/// Source-generated (de)serialisation of the status contract: camelCase names, enums as their names.
/// Write and read with this context, e.g. <c>http.GetFromJsonAsync(url, StatusJsonContext.Default.HostStatus)</c>.
/// </summary>
[JsonSourceGenerationOptions(JsonSerializerDefaults.Web, UseStringEnumConverter = true)]
[JsonSerializable(typeof(HostStatus))]
[JsonSerializable(typeof(CacheStatus))]
public sealed partial class StatusJsonContext : JsonSerializerContext;
