using System.Collections.Concurrent;
using System.Net;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Policy;
using FaaST.Storage;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Tests;

public static class Repo
{
    public static string Root { get; } = Find();

    private static string Find()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
            if (File.Exists(Path.Combine(dir.FullName, "FaaST.sln")))
                return dir.FullName;
        throw new InvalidOperationException("repository root not found");
    }
}

/// <summary>One Azurite for the peer tests (a real blob service on a free loopback port).</summary>
public sealed class AzuriteFixture : IAsyncLifetime
{
    public AzuriteProcess Azurite { get; private set; } = null!;
    public BlobStore Store { get; private set; } = null!;

    public async Task InitializeAsync()
    {
        Azurite = await AzuriteProcess.StartAsync(Repo.Root);
        Store = new BlobStore(Azurite.ConnectionString);
    }

    public async Task DisposeAsync()
    {
        Store.Dispose();
        await Azurite.DisposeAsync();
    }
}

[CollectionDefinition("azurite")]
public sealed class AzuriteCollection : ICollectionFixture<AzuriteFixture>;

/// <summary>Warnings and errors a test wants to see.</summary>
public sealed class ListLogger : ILogger, ILoggerProvider
{
    public ConcurrentQueue<string> Lines { get; } = new();
    public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;
    public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Information;
    public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
        Lines.Enqueue($"{logLevel}: {formatter(state, exception)}");
    public ILogger CreateLogger(string categoryName) => this;
    public void Dispose()
    {
    }
    public string All => string.Join("\n", Lines);
}

/// <summary>Ownership fixed by a test: keys listed map to a peer, everything else to this instance.</summary>
public sealed class FixedOwners(string self) : IOwnerDirectory
{
    public ConcurrentDictionary<string, Peer> Remote { get; } = new();
    public Peer? Everything { get; set; }
    public string SelfId => self;
    public Peer? OwnerOf(string key) => Remote.TryGetValue(key, out var p) ? p : Everything;
}

/// <summary>A cachelet serving the peer protocol on a real Kestrel listener on loopback.</summary>
public sealed class PeerNode : IAsyncDisposable
{
    public const string App = "peertest";
    public static readonly byte[] Secret = "test-secret-0123456789"u8.ToArray();

    private readonly WebApplication _web;

    private PeerNode(string id, BlobCache cache, WebApplication web, Uri address, ListLogger logs, PeerClient client, FixedOwners owners)
    {
        Id = id;
        Cache = cache;
        _web = web;
        Address = address;
        Logs = logs;
        Client = client;
        Owners = owners;
    }

    public string Id { get; }
    public BlobCache Cache { get; }
    public Uri Address { get; }
    public ListLogger Logs { get; }
    public PeerClient Client { get; }
    public FixedOwners Owners { get; }
    public Peer AsPeer => new(Id, Address);

    public static async Task<PeerNode> StartAsync(string id, IBlobStore store, CachePolicy? policy = null, TimeSpan? timeout = null, string? authorization = null)
    {
        var logs = new ListLogger();
        var cache = new BlobCache($"{App}-{id}-{Guid.NewGuid():N}"[..24], policy ?? new CachePolicy(), logs);
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Logging.AddProvider(logs);
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.Limits.Http2.InitialConnectionWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.InitialStreamWindowSize = 16 * 1024 * 1024;
            k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2);
        });
        var web = builder.Build();
        var header = authorization ?? PeerAuth.HeaderValue(Secret, App);
        web.MapPeerEndpoints(cache, new PeerServerOptions
        {
            AuthorizationHeader = PeerAuth.HeaderValue(Secret, App),
            StoreFor = account => account == store.Endpoint.AbsoluteUri ? store : null,
        }, logs);
        await web.StartAsync();
        var address = new Uri(web.Urls.First().Replace("[::1]", "127.0.0.1", StringComparison.Ordinal) + "/");
        var client = new PeerClient(new PeerOptions { AuthorizationHeader = header, Timeout = timeout ?? TimeSpan.FromSeconds(5) });
        var owners = new FixedOwners(id);
        cache.ConnectPeers(owners, client);
        return new PeerNode(id, cache, web, address, logs, client, owners);
    }

    public async ValueTask DisposeAsync()
    {
        Client.Dispose();
        await _web.StopAsync();
        await _web.DisposeAsync();
        await Cache.DisposeAsync();
    }
}
