using System.Net;
using System.Net.Sockets;

namespace FaaST.Storage.Tests;

public class AzuriteProcessTests
{
    [Fact]
    public void FindRepoRoot_WalksUpToThePackageJson()
    {
        var root = AzuriteProcess.FindRepoRoot(AppContext.BaseDirectory);
        Assert.True(File.Exists(Path.Combine(root, "package.json")) || File.Exists(Path.Combine(root, "FaaST.sln")));
        Assert.True(File.Exists(AzuriteProcess.LauncherPath(root)), "run npm ci in " + root);
        Assert.Throws<DirectoryNotFoundException>(() => AzuriteProcess.FindRepoRoot(Path.GetPathRoot(root)));
    }

    [Fact]
    public async Task MissingLauncher_SaysRunNpmCi()
    {
        using var empty = new TempDirectory("faast-noazurite-");
        var ex = await Assert.ThrowsAsync<FileNotFoundException>(() => AzuriteProcess.StartAsync(empty.Path));
        Assert.Contains("npm ci", ex.Message, StringComparison.Ordinal);
        Assert.Contains(empty.Path, ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task FixedPortInUse_FailsClearly()
    {
        using var squatter = new TcpListener(IPAddress.Loopback, 0);
        squatter.Start();
        var port = ((IPEndPoint)squatter.LocalEndpoint).Port;
        var ex = await Assert.ThrowsAsync<InvalidOperationException>(
            () => AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot, port, TimeSpan.FromSeconds(20)));
        Assert.Contains("in use", ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Dispose_KillsTheProcess_AndThePortCloses()
    {
        var azurite = await AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot);
        var port = azurite.Port;
        Assert.False(azurite.HasExited);
        azurite.Dispose();
        Assert.True(azurite.HasExited);
        using var client = new TcpClient();
        await Assert.ThrowsAnyAsync<SocketException>(() => client.ConnectAsync(IPAddress.Loopback, port));
    }

    [Fact]
    public async Task Azurite_listens_on_the_address_it_is_given_and_its_connection_string_names_that_address()
    {
        // 127.0.0.2 is on lo like 127.0.0.1 but a different address: what the shaped network's storage address
        // (bench/net/cloudnet.sh) needs, without root.
        var address = IPAddress.Parse("127.0.0.2");
        await using var azurite = await AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot, listenAddress: address);
        var container = new Azure.Storage.Blobs.BlobContainerClient(azurite.ConnectionString, "listen");
        await container.CreateAsync();
        await container.GetBlobClient("a").UploadAsync(BinaryData.FromString("on 127.0.0.2"));

        Assert.Equal("127.0.0.2", azurite.BlobEndpoint.Host);
        Assert.Equal("on 127.0.0.2", (await container.GetBlobClient("a").DownloadContentAsync()).Value.Content.ToString());
        using var client = new TcpClient();
        await Assert.ThrowsAnyAsync<SocketException>(() => client.ConnectAsync(IPAddress.Loopback, azurite.Port));
    }
}
