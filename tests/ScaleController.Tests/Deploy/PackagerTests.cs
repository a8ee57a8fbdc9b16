using System.IO.Compression;
using System.Security.Cryptography;
using FaaST.ScaleController.Deploy;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>The packager on real folders and real zip archives, including ones made to attack the extractor.</summary>
public sealed class PackagerTests : IDisposable
{
    private readonly TempDirectory _temp = new("faast-package-");

    public void Dispose() => _temp.Dispose();

    [Fact]
    public void ZipThenExtract_ReturnsEveryFileByteForByte()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        var binary = new byte[300_000];
        new Random(7).NextBytes(binary);
        Directory.CreateDirectory(Path.Combine(dir, "assets", "deep"));
        File.WriteAllBytes(Path.Combine(dir, "assets", "deep", "blob.bin"), binary);
        File.WriteAllBytes(Path.Combine(dir, "assets", "empty.txt"), []);

        var zip = new MemoryStream();
        Packager.Zip(dir, zip, includeSettings: true);
        zip.Position = 0;
        var target = Path.Combine(_temp.Path, "out");
        Packager.Extract(zip, target);

        Apps.AssertSameFiles(dir, target);
    }

    [Fact]
    public void A_package_leaves_the_apps_local_settings_out_as_Azures_publish_does()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        Directory.CreateDirectory(Path.Combine(dir, "data"));
        File.WriteAllText(Path.Combine(dir, "data", "local.settings.json"), "{}"); // a file of the app's own, not its settings

        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;
        using var archive = new ZipArchive(zip);

        Assert.DoesNotContain(archive.Entries, e => e.FullName == "local.settings.json");
        Assert.Contains(archive.Entries, e => e.FullName == "data/local.settings.json");
        Assert.Contains(archive.Entries, e => e.FullName == "host.json");
    }

    [Fact]
    public void Zip_IsDeterministic_WhateverTheFilesTimes()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        var first = new MemoryStream();
        Packager.Zip(dir, first);
        foreach (var file in Directory.GetFiles(dir, "*", SearchOption.AllDirectories))
            File.SetLastWriteTimeUtc(file, new DateTime(2031, 5, 6, 7, 8, 9, DateTimeKind.Utc));
        var second = new MemoryStream();
        Packager.Zip(dir, second);

        Assert.Equal(SHA256.HashData(first.ToArray()), SHA256.HashData(second.ToArray()));
        first.Position = 0;
        using var archive = new ZipArchive(first);
        var names = archive.Entries.Select(e => e.FullName).ToList();
        Assert.Equal(names.Order(StringComparer.Ordinal), names);
    }

    [Fact]
    public void Zip_LeavesOutTheRuntimesStateFolder()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        Directory.CreateDirectory(Path.Combine(dir, ".faast"));
        File.WriteAllText(Path.Combine(dir, ".faast", "keys.json"), "{}");

        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;
        using var archive = new ZipArchive(zip);

        Assert.DoesNotContain(archive.Entries, e => e.FullName.StartsWith(".faast", StringComparison.Ordinal));
        Assert.Contains(archive.Entries, e => e.FullName == "Hello/index.js");
    }

    [Fact]
    [System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
    public void Zip_KeepsTheExecutableBit()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        var tool = Path.Combine(dir, "tool.sh");
        File.WriteAllText(tool, "#!/bin/sh\n");
        File.SetUnixFileMode(tool, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);

        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;
        var target = Path.Combine(_temp.Path, "out");
        Packager.Extract(zip, target);

        Assert.True((File.GetUnixFileMode(Path.Combine(target, "tool.sh")) & UnixFileMode.UserExecute) != 0);
        Assert.True((File.GetUnixFileMode(Path.Combine(target, "host.json")) & UnixFileMode.UserExecute) == 0);
    }

    [Fact]
    public void Zip_RefusesALinkOutOfTheFolder_NamingIt()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        var secret = Path.Combine(_temp.Path, "secret.txt");
        File.WriteAllText(secret, "not for the package");
        File.CreateSymbolicLink(Path.Combine(dir, "Hello", "leak.txt"), secret);

        var e = Assert.Throws<PackageException>(() => Packager.Zip(dir, new MemoryStream()));

        Assert.Equal("Hello/leak.txt", e.Entry);
        Assert.Contains("outside the app folder", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Zip_PacksALinkInsideTheFolder_AsTheFileItNames()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.CreateSymbolicLink(Path.Combine(dir, "Hello", "same.js"), Path.Combine("..", "WordCount", "index.js"));

        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;
        var target = Path.Combine(_temp.Path, "out");
        Packager.Extract(zip, target);

        Assert.False(new FileInfo(Path.Combine(target, "Hello", "same.js")).LinkTarget is not null);
        Assert.Equal(File.ReadAllBytes(Path.Combine(dir, "WordCount", "index.js")), File.ReadAllBytes(Path.Combine(target, "Hello", "same.js")));
    }

    [Fact]
    public void Zip_RefusesAFolderLinkToItsOwnAncestor()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        Directory.CreateSymbolicLink(Path.Combine(dir, "Hello", "loop"), dir);

        var e = Assert.Throws<PackageException>(() => Packager.Zip(dir, new MemoryStream()));

        Assert.Equal("Hello/loop", e.Entry);
        Assert.Contains("cycle", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Zip_RefusesAFileOverTheCap_NamingItAndTheCap()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.WriteAllBytes(Path.Combine(dir, "big.bin"), new byte[5000]);

        var e = Assert.Throws<PackageException>(() => Packager.Zip(dir, new MemoryStream(), new DeployOptions { MaxFileBytes = 4096 }));

        Assert.Equal("big.bin", e.Entry);
        Assert.Contains("4096-byte cap", e.Reason, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("../evil.txt", "\"..\"")]
    [InlineData("a/../../evil.txt", "\"..\"")]
    [InlineData("/etc/evil.txt", "absolute")]
    [InlineData("C:/evil.txt", "absolute")]
    [InlineData("a\\..\\..\\evil.txt", "backslash")]
    [InlineData("a//b.txt", "empty path segment")]
    [InlineData("./a.txt", "\".\"")]
    public void Extract_RefusesAnEntryThatCouldEscape_NamingIt(string entry, string why)
    {
        var target = Path.Combine(_temp.Path, "out", "app");

        var e = Assert.Throws<PackageException>(() => Packager.Extract(Apps.Zip(("ok.txt", "fine"), (entry, "gotcha")), target));

        Assert.Equal(entry, e.Entry);
        Assert.Contains(why, e.Reason, StringComparison.Ordinal);
        Assert.False(File.Exists(Path.Combine(_temp.Path, "evil.txt")));
        Assert.False(File.Exists(Path.Combine(_temp.Path, "out", "evil.txt")));
    }

    [Fact]
    public void Extract_RefusesASymbolicLinkEntry()
    {
        const int symlink = (0xA000 | 0x1FF) << 16;
        var target = Path.Combine(_temp.Path, "out");

        var e = Assert.Throws<PackageException>(() => Packager.Extract(Apps.Zip(("passwd", "/etc/passwd", symlink)), target));

        Assert.Equal("passwd", e.Entry);
        Assert.Contains("symbolic link", e.Reason, StringComparison.Ordinal);
        Assert.False(File.Exists(Path.Combine(target, "passwd")));
    }

    [Fact]
    public void Extract_RefusesADuplicateEntry()
    {
        var e = Assert.Throws<PackageException>(() =>
            Packager.Extract(Apps.Zip(("host.json", "{}"), ("host.json", "{\"x\":1}")), Path.Combine(_temp.Path, "out")));

        Assert.Contains("twice", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Extract_StopsAnEntryThatInflatesPastTheCap()
    {
        var bomb = Apps.Zip(("zeros.txt", new string('0', 1 << 20)));

        var e = Assert.Throws<PackageException>(() =>
            Packager.Extract(bomb, Path.Combine(_temp.Path, "out"), new DeployOptions { MaxFileBytes = 64 << 10 }));

        Assert.Equal("zeros.txt", e.Entry);
    }

    [Fact]
    public void Extract_RefusesSomethingThatIsNotAZip()
    {
        var e = Assert.Throws<PackageException>(() =>
            Packager.Extract(new MemoryStream("this is not a zip"u8.ToArray()), Path.Combine(_temp.Path, "out")));

        Assert.Contains("not a zip", e.Reason, StringComparison.Ordinal);
    }
    [Fact]
    public void A_zip_whose_end_record_claims_ten_million_entries_is_refused_before_its_central_directory_is_parsed()
    {
        // A zip64 end record claiming 10,000,000 entries (and a central directory of 1 GiB at offset 0), found through
        // its locator and the classic end record's 0xFFFF: what a bomb of a central directory declares up front.
        var zip = new MemoryStream();
        var w = new BinaryWriter(zip);
        var zip64Record = zip.Position;
        w.Write(0x06064b50u);          // zip64 end of central directory
        w.Write(44UL);                 // size of the rest of the record
        w.Write((ushort)45);
        w.Write((ushort)45);
        w.Write(0u);                   // this disk
        w.Write(0u);                   // disk with the central directory
        w.Write(10_000_000UL);         // entries on this disk
        w.Write(10_000_000UL);         // entries in all
        w.Write(1UL << 30);            // central directory size
        w.Write(0UL);                  // its offset
        w.Write(0x07064b50u);          // zip64 locator
        w.Write(0u);
        w.Write((ulong)zip64Record);
        w.Write(1u);
        w.Write(0x06054b50u);          // classic end record: "see zip64"
        w.Write((ushort)0);
        w.Write((ushort)0);
        w.Write(ushort.MaxValue);
        w.Write(ushort.MaxValue);
        w.Write(uint.MaxValue);
        w.Write(uint.MaxValue);
        w.Write((ushort)0);
        w.Flush();
        zip.Position = 0;

        Assert.Equal(10_000_000, Packager.DeclaredEntries(zip));
        var e = Assert.Throws<PackageException>(() => Packager.Extract(zip, Path.Combine(_temp.Path, "out")));

        Assert.Contains("declares 10000000 entries in its end-of-central-directory record", e.Message, StringComparison.Ordinal);
        Assert.Equal(0, zip.Position);
    }

    [Fact]
    public void The_entry_count_of_an_ordinary_zip_is_read_from_its_end_record_and_a_count_over_the_cap_is_refused()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;
        int entries;
        using (var archive = new ZipArchive(zip, ZipArchiveMode.Read, leaveOpen: true))
            entries = archive.Entries.Count;
        zip.Position = 0;

        Assert.Equal(entries, Packager.DeclaredEntries(zip));
        var e = Assert.Throws<PackageException>(() => Packager.Extract(zip, Path.Combine(_temp.Path, "out"), new DeployOptions { MaxEntries = entries - 1 }));
        Assert.Contains($"declares {entries} entries", e.Message, StringComparison.Ordinal);
    }
}
