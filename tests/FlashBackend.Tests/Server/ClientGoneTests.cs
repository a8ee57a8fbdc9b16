using System.Collections.Concurrent;
using FaaST.FlashBackend.Server;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Net.Client;
using Microsoft.Extensions.Logging;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>
/// Clients that go away mid-call are ordinary for a cache tier (an instance stopped or killed while it demoted or read):
/// the server ends those calls quietly, stores nothing half-written, and logs no error. Found in CI: a platform test saw
/// "Error when executing service method 'Put'" (IOException: the client reset the request stream) when an instance's
/// channel closed under a demotion.
/// </summary>
public sealed class ClientGoneTests
{
    /// <summary>Every Warning-or-worse line any of the server's loggers writes.</summary>
    private sealed class Capture(ConcurrentQueue<string> lines) : ILoggerProvider
    {
        public ILogger CreateLogger(string categoryName) => new Category(lines, categoryName);

        public void Dispose()
        {
        }

        private sealed class Category(ConcurrentQueue<string> lines, string name) : ILogger
        {
            public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Warning;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
            {
                if (IsEnabled(logLevel))
                    lines.Enqueue($"{logLevel} {name}: {formatter(state, exception)} {exception?.GetType().Name}: {exception?.Message}");
            }
        }
    }

    [Fact]
    public async Task Channels_closed_under_running_gets_and_puts_leave_no_error_in_the_servers_log_and_no_half_written_value()
    {
        var lines = new ConcurrentQueue<string>();
        using var files = new ServerFiles();
        await using var server = await FlashServer.StartAsync(new ServeOptions { Device = files.Device, Capacity = 64 << 20, StateDirectory = files.State },
            logging: b => b.AddProvider(new Capture(lines)));
        using var clients = new FlashClients(server.Address, server.AdminKeyPath);
        var tenant = await clients.TenantAsync("gone");
        await tenant.PutAsync("big", "\"1\"", new byte[4 << 20]);

        for (var i = 0; i < 3; i++)
        {
            // A channel of its own, closed (its connection with it) while a get streams and a put is half sent.
            var channel = GrpcChannel.ForAddress(server.Address);
            var tier = new FlashTier.FlashTierClient(channel);
            var get = tier.Get(new GetRequest { Flow = tenant.Flow, Key = TenantClient.Key("big") }, tenant.Auth);
            Assert.True(await get.ResponseStream.MoveNext(CancellationToken.None));
            var put = tier.Put(tenant.Auth);
            await put.RequestStream.WriteAsync(new PutRequest { Header = new PutHeader { Flow = tenant.Flow, Key = TenantClient.Key($"half{i}"), Etag = "\"1\"", Length = 1 << 20 } });
            await put.RequestStream.WriteAsync(new PutRequest { Data = ByteString.CopyFrom(new byte[64 << 10]) });
            channel.Dispose();
        }

        // The server goes on serving, and none of the half-sent values is readable.
        await Eventually.TrueAsync(async () => (await tenant.GetAsync("big")).Data.Length == 4 << 20, "a whole get after the closed channels");
        for (var i = 0; i < 3; i++)
            Assert.False((await tenant.GetAsync($"half{i}")).Header.Found);
        Assert.True(lines.IsEmpty, "the server logged:\n" + string.Join('\n', lines));
    }
}
