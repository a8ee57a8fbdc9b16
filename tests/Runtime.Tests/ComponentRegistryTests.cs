using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Sources;
using FaaST.Hosting;
using FaaST.Runtime.Hosting;
using FaaST.Runtime.Workers;
using Microsoft.Extensions.DependencyInjection;

namespace FaaST.Runtime.Tests;

/// <summary>
/// A later component (prewarm, a flash tier) joins the real host through its registry: a read source, an eviction sink,
/// a lifecycle participant that gets the cache and membership injected, and a worker scheduler that replaces the
/// default, each one registration (<see cref="JournalComponent.Register"/>), with real Azurite, workers and /dev/shm.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.SupportedOSPlatform("linux")]
public sealed class ComponentRegistryTests(AzuriteFixture azurite)
{
    private const string PyRead = """
        import hashlib
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            if inblob is None:
                return func.HttpResponse("missing", status_code=404)
            data = inblob.read()
            return func.HttpResponse(f"{len(data)} {hashlib.sha256(data).hexdigest()}")
        """;

    private static string Expected(byte[] data) => $"{data.Length} {Convert.ToHexStringLower(System.Security.Cryptography.SHA256.HashData(data))}";

    /// <summary>What the test component saw; the one instance the registry hands to each of its parts.</summary>
    public sealed class Journal
    {
        private readonly List<string> _events = [];
        private int _picks;

        /// <summary>The tier's copies: blob name → bytes and the version (ETag) they are a copy of.</summary>
        public System.Collections.Concurrent.ConcurrentDictionary<string, (byte[] Bytes, string Version)> TierCopies { get; } = [];

        public int Picks => Volatile.Read(ref _picks);

        public IReadOnlyList<string> Events
        {
            get
            {
                lock (_events)
                    return _events.ToArray();
            }
        }

        public void Add(string what)
        {
            lock (_events)
                _events.Add(what);
        }

        public void Picked() => Interlocked.Increment(ref _picks);
    }

    /// <summary>The test component: its parts, and its one registration each.</summary>
    private static class JournalComponent
    {
        public static void Register(IServiceCollection services, Journal journal)
        {
            services.AddSingleton(journal);
            services.AddSingleton<IBlobSource, JournalTier>();
            services.AddSingleton<IEvictionSink, JournalSink>();
            services.AddSingleton<IWorkerScheduler, JournalScheduler>();
            services.AddLifecycleComponent<JournalParticipant>();
        }
    }

    /// <summary>A read tier (as flash would be): asked after the key's owner and before storage; answers from its copies.</summary>
    private sealed class JournalTier(Journal journal) : IBlobSource
    {
        public string Name => "journal";

        public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
        {
            journal.Add($"tier asked for {request.Key.Container}/{request.Key.Blob}");
            if (!journal.TierCopies.TryGetValue(request.Key.Blob, out var copy))
                return SourceResult.Unavailable;
            await target.Open(copy.Bytes.Length).WriteAsync(copy.Bytes, ct);
            return new SourceResult(SourceOutcome.Found, copy.Version, copy.Bytes.Length);
        }
    }

    /// <summary>An eviction sink (as a demotion to flash would be).</summary>
    private sealed class JournalSink(Journal journal) : IEvictionSink
    {
        public void OnEvicted(in BlobKey key, string version, in Extent bytes) => journal.Add($"evicted {key.Container}/{key.Blob} ({bytes.Length} bytes)");
    }

    /// <summary>Replaces the default scheduler; picks as it does and counts.</summary>
    private sealed class JournalScheduler(Journal journal) : IWorkerScheduler
    {
        private readonly FewestInFlightScheduler _inner = new();

        public int Pick(IReadOnlyList<IWorkerLoad> workers, FunctionDefinition function)
        {
            journal.Picked();
            return _inner.Pick(workers, function);
        }
    }

    /// <summary>A participant with the cache and membership injected, just above the cache and just above membership.</summary>
    private sealed class JournalParticipant(IHostCache cache, IHostMembership membership, Journal journal) : ILifecycleParticipant
    {
        private string CacheState => cache.Cache is { } c && Directory.Exists(c.Directory) ? "cache open" : "no cache";

        private string Member => membership.Self?.Id ?? "not a member";

        public void Participate(IHostLifecycle lifecycle)
        {
            lifecycle.Subscribe("journal-cache", ServiceLifecycleStage.Cache + 1, new LifecycleObserver(
                _ => Record($"cache+1 starts ({CacheState})"),
                _ => Record($"cache+1 stops ({CacheState})")));
            lifecycle.Subscribe("journal-peers", ServiceLifecycleStage.Peers + 1, new LifecycleObserver(
                _ => Record($"peers+1 starts ({Member}, {membership.Members.Count} in view)"),
                _ => Record($"peers+1 stops ({Member})")));
        }

        private Task Record(string what)
        {
            journal.Add(what);
            return Task.CompletedTask;
        }
    }

    [Fact]
    public async Task A_component_adds_a_read_tier_an_eviction_sink_a_participant_and_a_scheduler_each_with_one_registration()
    {
        using var app = new TestApp("python").Function("Read", TestApp.BlobReadJson("registry"), ("__init__.py", PyRead));
        var journal = new Journal();
        var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { ConfigureServices = services => JournalComponent.Register(services, journal) });
        string self, directory;
        try
        {
            self = host.Host.Self!.Id;
            directory = host.Host.Cache!.Directory;
            await host.Blobs!.CreateContainerIfNotExistsAsync("registry");
            // The tier's copy differs from storage's bytes only so that the answer shows where it came from; its
            // version is storage's, so the preset's check of a tier's copy (one HEAD) passes.
            var stored = "what storage holds"u8.ToArray();
            var etag = (await host.Blobs.UploadAsync("registry", "tiered", stored)).ETag;
            var copy = "what the tier holds"u8.ToArray();
            journal.TierCopies["tiered"] = (copy, etag);
            var plain = "only in storage"u8.ToArray();
            await host.Blobs.UploadAsync("registry", "plain", plain);

            Assert.Equal(Expected(copy), await host.Http.GetStringAsync("/api/read/tiered"));
            Assert.Equal(Expected(plain), await host.Http.GetStringAsync("/api/read/plain"));
            Assert.Contains("tier asked for registry/tiered", journal.Events);
            Assert.Contains("tier asked for registry/plain", journal.Events);
            Assert.True(journal.Picks >= 2, $"the registered scheduler picked {journal.Picks} times for 2 invocations");

            // The memory daemon's eviction, asked for everything: the sink gets each object before its bytes are freed
            // (retried: the worker may still be releasing its pin on the last object read).
            await Eventually.TrueAsync(() =>
            {
                host.Host.Cache.Evict(long.MaxValue);
                return journal.Events.Contains($"evicted registry/plain ({plain.Length} bytes)");
            }, "the eviction sink to get the evicted object", () => string.Join("; ", journal.Events));
        }
        finally
        {
            await host.DisposeAsync();
        }

        // Start in stage order, stop in reverse: the participant just above membership saw this instance joined at
        // both ends, the one just above the cache saw it open at both ends, and the cache closed after it.
        Assert.Equal(
        [
            "cache+1 starts (cache open)",
            $"peers+1 starts ({self}, 1 in view)",
            $"peers+1 stops ({self})",
            "cache+1 stops (cache open)",
        ], journal.Events.Where(e => e.StartsWith("cache+1", StringComparison.Ordinal) || e.StartsWith("peers+1", StringComparison.Ordinal)));
        Assert.False(Directory.Exists(directory), "the cache's segments outlived the host");
    }
}
