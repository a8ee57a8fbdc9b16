using System.IO.Compression;
using FaaST.ScaleController.Deploy;
using FaaST.Storage;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>The deploy tests that need blob storage share one real Azurite; each test uses app names of its own.</summary>
[CollectionDefinition(Name)]
public sealed class DeployCollection : ICollectionFixture<AzuriteFixture>
{
    public const string Name = "Deploy on Azurite";
}

internal static class Apps
{
    /// <summary>Validation sees the app's own files only, not whatever the test process's environment holds.</summary>
    public static readonly IReadOnlyDictionary<string, string> NoEnvironment = new Dictionary<string, string>();

    public static readonly DeployOptions Options = new() { ValidationEnvironment = NoEnvironment };

    /// <summary>The platform's keys the tests' stores sign and verify records with (one set: a restarted store reads what another wrote).</summary>
    public static readonly FaaST.ScaleController.Platform.PlatformKeys Keys = FaaST.ScaleController.Platform.PlatformKeys.Ephemeral();

    /// <summary>A copy of samples/SAMPLE in <paramref name="parent"/>, in a folder named <paramref name="name"/>.</summary>
    public static string CopySample(string sample, string parent, string? name = null) =>
        Repo.CopySample(sample, Path.Combine(parent, name ?? sample));

    public static void CopyDirectory(string from, string to)
    {
        Directory.CreateDirectory(to);
        foreach (var file in Directory.GetFiles(from))
            File.Copy(file, Path.Combine(to, Path.GetFileName(file)));
        foreach (var dir in Directory.GetDirectories(from))
            CopyDirectory(dir, Path.Combine(to, Path.GetFileName(dir)));
    }

    /// <summary>Every file under <paramref name="root"/> by '/'-separated relative path, with its bytes.</summary>
    public static SortedDictionary<string, byte[]> Files(string root) =>
        new(Directory.GetFiles(root, "*", SearchOption.AllDirectories)
            .ToDictionary(f => Path.GetRelativePath(root, f).Replace('\\', '/'), File.ReadAllBytes), StringComparer.Ordinal);

    public static void AssertSameFiles(string expectedRoot, string actualRoot)
    {
        var expected = Files(expectedRoot);
        var actual = Files(actualRoot);
        Assert.Equal(expected.Keys, actual.Keys);
        foreach (var (path, bytes) in expected)
            Assert.True(bytes.AsSpan().SequenceEqual(actual[path]), $"{path} differs after the round trip");
    }

    /// <summary>A zip made entry by entry, as an attacker would write it.</summary>
    public static MemoryStream Zip(params (string Name, string Content)[] entries) => Zip(entries.Select(e => (e.Name, e.Content, 0)).ToArray());

    public static MemoryStream Zip(params (string Name, string Content, int ExternalAttributes)[] entries)
    {
        var stream = new MemoryStream();
        using (var zip = new ZipArchive(stream, ZipArchiveMode.Create, leaveOpen: true))
        {
            foreach (var (name, content, attributes) in entries)
            {
                var entry = zip.CreateEntry(name);
                if (attributes != 0)
                    entry.ExternalAttributes = attributes;
                using var writer = new StreamWriter(entry.Open());
                writer.Write(content);
            }
        }

        stream.Position = 0;
        return stream;
    }

    /// <summary>What storage holds for <paramref name="app"/>: every blob under its folder with its ETag, and app.json's bytes.</summary>
    public static async Task<(List<string> Blobs, string? Record)> SnapshotAsync(IBlobStore store, string app)
    {
        var blobs = new List<string>();
        try
        {
            await foreach (var item in store.ListAsync(DeploymentStore.Container, app + "/"))
                blobs.Add($"{item.Name} {item.Properties.ETag} {item.Properties.Length}");
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // no container yet: nothing deployed
        }

        var record = await store.DownloadAsync(DeploymentStore.Container, DeploymentStore.RecordBlob(app));
        return (blobs, record is null ? null : System.Text.Encoding.UTF8.GetString(record.Data));
    }

    public static string NewName(string prefix) => $"{prefix}-{Guid.NewGuid():N}"[..(prefix.Length + 13)];
}
