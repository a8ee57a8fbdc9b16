using System.Net;
using System.Net.Http.Json;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Text.Json;
using FaaST.Runtime.Flash;

namespace FaaST.Runtime.Tests.Flash;

/// <summary>
/// The flash tier's side of the host without a flash server (issue 22): a host whose tier is down serves every read
/// from storage (bytes identical) and says so on /admin/flash; its workers never see the tier's address or the app's
/// token; a host told to use flash without being told where fails to start, naming what to set; /admin/flash is admin
/// API. Real host, real Python worker, real Azurite.
/// </summary>
[Collection("azurite")]
public sealed class FlashHostTests(AzuriteFixture azurite)
{
    /// <summary>Answers with the blob's length and SHA-256, so a test can compare bytes without shipping them.</summary>
    internal const string PyReadHash = """
        import hashlib
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            if inblob is None:
                return func.HttpResponse("missing", status_code=404)
            data = inblob.read()
            return func.HttpResponse(f"{len(data)} {hashlib.sha256(data).hexdigest()}")
        """;

    private const string PyEnv = """
        import json, os
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse(json.dumps(dict(os.environ)))
        """;

    private const string Token = "flash-host-tests.not-a-real-mac-but-a-secret-all-the-same";

    internal static string Expected(byte[] bytes) => $"{bytes.Length} {Convert.ToHexStringLower(SHA256.HashData(bytes))}";

    /// <summary>A loopback port nothing listens on (bound, then released).</summary>
    internal static int DeadPort()
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        return ((IPEndPoint)listener.LocalEndpoint).Port;
    }

    private static TestApp App(Dictionary<string, string> settings, string flash = """{ "enabled": true, "timeoutMs": 2000, "retryAfterSeconds": 1 }""")
    {
        var app = new TestApp("python", settings: settings)
            .Function("Read", TestApp.BlobReadJson("flashdata"), ("__init__.py", PyReadHash))
            .Function("Env", TestApp.HttpFunctionJson, ("__init__.py", PyEnv));
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), $$"""{ "flash": {{flash}} }""");
        return app;
    }

    internal static async Task<FlashStatus> FlashStatusAsync(HttpClient http) =>
        await http.GetFromJsonAsync("/admin/flash", FlashJsonContext.Default.FlashStatus) ?? throw new InvalidOperationException("/admin/flash answered null");

    [Fact]
    public async Task With_the_flash_server_down_every_read_is_served_from_storage_and_admin_flash_counts_the_fallbacks()
    {
        var address = $"http://127.0.0.1:{DeadPort()}";
        using var app = App(new() { [FlashRegistration.AddressSetting] = address, [FlashRegistration.TokenSetting] = Token });
        await azurite.Store.CreateContainerIfNotExistsAsync("flashdata");
        var blobs = new List<(string Name, byte[] Bytes)>();
        for (var i = 0; i < 3; i++)
        {
            var bytes = RandomNumberGenerator.GetBytes(100_000 + i);
            var name = $"down-{Guid.NewGuid():N}";
            await azurite.Store.UploadAsync("flashdata", name, bytes);
            blobs.Add((name, bytes));
        }
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        // The flow could not be opened at start: the tier is skipped for retryAfterSeconds, then tried again.
        await Eventually.TrueAsync(async () => (await FlashStatusAsync(host.Http)).Usable, "the retry period after the failed start passed");

        foreach (var (name, bytes) in blobs)
            Assert.Equal(Expected(bytes), await host.Http.GetStringAsync($"/api/read/{name}"));

        var status = await FlashStatusAsync(host.Http);
        Assert.Equal(address + "/", status.Address);
        Assert.Null(status.Flow);
        Assert.Equal(0, status.Instance.Hits);
        // Each miss either tried the tier and fell back, or skipped it while it was marked down.
        Assert.Equal(blobs.Count, status.Instance.Fallbacks + status.Instance.SkippedReads);
        Assert.True(status.Instance.Fallbacks >= 1, "the first read after the retry period tried the tier");
        Assert.Null(status.Server);
        Assert.NotNull(status.ServerError);
        Assert.Contains("Flash tier", host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_workers_never_see_the_flash_address_or_the_apps_token_even_as_app_settings()
    {
        var address = $"http://127.0.0.1:{DeadPort()}";
        using var app = App(new() { [FlashRegistration.AddressSetting] = address, [FlashRegistration.TokenSetting] = Token, ["Greeting"] = "hello" });
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        var environment = JsonSerializer.Deserialize<Dictionary<string, string>>(await host.Http.GetStringAsync("/api/Env"))!;

        Assert.Equal("hello", environment["Greeting"]); // the app's settings do reach it
        Assert.False(environment.ContainsKey(FlashRegistration.AddressSetting));
        Assert.False(environment.ContainsKey(FlashRegistration.TokenSetting));
        Assert.DoesNotContain(environment.Values, v => v.Contains(Token, StringComparison.Ordinal));
    }

    [Fact]
    public async Task A_host_told_to_use_flash_without_an_address_or_a_token_fails_to_start_naming_what_to_set()
    {
        using (var noAddress = App([]))
        {
            var e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(noAddress.Directory, azurite.ConnectionString));
            Assert.Contains("faast.json: flash.enabled is true but no flash server is named", e.Message, StringComparison.Ordinal);
            Assert.Contains(FlashRegistration.AddressSetting, e.Message, StringComparison.Ordinal);
        }
        using var noToken = App(new() { [FlashRegistration.AddressSetting] = "http://127.0.0.1:1" });
        var t = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(noToken.Directory, azurite.ConnectionString));
        Assert.Contains($"{FlashRegistration.TokenSetting} is not set", t.Message, StringComparison.Ordinal);
        Assert.Contains("http://127.0.0.1:1", t.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Admin_flash_needs_the_master_key_when_keys_are_checked()
    {
        using var app = App(new()
        {
            [FlashRegistration.AddressSetting] = $"http://127.0.0.1:{DeadPort()}",
            [FlashRegistration.TokenSetting] = Token,
            [FaaST.Runtime.Http.HttpKeyCheck.EnforceSetting] = "true",
        });
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        using var none = await host.Http.GetAsync("/admin/flash");
        Assert.Equal(HttpStatusCode.Unauthorized, none.StatusCode);
        using var wrong = await host.Http.SendAsync(new HttpRequestMessage(HttpMethod.Get, "/admin/flash") { Headers = { { "x-functions-key", Token } } });
        Assert.Equal(HttpStatusCode.Unauthorized, wrong.StatusCode);
        Assert.DoesNotContain(Token, await wrong.Content.ReadAsStringAsync(), StringComparison.Ordinal);
    }
}
