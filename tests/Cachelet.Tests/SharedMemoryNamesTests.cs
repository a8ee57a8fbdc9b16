using System.Text.Json;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

/// <summary>The host's shared-memory names are the protocol's: protos/shared-memory.json, against which the Python
/// and Node workers check theirs too.</summary>
public sealed class SharedMemoryNamesTests
{
    private static readonly JsonElement Spec = JsonDocument.Parse(File.ReadAllText(Path.Combine(Repo.Root, "protos", "shared-memory.json"))).RootElement;

    private static JsonElement Files => Spec.GetProperty("files");

    [Fact]
    public void Directory_and_file_prefixes_are_the_specs()
    {
        Assert.Equal(SharedMemoryNames.Root, Spec.GetProperty("root").GetString());
        Assert.Equal(SharedMemoryNames.Root, BlobCache.ShmRoot); // the cache's default root is the protocol's
        Assert.Equal(SharedMemoryNames.InstanceDirectoryPrefix, Spec.GetProperty("instanceDirectory").GetProperty("prefix").GetString());
        Assert.Equal(Files.GetProperty("slabSegment").GetString(), SharedMemoryNames.SlabSegment.ToString());
        Assert.Equal(Files.GetProperty("largeObject").GetString(), SharedMemoryNames.LargeObject.ToString());
        Assert.Equal(Files.GetProperty("temporary").GetString(), SharedMemoryNames.Temporary.ToString());
        Assert.Equal(Files.GetProperty("progress").GetString(), SharedMemoryNames.Progress.ToString());
        Assert.Equal(SharedMemoryNames.HostNumberDigits, Files.GetProperty("hostNumberDigits").GetInt32());
        Assert.Equal(Files.GetProperty("workerOutput").GetProperty("prefix").GetString(), SharedMemoryNames.WorkerOutput.ToString());
        Assert.Equal("s000042", SharedMemoryNames.HostFile(SharedMemoryNames.SlabSegment, 42));
        Assert.Equal(SharedMemoryNames.HostNumberDigits + 1, SharedMemoryNames.HostFile(SharedMemoryNames.Temporary, 1).Length);
    }

    [Fact]
    public void The_progress_record_layout_is_the_one_a_streamed_fill_writes()
    {
        var record = Spec.GetProperty("progressRecord");
        Assert.Equal(16, record.GetProperty("size").GetInt32());
        Assert.Equal(0, record.GetProperty("filledOffset").GetInt32());
        Assert.Equal(8, record.GetProperty("stateOffset").GetInt32());
        Assert.Equal(StreamingFill.WakeOffset, record.GetProperty("wakeOffset").GetInt32());
        var states = record.GetProperty("states");
        Assert.Equal(StreamingFill.Filling, states.GetProperty("filling").GetInt32());
        Assert.Equal(StreamingFill.Complete, states.GetProperty("complete").GetInt32());
        Assert.Equal(StreamingFill.Failed, states.GetProperty("failed").GetInt32());
    }

    [Fact]
    public void Capability_names_are_the_specs()
    {
        var caps = Spec.GetProperty("capabilities");
        Assert.Equal(SharedMemoryNames.SharedMemoryCapability, caps.GetProperty("sharedMemory").GetString());
        Assert.Equal(SharedMemoryNames.DirectoryCapability, caps.GetProperty("directory").GetString());
        Assert.Equal(SharedMemoryNames.MinBytesCapability, caps.GetProperty("minBytes").GetString());
        Assert.Equal(SharedMemoryNames.ReleaseCapability, caps.GetProperty("release").GetString());
        Assert.Equal(SharedMemoryNames.StreamingCapability, caps.GetProperty("streaming").GetString());
    }

    [Fact]
    public void Instance_directories_are_named_as_the_spec_says()
    {
        foreach (var example in Spec.GetProperty("instanceDirectory").GetProperty("examples").EnumerateArray())
        {
            var directory = SharedMemoryNames.InstanceDirectory(SharedMemoryNames.Root,
                SharedMemoryNames.AppPrefix(example.GetProperty("app").GetString()!), example.GetProperty("pid").GetInt32());
            Assert.Equal(example.GetProperty("directory").GetString(), directory);
        }
    }

    [Fact]
    public void Host_and_worker_output_names_are_told_apart_as_the_spec_says()
    {
        var output = Files.GetProperty("workerOutput");
        Assert.Equal("w{pid}-{counter}", output.GetProperty("format").GetString());
        foreach (var example in output.GetProperty("examples").EnumerateArray())
            Assert.Equal(example.GetProperty("name").GetString(), SharedMemoryNames.WorkerOutputFile(example.GetProperty("pid").GetInt32(), example.GetProperty("counter").GetInt64()));

        var examples = Files.GetProperty("examples");
        foreach (var name in Names(examples, "host"))
            Assert.True(SharedMemoryNames.IsHostFile(name) && !SharedMemoryNames.IsWorkerOutputFile(name), $"{name} is a host file");
        foreach (var name in Names(examples, "workerOutput"))
            Assert.True(SharedMemoryNames.IsWorkerOutputFile(name) && !SharedMemoryNames.IsHostFile(name), $"{name} is a worker output");
        foreach (var name in Names(examples, "neither"))
            Assert.False(SharedMemoryNames.IsHostFile(name) || SharedMemoryNames.IsWorkerOutputFile(name), $"{name} is neither");
    }

    private static IEnumerable<string> Names(JsonElement examples, string kind) =>
        examples.GetProperty(kind).EnumerateArray().Select(e => e.GetString()!);
}
