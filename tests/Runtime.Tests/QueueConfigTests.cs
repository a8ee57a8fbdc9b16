using System.Text;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Hosting.Components;
using FaaST.Runtime.Invocation;

namespace FaaST.Runtime.Tests;

/// <summary>Queue bindings in function.json, extensions.queues in host.json, and how outputs become messages (no I/O).</summary>
public sealed class QueueConfigTests : IDisposable
{
    private static readonly System.Collections.Hashtable NoEnvironment = new();
    private readonly TestApp _empty = new("python");

    public void Dispose() => _empty.Dispose();

    [Fact]
    public void Queue_bindings_load_with_lower_cased_literal_names_and_setting_references()
    {
        using var app = new TestApp("python", settings: new() { ["OUTQ"] = "results-{name}" }).Function("Q", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "Orders" },
              { "type": "queue", "direction": "out", "name": "$return", "queueName": "%OUTQ%" } ] }
            """, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.Null(f.Error);
        Assert.Equal(BindingMetadata.QueueTrigger, f.Trigger!.Type);
        Assert.Equal("orders", f.Trigger.QueueName!.Pattern);
        Assert.Equal("results-{name}", f.Bindings.Single(b => b.Type == BindingMetadata.Queue).QueueName!.Pattern);
    }

    [Theory]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m" } ] }""", "bindings[0].queueName is missing")]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m", "queueName": "q-{x}" } ] }""", "a queueTrigger needs a literal queue name")]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m", "queueName": "a_b" } ] }""", "may hold only lowercase letters, digits and dashes")]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m", "queueName": "ab" } ] }""", "3 to 63 characters")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "queue", "direction": "in", "name": "q", "queueName": "abc" } ] }""", "must have direction \"out\"")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "queue", "direction": "out", "name": "q", "queueName": "abc", "connection": "Nope" } ] }""", "bindings[1].connection: app setting \"Nope\" (a queue binding's connection) is not set")]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m", "queueName": "abc", "connection": "BlobOnly" } ] }""", "names no queue service")]
    [InlineData("""{ "bindings": [ { "type": "queueTrigger", "direction": "in", "name": "m", "queueName": "abc", "connection": "Ident" } ] }""", "Ident__queueServiceUri")]
    public void Invalid_queue_bindings_disable_the_function_naming_file_and_key(string json, string expected)
    {
        using var app = new TestApp("python", settings: new()
        {
            ["BlobOnly"] = FaaST.Storage.StorageConnectionString.ForAzurite(10000),
            ["Ident__blobServiceUri"] = "https://acct.blob.core.windows.net",
        }).Function("F", json, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.NotNull(f.Error);
        Assert.Contains(expected, f.Error);
        Assert.Contains("function.json", f.Error);
    }

    [Fact]
    public void Host_json_queue_settings_have_azures_defaults_and_read_every_key()
    {
        using var plain = new TestApp("python");
        var defaults = HostConfig.Load(plain.Directory);
        Assert.Equal(TimeSpan.FromMinutes(1), defaults.QueueMaxPollingInterval);
        Assert.Equal(TimeSpan.Zero, defaults.QueueVisibilityTimeout);
        Assert.Equal(16, defaults.QueueBatchSize);
        Assert.Equal(8 * Environment.ProcessorCount, defaults.EffectiveQueueNewBatchThreshold);
        Assert.Equal(5, defaults.QueueMaxDequeueCount);
        Assert.True(defaults.QueueBase64);

        using var set = new TestApp("python", """
            { "version": "2.0", "extensions": { "queues": { "maxPollingInterval": 2000, "visibilityTimeout": "00:00:30", "batchSize": 4,
              "newBatchThreshold": 0, "maxDequeueCount": 3, "messageEncoding": "None" } } }
            """);
        var config = HostConfig.Load(set.Directory);
        Assert.Equal(TimeSpan.FromSeconds(2), config.QueueMaxPollingInterval);
        Assert.Equal(TimeSpan.FromSeconds(30), config.QueueVisibilityTimeout);
        Assert.Equal(4, config.QueueBatchSize);
        Assert.Equal(0, config.EffectiveQueueNewBatchThreshold);
        Assert.Equal(3, config.QueueMaxDequeueCount);
        Assert.False(config.QueueBase64);
    }

    [Theory]
    [InlineData("\"batchSize\": 33", "extensions.queues.batchSize must be a whole number from 1 to 32")]
    [InlineData("\"maxDequeueCount\": 0", "extensions.queues.maxDequeueCount must be a positive whole number")]
    [InlineData("\"newBatchThreshold\": -1", "extensions.queues.newBatchThreshold must be a whole number, 0 or more")]
    [InlineData("\"messageEncoding\": \"utf8\"", "messageEncoding \"utf8\" must be \"base64\" or \"none\"")]
    [InlineData("\"maxPollingInterval\": \"00:00:00.01\"", "maxPollingInterval must be from 00:00:00.1")]
    [InlineData("\"visibilityTimeout\": \"soon\"", "extensions.queues.visibilityTimeout must be a time span")]
    public void Bad_queue_settings_stop_the_app_naming_the_key(string setting, string expected)
    {
        using var app = new TestApp("python", $$"""{ "version": "2.0", "extensions": { "queues": { {{setting}} } } }""");
        var e = Assert.Throws<AppConfigException>(() => HostConfig.Load(app.Directory));
        Assert.Contains(expected, e.Message, StringComparison.Ordinal);
        Assert.Contains("host.json", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void The_message_lease_setting_is_checked_naming_the_setting()
    {
        using var app = new TestApp("python", settings: new() { [QueueTriggersComponent.LeaseSetting] = "1 second" });
        var settings = AppSettings.Load(app.Directory, NoEnvironment);
        var e = Assert.Throws<AppConfigException>(() => QueueTriggersComponent.Lease(settings));
        Assert.Contains("FAAST_QUEUE_MESSAGE_LEASE", e.Message, StringComparison.Ordinal);
        using var none = new TestApp("python");
        Assert.Equal(TimeSpan.FromMinutes(10), QueueTriggersComponent.Lease(AppSettings.Load(none.Directory, NoEnvironment)));
    }

    private QueueOutput Output(bool base64) =>
        new(new StorageAccounts(AppSettings.Load(_empty.Directory, NoEnvironment), null), new HostConfig { QueueBase64 = base64 });

    [Fact]
    public void A_string_bytes_or_json_value_is_one_message_and_a_json_array_one_per_element()
    {
        var output = Output(base64: false);
        Assert.Equal(["text"], output.Messages(new TypedData { String = "text" }, "f"));
        Assert.Equal(["""{"a":1}"""], output.Messages(new TypedData { Json = """{"a":1}""" }, "f"));
        Assert.Equal(["x", """{"b":2}""", "3"], output.Messages(new TypedData { Json = """["x", {"b":2}, 3]""" }, "f"));
        Assert.Equal(["bytes"], output.Messages(new TypedData { Bytes = Google.Protobuf.ByteString.CopyFromUtf8("bytes") }, "f"));
        Assert.Empty(output.Messages(new TypedData(), "f"));
        var notText = Assert.Throws<FormatException>(() => output.Messages(new TypedData { Bytes = Google.Protobuf.ByteString.CopyFrom(0xff, 0xfe) }, "queue output \"q\""));
        Assert.Contains("queue output \"q\"", notText.Message, StringComparison.Ordinal);
        Assert.Contains("not UTF-8", notText.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void With_base64_encoding_messages_are_the_base64_of_their_utf8_bytes()
    {
        var output = Output(base64: true);
        Assert.Equal([Convert.ToBase64String(Encoding.UTF8.GetBytes("héllo"))], output.Messages(new TypedData { String = "héllo" }, "f"));
        Assert.Equal([Convert.ToBase64String(new byte[] { 0xff, 0 })], output.Messages(new TypedData { Bytes = Google.Protobuf.ByteString.CopyFrom(0xff, 0) }, "f"));
        Assert.Equal("héllo", Encoding.UTF8.GetString(QueueMessageCodec.Decode(Convert.ToBase64String(Encoding.UTF8.GetBytes("héllo")), true, "m")));
        var bad = Assert.Throws<FormatException>(() => QueueMessageCodec.Decode("not base64!", true, "message 7 on queue q"));
        Assert.Contains("message 7 on queue q is not valid base64", bad.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void An_output_queue_name_resolves_from_binding_data_and_is_checked()
    {
        var function = new FunctionDefinition { Name = "F", Directory = "/", ScriptFile = "/x", Bindings = [] };
        var binding = new BindingMetadata
        {
            Name = "q", Type = BindingMetadata.Queue, Direction = BindingDirection.Out,
            QueueName = BindingTemplate.Parse("out-{kind}", "test"),
        };
        var invocation = new InvocationContext("F");
        invocation.BindingData["kind"] = "Urgent";
        Assert.Equal("out-urgent", QueueOutput.ResolveQueue(function, binding, invocation));
        invocation.BindingData["kind"] = "a_b";
        Assert.Contains("invalid name", Assert.Throws<BindingResolutionException>(() => QueueOutput.ResolveQueue(function, binding, invocation)).Message);
        invocation.BindingData.Remove("kind");
        Assert.Contains("needs a value for {kind}", Assert.Throws<BindingResolutionException>(() => QueueOutput.ResolveQueue(function, binding, invocation)).Message);
    }
}
