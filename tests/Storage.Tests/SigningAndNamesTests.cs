using System.Security.Cryptography;
using System.Text;
using FaaST.Storage;

namespace FaaST.Storage.Tests;

/// <summary>
/// SharedKey signing against vectors written by hand from the documented algorithm; the signatures were
/// computed independently with `openssl dgst -sha256 -mac HMAC` over the same strings.
/// </summary>
public class SigningAndNamesTests
{
    private const string Date = "Fri, 21 Nov 2025 10:00:00 GMT";
    private static readonly byte[] AzuriteKey = Convert.FromBase64String(StorageConnectionString.DevelopmentAccountKey);

    [Fact]
    public void RangedGet_OnPathStyleEndpoint()
    {
        var p = new RequestParts
        {
            Method = "GET",
            Container = "data",
            EncodedBlob = "dir/a%20b.txt",
            Range = "bytes=0-99",
        };
        var sts = SharedKeySigner.BuildStringToSign(p, "/devstoreaccount1/devstoreaccount1", Date, "2021-08-06");
        Assert.Equal(
            "GET\n\n\n\n\n\n\n\n\n\n\n\n" +
            "x-ms-date:Fri, 21 Nov 2025 10:00:00 GMT\nx-ms-range:bytes=0-99\nx-ms-version:2021-08-06\n" +
            "/devstoreaccount1/devstoreaccount1/data/dir/a%20b.txt",
            sts);
        Assert.Equal("Z35JFy9BSdk/o4iT0BqOzJgpXXtst7s1miz0tmCfEtg=", Signature(sts));
        Assert.Equal(Convert.ToBase64String(HMACSHA256.HashData(AzuriteKey, Encoding.UTF8.GetBytes(sts))), Signature(sts));
    }

    [Fact]
    public void ConditionalPut_WithLengthAndContentType_OnHostStyleEndpoint()
    {
        var p = new RequestParts
        {
            Method = "PUT",
            Container = "data",
            EncodedBlob = "%C3%BC/x.bin",
            ContentLength = 600,
            BlobType = "BlockBlob",
            BlobContentType = "text/plain; charset=utf-8",
            IfNoneMatch = "*",
        };
        var sts = SharedKeySigner.BuildStringToSign(p, "/myaccount", Date, "2021-08-06");
        Assert.Equal(
            "PUT\n\n\n600\n\n\n\n\n\n*\n\n\n" +
            "x-ms-blob-content-type:text/plain; charset=utf-8\nx-ms-blob-type:BlockBlob\n" +
            "x-ms-date:Fri, 21 Nov 2025 10:00:00 GMT\nx-ms-version:2021-08-06\n" +
            "/myaccount/data/%C3%BC/x.bin",
            sts);
        Assert.Equal("QneezjW0N2vFOAnO1/ogzypyG4l399L2/0KfxqXarRg=", Signature(sts));
    }

    [Fact]
    public void ListQuery_IsSortedAndDecoded_AndZeroLengthIsEmpty()
    {
        var p = new RequestParts
        {
            Method = "GET",
            Container = "data",
            Restype = "container",
            Comp = "list",
            Prefix = "a b/ü",
            Marker = "2!abc=",
            MaxResults = 2,
            ContentLength = 0,
        };
        var sts = SharedKeySigner.BuildStringToSign(p, "/devstoreaccount1/devstoreaccount1", Date, "2021-08-06");
        Assert.Equal(
            "GET\n\n\n\n\n\n\n\n\n\n\n\n" +
            "x-ms-date:Fri, 21 Nov 2025 10:00:00 GMT\nx-ms-version:2021-08-06\n" +
            "/devstoreaccount1/devstoreaccount1/data\ncomp:list\nmarker:2!abc=\nmaxresults:2\nprefix:a b/ü\nrestype:container",
            sts);
        Assert.Equal("w893+S46kQxrGVGkDkhU9OcraKxTDXtnIM8FWfx1+mA=", Signature(sts));
    }

    [Fact]
    public void Authorization_HasSharedKeyPrefix_AndLongStringsUseThePool()
    {
        var longText = new string('x', 5000) + "ü";
        var auth = SharedKeySigner.CreateAuthorization(longText, AzuriteKey, "SharedKey devstoreaccount1:");
        var expected = Convert.ToBase64String(HMACSHA256.HashData(AzuriteKey, Encoding.UTF8.GetBytes(longText)));
        Assert.Equal("SharedKey devstoreaccount1:" + expected, auth);
    }

    [Fact]
    public void Request_IsBuiltWithEncodedUrlAndSignedHeaders()
    {
        using var store = new BlobStore(StorageConnectionString.ForAzurite(10000));
        var p = new RequestParts { Method = "GET", Container = "data", Restype = "container", Comp = "list", Prefix = "a b/ü+&" };
        using var request = store.CreateRequest(HttpMethod.Get, p, null);
        Assert.Equal("http://127.0.0.1:10000/devstoreaccount1/data?restype=container&comp=list&prefix=a%20b%2F%C3%BC%2B%26",
            request.RequestUri!.AbsoluteUri);
        Assert.Equal("2021-08-06", request.Headers.GetValues("x-ms-version").Single());
        var date = request.Headers.GetValues("x-ms-date").Single();
        var sts = SharedKeySigner.BuildStringToSign(p, "/devstoreaccount1/devstoreaccount1", date, "2021-08-06");
        Assert.Equal("SharedKey devstoreaccount1:" + Signature(sts), request.Headers.GetValues("Authorization").Single());
    }

    [Fact]
    public void SasRequests_CarryTheTokenAndNoAuthorization()
    {
        using var store = new BlobStore("BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=sv=2021-08-06&sig=abc%3D");
        var p = new RequestParts { Method = "HEAD", Container = "data", EncodedBlob = "x/y.bin" };
        using var request = store.CreateRequest(HttpMethod.Head, p, null);
        Assert.Equal("https://acct.blob.core.windows.net/data/x/y.bin?sv=2021-08-06&sig=abc%3D", request.RequestUri!.AbsoluteUri);
        Assert.False(request.Headers.Contains("Authorization"));
        Assert.Equal(new Uri("https://acct.blob.core.windows.net/data/x/y.bin"), store.GetBlobUri("data", "x/y.bin"));
    }

    [Theory]
    [InlineData("plain.txt", "plain.txt")]
    [InlineData("dir/sub/file.bin", "dir/sub/file.bin")]
    [InlineData("with space/ü 日本.txt", "with%20space/%C3%BC%20%E6%97%A5%E6%9C%AC.txt")]
    [InlineData("a+b=c&d?e#f%g", "a%2Bb%3Dc%26d%3Fe%23f%25g")]
    [InlineData("emoji/😀", "emoji/%F0%9F%98%80")]
    [InlineData("trailing/", "trailing/")]
    public void BlobNames_AreEncodedPerSegment(string name, string expected)
    {
        Assert.Equal(expected, BlobNames.EncodePath(name));
    }

    [Theory]
    [InlineData("ab", "3 to 63")]
    [InlineData("UPPER", "lowercase")]
    [InlineData("under_score", "lowercase")]
    [InlineData("-leading", "start and end")]
    [InlineData("trailing-", "start and end")]
    [InlineData("double--dash", "start and end")]
    [InlineData("this-name-is-far-too-long-for-azure-blob-storage-containers-0123456789", "3 to 63")]
    public void InvalidContainerNames_AreRejectedNamingNameAndRule(string name, string rule)
    {
        using var store = new BlobStore(StorageConnectionString.ForAzurite(10000));
        var ex = Assert.Throws<ArgumentException>(() => store.GetBlobUri(name, "x"));
        Assert.Contains($"'{name}'", ex.Message, StringComparison.Ordinal);
        Assert.Contains(rule, ex.Message, StringComparison.Ordinal);
        Assert.Equal("container", ex.ParamName);
    }

    [Theory]
    [InlineData("abc")]
    [InlineData("a-b-c")]
    [InlineData("0123456789")]
    [InlineData("$root")]
    public void ValidContainerNames_AreAccepted(string name) => BlobNames.ValidateContainer(name);

    [Theory]
    [InlineData("", "1 to 1024")]
    [InlineData("a/../b", "'..'")]
    [InlineData("./a", "'.'")]
    [InlineData("bad\nname", "control")]
    public void InvalidBlobNames_AreRejected(string name, string rule)
    {
        var ex = Assert.Throws<ArgumentException>(() => BlobNames.ValidateBlob(name));
        Assert.Contains(rule, ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void LoneSurrogate_IsRejected()
    {
        var name = "lone" + (char)0xD800 + "surrogate"; // built at run time: attribute data cannot hold it
        var ex = Assert.Throws<ArgumentException>(() => BlobNames.ValidateBlob(name));
        Assert.Contains("surrogate", ex.Message, StringComparison.Ordinal);
        Assert.Contains("\\ud800", ex.Message, StringComparison.Ordinal);
    }

    private static string Signature(string sts)
    {
        Span<char> sig = stackalloc char[44];
        var n = SharedKeySigner.ComputeSignature(sts, AzuriteKey, sig);
        return sig[..n].ToString();
    }
}
