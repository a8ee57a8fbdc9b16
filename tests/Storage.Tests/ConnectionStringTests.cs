namespace FaaST.Storage.Tests;

/// <summary>
/// Connection strings: the SDK reads the endpoints (checked here through <see cref="BlobStore.Endpoint"/>);
/// <see cref="StorageConnectionString"/> reads the credential for the peer secret and says, naming the key,
/// what is wrong with a string the SDK refuses.
/// </summary>
public class ConnectionStringTests
{
    private const string Key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    private const string OtherKey = "c2VjcmV0LWtleS1vZi10aGUtdGVzdA==";

    [Fact]
    public void DevelopmentStorage_UsesAzuriteDefaults()
    {
        var cs = StorageConnectionString.Parse("UseDevelopmentStorage=true");
        Assert.True(cs.IsDevelopmentStorage);
        Assert.True(cs.UsesPublicDevelopmentKey);
        Assert.Equal("devstoreaccount1", cs.AccountName);
        Assert.True(cs.HasAccountKey);
        Assert.Equal(Convert.FromBase64String(Key), cs.AccountKey);
        Assert.Null(cs.SharedAccessSignature);
        using var store = new BlobStore("UseDevelopmentStorage=true");
        Assert.Equal(new Uri("http://127.0.0.1:10000/devstoreaccount1"), store.Endpoint);
    }

    [Fact]
    public void DevelopmentStorage_WithProxyUri_KeepsHostAndUsesPort10000()
    {
        using var store = new BlobStore("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler");
        Assert.Equal(new Uri("http://ipv4.fiddler:10000/devstoreaccount1"), store.Endpoint);
    }

    [Fact]
    public void AccountWithDefaultSuffix_BuildsHttpsEndpoint()
    {
        var text = $"DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={OtherKey}";
        var cs = StorageConnectionString.Parse(text);
        Assert.Equal("myacct", cs.AccountName);
        Assert.Equal(Convert.FromBase64String(OtherKey), cs.AccountKey);
        Assert.False(cs.IsDevelopmentStorage);
        Assert.False(cs.UsesPublicDevelopmentKey);
        using var store = new BlobStore(text);
        Assert.Equal(new Uri("https://myacct.blob.core.windows.net"), store.Endpoint);
    }

    [Fact]
    public void ProtocolAndSuffix_AreHonoured()
    {
        using var store = new BlobStore($"DefaultEndpointsProtocol=http;AccountName=acct2;AccountKey={OtherKey};EndpointSuffix=core.chinacloudapi.cn;");
        Assert.Equal(new Uri("http://acct2.blob.core.chinacloudapi.cn"), store.Endpoint);
    }

    [Fact]
    public void A_key_spelt_in_another_case_or_with_spaces_is_refused_naming_the_spelling_the_SDK_reads()
    {
        var ex = Assert.Throws<ArgumentException>(() =>
            new BlobStore($" defaultendpointsprotocol = http ;AccountName=acct2;AccountKey={OtherKey}"));
        Assert.Contains("'DefaultEndpointsProtocol'", ex.Message, StringComparison.Ordinal);
        Assert.DoesNotContain(OtherKey, ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void ExplicitBlobEndpoint_WinsAndLosesTrailingSlash_OtherServicesIgnored()
    {
        using var store = new BlobStore(
            $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={Key};" +
            "BlobEndpoint=http://127.0.0.1:10123/devstoreaccount1/;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;");
        Assert.Equal("http://127.0.0.1:10123/devstoreaccount1", store.Endpoint.ToString());
        Assert.Equal(new Uri("http://127.0.0.1:10123/devstoreaccount1/data/a%20b"), store.GetBlobUri("data", "a b"));
    }

    [Fact]
    public void SharedAccessSignature_IsKeptWithoutQuestionMark_AndNoKey()
    {
        var text = "BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=?sv=2021-08-06&ss=b&sig=abc%2Bdef%3D";
        var cs = StorageConnectionString.Parse(text);
        Assert.Equal("sv=2021-08-06&ss=b&sig=abc%2Bdef%3D", cs.SharedAccessSignature);
        Assert.False(cs.HasAccountKey);
        Assert.NotNull(cs.DeriveKey("purpose"));
        using var store = new BlobStore(text);
        Assert.Equal(new Uri("https://acct.blob.core.windows.net"), store.Endpoint);
        Assert.Equal(new Uri("https://acct.blob.core.windows.net/data/x/y.bin"), store.GetBlobUri("data", "x/y.bin"));
    }

    [Fact]
    public void SasWithAccountName_UsesDerivedEndpoint()
    {
        var text = "AccountName=acct;SharedAccessSignature=sv=1&sig=x";
        Assert.Equal("sv=1&sig=x", StorageConnectionString.Parse(text).SharedAccessSignature);
        using var store = new BlobStore(text);
        Assert.Equal(new Uri("https://acct.blob.core.windows.net"), store.Endpoint);
    }

    [Fact]
    public void ForAzurite_ParsesBackToThatPort()
    {
        var text = StorageConnectionString.ForAzurite(12345);
        var cs = StorageConnectionString.Parse(text);
        Assert.Equal("devstoreaccount1", cs.AccountName);
        Assert.Equal(Convert.FromBase64String(Key), cs.AccountKey);
        Assert.True(cs.UsesPublicDevelopmentKey);
        Assert.True(StorageConnectionString.IsPublicDevelopmentKey(text));
        using var store = new BlobStore(text);
        Assert.Equal(new Uri("http://127.0.0.1:12345/devstoreaccount1"), store.Endpoint);
        Assert.Throws<ArgumentOutOfRangeException>(() => StorageConnectionString.ForAzurite(0));
    }

    [Fact]
    public void A_private_key_is_not_the_public_development_key_and_derives_a_key_of_its_own()
    {
        var text = $"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={OtherKey};BlobEndpoint=http://127.0.0.1:1/acct";
        Assert.False(StorageConnectionString.IsPublicDevelopmentKey(text));
        Assert.False(StorageConnectionString.IsPublicDevelopmentKey("garbage"));
        var derived = StorageConnectionString.Parse(text).DeriveKey("faast-peer-v2");
        Assert.NotNull(derived);
        Assert.NotEqual(derived, StorageConnectionString.Parse(StorageConnectionString.ForAzurite(1)).DeriveKey("faast-peer-v2"));
        Assert.NotEqual(derived, StorageConnectionString.Parse(text).DeriveKey("another purpose"));
    }

    [Fact]
    public void ToString_HasNoSecret()
    {
        var cs = StorageConnectionString.Parse($"AccountName=acct;AccountKey={OtherKey}");
        Assert.DoesNotContain(OtherKey, cs.ToString(), StringComparison.Ordinal);
        Assert.Contains("SharedKey", cs.ToString(), StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("AccountName=acct", "AccountKey", null)]
    [InlineData("AccountName=acct;AccountKey=!!not*base64!!", "AccountKey", "!!not*base64!!")]
    [InlineData("AccountKey=" + OtherKey, "AccountName", OtherKey)]
    [InlineData("DefaultEndpointsProtocol=ftp;AccountName=acct;AccountKey=" + OtherKey, "DefaultEndpointsProtocol", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";BlobEndpoint=not a uri", "BlobEndpoint", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";BlobEndpoint=ftp://host/x", "BlobEndpoint", OtherKey)]
    [InlineData("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + OtherKey + ";EndpointSuffix=bad/suffix", "EndpointSuffix", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey, "DefaultEndpointsProtocol", OtherKey)]
    [InlineData("UseDevelopmentStorage=false", "UseDevelopmentStorage", null)]
    [InlineData("UseDevelopmentStorage=true;AccountName=other", "AccountName", null)]
    [InlineData("DevelopmentStorageProxyUri=http://proxy;AccountName=a;AccountKey=" + OtherKey, "DevelopmentStorageProxyUri", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";SharedAccessSignature=sv=1&sig=topsecret", "SharedAccessSignature", "topsecret")]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";Bogus=1", "Bogus", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";sv=2021&sig=abc", "'sv'", "sig=abc")]
    [InlineData("AccountName=a;AccountName=b;AccountKey=" + OtherKey, "AccountName", OtherKey)]
    [InlineData("AccountName=;AccountKey=" + OtherKey, "AccountName", OtherKey)]
    [InlineData("AccountName=acct;" + OtherKey, "egment 2", OtherKey)]
    [InlineData("SharedAccessSignature=sv=1&sig=x", "BlobEndpoint", "sig=x")]
    [InlineData("DefaultEndpointsProtocol=https", "AccountName", null)]
    [InlineData("garbage", "Key=Value", "garbage")]
    [InlineData("   ", "empty", null)]
    public void BadStrings_NameTheKey_AndNeverEchoSecrets(string text, string expectedInMessage, string? secret)
    {
        var ex = Assert.Throws<ArgumentException>(() => new BlobStore(text));
        Assert.Contains(expectedInMessage, ex.Message, StringComparison.Ordinal);
        Assert.Equal(ex.Message.Split(" (Parameter", 2)[0], BlobStore.ConnectionStringProblem(text));
        if (secret is not null)
        {
            Assert.DoesNotContain(secret, ex.Message, StringComparison.Ordinal);
        }
    }

    [Fact]
    public void BlobStore_RejectsBadOptions()
    {
        var ex = Assert.Throws<ArgumentOutOfRangeException>(() =>
            new BlobStore(StorageConnectionString.ForAzurite(10000), new BlobStoreOptions { MaxRetries = -1 }));
        Assert.Equal("MaxRetries", ex.ParamName);
    }
}
