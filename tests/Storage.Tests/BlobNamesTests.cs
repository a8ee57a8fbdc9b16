namespace FaaST.Storage.Tests;

/// <summary>Container and blob names: checked before any request, and encoded per path segment in blob URIs.</summary>
public class BlobNamesTests
{
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
}
