using System.Collections.Concurrent;
using System.Diagnostics;
using System.Net;
using Azure.Core;
using Azure.Core.Pipeline;

namespace FaaST.Storage.Tests;

/// <summary>
/// The managed-identity path end to end on loopback: Azurite over HTTPS with --oauth basic, a token endpoint
/// served by the test through IDENTITY_ENDPOINT / IDENTITY_HEADER. These tests set those variables in this
/// process (Azure.Identity reads them from there), so they share one collection and never run at once.
/// </summary>
[Collection(IdentityCollection.Name)]
public sealed class IdentityTests
{
    private static string NewClientId() => Guid.NewGuid().ToString(); // its own token cache entry per test

    [Fact]
    public async Task A_managed_identity_reads_writes_lists_and_deletes_blobs_on_an_OAuth_Azurite_over_HTTPS()
    {
        await using var env = await IdentityTestEnvironment.StartAsync(AzuriteFixture.RepoRoot);
        using var scope = new EnvironmentScope(env.IdentityVariables.ToDictionary(p => p.Key, p => (string?)p.Value));
        var clientId = NewClientId();
        var options = env.Options();
        using var store = new BlobStore(env.ServiceUri, ManagedIdentity.Create(clientId, options), options);
        Assert.Equal(env.ServiceUri, store.Endpoint);

        await store.CreateContainerIfNotExistsAsync("identity");
        var data = BlobStoreTests.RandomBytes(300_000);
        var put = await store.UploadAsync("identity", "dir/a.bin", data, "application/x-test", ifNoneMatch: "*");
        Assert.Equal(put.ETag, (await store.GetPropertiesAsync("identity", "dir/a.bin"))!.ETag);
        Assert.Equal(data, (await store.DownloadAsync("identity", "dir/a.bin"))!.Data);
        var items = new List<BlobItem>();
        await foreach (var item in store.ListAsync("identity", "dir/"))
        {
            items.Add(item);
        }

        Assert.Equal("dir/a.bin", Assert.Single(items).Name);
        Assert.True(await store.DeleteAsync("identity", "dir/a.bin", put.ETag));

        // One token, cached by the credential, asked for the storage audience by the user-assigned identity, with the secret header.
        Assert.Equal(1, env.Tokens.Issued);
        var request = Assert.Single(env.Tokens.Requests);
        Assert.True(request.Contains("resource=https%3A%2F%2Fstorage.azure.com", StringComparison.Ordinal) || request.Contains("resource=https://storage.azure.com", StringComparison.Ordinal), request);
        Assert.Contains("client_id=" + clientId, request, StringComparison.Ordinal);
        Assert.EndsWith("header-ok", request, StringComparison.Ordinal);

        // What the identity wrote, an account-key client reads: the same account.
        using var shared = env.SharedKeyStore();
        Assert.Null(await shared.GetPropertiesAsync("identity", "dir/a.bin"));
    }

    [Fact]
    public async Task Azurite_refuses_a_request_that_carries_no_credential_so_the_token_is_what_opens_it()
    {
        await using var env = await IdentityTestEnvironment.StartAsync(AzuriteFixture.RepoRoot);
        using var shared = env.SharedKeyStore();
        await shared.CreateContainerIfNotExistsAsync("private");
        await shared.UploadAsync("private", "x", new byte[] { 1 });
        using var http = new HttpClient(StorageTransport.CreateHandler(env.Options()));
        using var anonymous = await http.GetAsync(new Uri(env.ServiceUri + "/private/x"));
        Assert.False(anonymous.IsSuccessStatusCode, $"an anonymous GET got {(int)anonymous.StatusCode}");
    }

    [Fact]
    public async Task A_failing_token_endpoint_is_a_clear_error_naming_the_blob_after_bounded_retries()
    {
        await using var env = await IdentityTestEnvironment.StartAsync(AzuriteFixture.RepoRoot);
        using var scope = new EnvironmentScope(env.IdentityVariables.ToDictionary(p => p.Key, p => (string?)p.Value));
        env.Tokens.Mode = TokenEndpoint.Behaviour.Fail;
        var options = env.Options(retries: 2);
        using var store = new BlobStore(env.ServiceUri, ManagedIdentity.Create(NewClientId(), options), options);
        var watch = Stopwatch.StartNew();
        var ex = await Assert.ThrowsAsync<StorageUnavailableException>(() =>
            store.GetPropertiesAsync("data", "dir/a.txt").WaitAsync(TimeSpan.FromSeconds(60)));
        Assert.Contains("no token for the storage account", ex.Message, StringComparison.Ordinal);
        Assert.Contains("GetProperties of blob 'dir/a.txt' in container 'data'", ex.Message, StringComparison.Ordinal);
        Assert.Contains(env.ServiceUri.ToString(), ex.Message, StringComparison.Ordinal);
        Assert.True(env.Tokens.Requests.Count >= 2, $"the token endpoint was asked {env.Tokens.Requests.Count} time(s); a failure must be retried");
        Assert.True(watch.Elapsed < TimeSpan.FromSeconds(60), watch.Elapsed.ToString());
    }

    [Fact]
    public async Task A_token_endpoint_that_never_answers_times_out_instead_of_hanging()
    {
        await using var env = await IdentityTestEnvironment.StartAsync(AzuriteFixture.RepoRoot);
        using var scope = new EnvironmentScope(env.IdentityVariables.ToDictionary(p => p.Key, p => (string?)p.Value));
        env.Tokens.Mode = TokenEndpoint.Behaviour.Hang;
        var options = env.Options(retries: 1);
        options.TryTimeout = TimeSpan.FromMilliseconds(500);
        using var store = new BlobStore(env.ServiceUri, ManagedIdentity.Create(NewClientId(), options), options);
        // The guard turns a regression into a failure (TimeoutException) rather than a hung suite.
        var ex = await Assert.ThrowsAsync<StorageUnavailableException>(() =>
            store.DownloadAsync("data", "slow.bin").WaitAsync(TimeSpan.FromSeconds(60)));
        Assert.Contains("no token for the storage account", ex.Message, StringComparison.Ordinal);
        Assert.NotEmpty(env.Tokens.Requests);
    }

    [Fact]
    public async Task The_credential_connects_only_through_the_transport_that_refuses_link_local_addresses()
    {
        // Proves on loopback that the token request goes through the guarded connect; the guard itself is checked below.
        await using var tokens = new TokenEndpoint();
        using var scope = new EnvironmentScope(new Dictionary<string, string?>
        {
            ["IDENTITY_ENDPOINT"] = tokens.Endpoint.AbsoluteUri,
            ["IDENTITY_HEADER"] = tokens.Secret,
        });
        var connects = new ConcurrentQueue<DnsEndPoint>();
        var handler = StorageTransport.CreateHandler(new BlobStoreOptions());
        handler.ConnectCallback = (context, ct) =>
        {
            connects.Enqueue(context.DnsEndPoint);
            return StorageTransport.ConnectRefusingMetadataAsync(context, ct);
        };
        var credential = ManagedIdentity.Create(NewClientId(), new BlobStoreOptions { MaxRetries = 0 }, null, new HttpClientTransport(handler));
        var token = await credential.GetTokenAsync(new TokenRequestContext(["https://storage.azure.com/.default"]), default);
        Assert.Equal(3, token.Token.Split('.').Length);
        Assert.Equal(tokens.Endpoint.Port, Assert.Single(connects).Port);
    }

    [Theory]
    [InlineData("http://169.254.169.254/metadata/identity/oauth2/token")]
    [InlineData("http://[fe80::1]/metadata")]
    [InlineData("http://[::ffff:169.254.169.254]/metadata")]
    public async Task The_shared_transport_refuses_the_instance_metadata_address_before_any_socket_opens(string url)
    {
        using var http = new HttpClient(StorageTransport.CreateHandler(new BlobStoreOptions()));
        var ex = await Assert.ThrowsAsync<HttpRequestException>(() => http.GetAsync(new Uri(url)));
        Assert.Contains("Refused to connect", ex.Message + ex.InnerException?.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Without_a_token_endpoint_no_credential_is_made_and_the_error_says_what_is_missing()
    {
        var none = Assert.Throws<InvalidOperationException>(() => ManagedIdentity.Create(null, null, _ => null));
        Assert.Contains("IDENTITY_ENDPOINT", none.Message, StringComparison.Ordinal);
        Assert.Contains("MSI_ENDPOINT", none.Message, StringComparison.Ordinal);
        Assert.Contains("instance metadata", none.Message, StringComparison.Ordinal);

        var noHeader = ManagedIdentity.Problem(name => name == "IDENTITY_ENDPOINT" ? "http://127.0.0.1:1/msi/token" : null);
        Assert.Contains("IDENTITY_HEADER", noHeader, StringComparison.Ordinal);
        Assert.Contains("not an absolute", ManagedIdentity.Problem(name => name == "IDENTITY_ENDPOINT" ? "not a uri" : "x"), StringComparison.Ordinal);
        Assert.Null(ManagedIdentity.Problem(name => name == "MSI_ENDPOINT" ? "http://127.0.0.1:1/msi" : null));
    }

    [Fact]
    public void A_token_credential_is_only_ever_sent_over_https()
    {
        var ex = Assert.Throws<ArgumentException>(() =>
            new BlobStore(new Uri("http://127.0.0.1:10000/devstoreaccount1"), ManagedIdentity.Create(null, null, _ => "http://127.0.0.1:1/x")));
        Assert.Contains("https", ex.Message, StringComparison.Ordinal);
    }
}

[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class IdentityCollection
{
    public const string Name = "Identity (process environment)";
}
