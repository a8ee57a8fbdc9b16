using FaaST.Storage;

namespace FaaST.Storage.Tests;

public class ConnectionStringTests
{
    private const string Key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    private const string OtherKey = "c2VjcmV0LWtleS1vZi10aGUtdGVzdA==";

    [Fact]
    public void DevelopmentStorage_UsesAzuriteDefaults()
    {
        var cs = StorageConnectionString.Parse("UseDevelopmentStorage=true");
        Assert.True(cs.IsDevelopmentStorage);
        Assert.Equal("devstoreaccount1", cs.AccountName);
        Assert.Equal(new Uri("http://127.0.0.1:10000/devstoreaccount1"), cs.BlobEndpoint);
        Assert.True(cs.HasAccountKey);
        Assert.Equal(Convert.FromBase64String(Key), cs.AccountKey);
        Assert.Null(cs.SharedAccessSignature);
    }

    [Fact]
    public void DevelopmentStorage_WithProxyUri_KeepsHostAndUsesPort10000()
    {
        var cs = StorageConnectionString.Parse("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler");
        Assert.Equal(new Uri("http://ipv4.fiddler:10000/devstoreaccount1"), cs.BlobEndpoint);
    }

    [Fact]
    public void AccountWithDefaultSuffix_BuildsHttpsEndpoint()
    {
        var cs = StorageConnectionString.Parse($"DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={OtherKey}");
        Assert.Equal(new Uri("https://myacct.blob.core.windows.net"), cs.BlobEndpoint);
        Assert.Equal("myacct", cs.AccountName);
        Assert.Equal(Convert.FromBase64String(OtherKey), cs.AccountKey);
        Assert.False(cs.IsDevelopmentStorage);
    }

    [Fact]
    public void ProtocolAndSuffix_AreHonoured_AndKeysAreCaseInsensitive()
    {
        var cs = StorageConnectionString.Parse(
            $" defaultendpointsprotocol = http ; ACCOUNTNAME=acct2 ;accountkey={OtherKey};EndpointSuffix=core.chinacloudapi.cn;");
        Assert.Equal(new Uri("http://acct2.blob.core.chinacloudapi.cn"), cs.BlobEndpoint);
    }

    [Fact]
    public void ExplicitBlobEndpoint_WinsAndLosesTrailingSlash_OtherServicesIgnored()
    {
        var cs = StorageConnectionString.Parse(
            $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={Key};" +
            "BlobEndpoint=http://127.0.0.1:10123/devstoreaccount1/;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;");
        Assert.Equal("http://127.0.0.1:10123/devstoreaccount1", cs.BlobEndpoint.ToString());
    }

    [Fact]
    public void SharedAccessSignature_IsKeptWithoutQuestionMark_AndNoKey()
    {
        var cs = StorageConnectionString.Parse(
            "BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=?sv=2021-08-06&ss=b&sig=abc%2Bdef%3D");
        Assert.Equal("sv=2021-08-06&ss=b&sig=abc%2Bdef%3D", cs.SharedAccessSignature);
        Assert.False(cs.HasAccountKey);
        Assert.Equal(new Uri("https://acct.blob.core.windows.net"), cs.BlobEndpoint);
    }

    [Fact]
    public void SasWithAccountName_UsesDerivedEndpoint()
    {
        var cs = StorageConnectionString.Parse("AccountName=acct;SharedAccessSignature=sv=1&sig=x");
        Assert.Equal(new Uri("https://acct.blob.core.windows.net"), cs.BlobEndpoint);
        Assert.Equal("sv=1&sig=x", cs.SharedAccessSignature);
    }

    [Fact]
    public void ForAzurite_ParsesBackToThatPort()
    {
        var text = StorageConnectionString.ForAzurite(12345);
        var cs = StorageConnectionString.Parse(text);
        Assert.Equal(new Uri("http://127.0.0.1:12345/devstoreaccount1"), cs.BlobEndpoint);
        Assert.Equal("devstoreaccount1", cs.AccountName);
        Assert.Equal(Convert.FromBase64String(Key), cs.AccountKey);
        Assert.Throws<ArgumentOutOfRangeException>(() => StorageConnectionString.ForAzurite(0));
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
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";EndpointSuffix=bad/suffix", "EndpointSuffix", OtherKey)]
    [InlineData("UseDevelopmentStorage=false", "UseDevelopmentStorage", null)]
    [InlineData("UseDevelopmentStorage=true;AccountName=other", "AccountName", null)]
    [InlineData("DevelopmentStorageProxyUri=http://proxy;AccountName=a;AccountKey=" + OtherKey, "DevelopmentStorageProxyUri", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";SharedAccessSignature=sv=1&sig=topsecret", "SharedAccessSignature", "topsecret")]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";Bogus=1", "Bogus", OtherKey)]
    [InlineData("AccountName=acct;AccountKey=" + OtherKey + ";sv=2021&sig=abc", "'sv'", "sig=abc")]
    [InlineData("AccountName=a;AccountName=b;AccountKey=" + OtherKey, "AccountName", OtherKey)]
    [InlineData("AccountName=;AccountKey=" + OtherKey, "AccountName", OtherKey)]
    [InlineData("AccountName=acct;" + OtherKey, "Segment 2", OtherKey)]
    [InlineData("DefaultEndpointsProtocol=https", "AccountName", null)]
    [InlineData("   ", "empty", null)]
    public void BadStrings_NameTheKey_AndNeverEchoSecrets(string text, string expectedInMessage, string? secret)
    {
        var ex = Assert.Throws<ArgumentException>(() => StorageConnectionString.Parse(text));
        Assert.Contains(expectedInMessage, ex.Message, StringComparison.Ordinal);
        if (secret is not null)
        {
            Assert.DoesNotContain(secret, ex.Message, StringComparison.Ordinal);
        }
    }

    [Fact]
    public void BlobStore_RejectsBadConnectionStringsAndOptions()
    {
        Assert.Throws<ArgumentException>(() => new BlobStore("AccountName=acct"));
        var ex = Assert.Throws<ArgumentOutOfRangeException>(() =>
            new BlobStore(StorageConnectionString.ForAzurite(10000), new BlobStoreOptions { MaxRetries = -1 }));
        Assert.Equal("MaxRetries", ex.ParamName);
    }
}
