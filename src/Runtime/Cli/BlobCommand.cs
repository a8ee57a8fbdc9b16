using System.Globalization;
using FaaST.Storage;

namespace FaaST.Runtime.Cli;

/// <summary>
/// `./faast blob ls|put|get APPDIR ...`: the app's own storage from the command line, so a newcomer can give a
/// function input and read what it wrote. The storage is the one `./faast start APPDIR` uses: the
/// AzureWebJobsStorage connection of the app's settings (local.settings.json, overridden by the environment),
/// or, for development storage, the Azurite of the running host, found through
/// <see cref="DevelopmentStorageFile"/>.
/// </summary>
public static class BlobCommand
{
    public const string Usage =
        "usage: faast blob ls APPDIR CONTAINER[/PREFIX] | faast blob put APPDIR CONTAINER/BLOB [FILE|-] | faast blob get APPDIR CONTAINER/BLOB [FILE|-]";

    /// <summary>Exit codes: 0 done, 1 no such blob or container, 2 bad arguments, 3 bad app settings,
    /// 4 no storage to reach (no running host for development storage), 5 storage failed.</summary>
    public static async Task<int> RunAsync(IReadOnlyList<string> args, TextWriter output, TextWriter error,
        Func<Stream> standardInput, Func<Stream> standardOutput, CancellationToken ct)
    {
        if (args.Count < 3 || args[0] is not ("ls" or "put" or "get") || args.Count > 4 || (args[0] == "ls" && args.Count > 3))
        {
            await error.WriteLineAsync("faast: blob needs ls, put or get, an app directory and a container or blob path");
            await error.WriteLineAsync(Usage);
            return 2;
        }
        var (verb, app, path) = (args[0], Path.GetFullPath(args[1]), args[2]);
        var file = args.Count > 3 && args[3] != "-" ? args[3] : null;
        if (!Directory.Exists(app))
            return await Fail(error, 2, $"app directory {app} does not exist");
        var slash = path.IndexOf('/', StringComparison.Ordinal);
        var container = slash < 0 ? path : path[..slash];
        var blob = slash < 0 ? "" : path[(slash + 1)..];
        try
        {
            BlobNames.ValidateContainer(container);
            if (verb != "ls")
            {
                if (blob.Length == 0)
                    return await Fail(error, 2, $"\"{path}\" names no blob: give CONTAINER/BLOB, e.g. pipeline-raw/a.txt");
                BlobNames.ValidateBlob(blob);
            }
        }
        catch (ArgumentException e)
        {
            return await Fail(error, 2, $"\"{path}\": {e.Message.Split(" (Parameter", 2)[0]}");
        }

        AppSettings settings;
        try
        {
            settings = AppSettings.Load(app);
        }
        catch (AppConfigException e)
        {
            return await Fail(error, 3, $"the app's settings cannot be read: {e.Message}");
        }
        string? development = null;
        if (StorageAccounts.NeedsDevelopmentStorage(settings))
        {
            development = DevelopmentStorageFile.Read(app, out var problem);
            if (development is null)
                return await Fail(error, 4, $"{app} uses development storage (AzureWebJobsStorage is unset or UseDevelopmentStorage=true), " +
                    $"whose Azurite runs only while `./faast start {args[1]}` does, and {problem}; start the app first (in another terminal)");
        }
        else if (StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage") is { } problem)
        {
            return await Fail(error, 3, problem);
        }

        using var accounts = new StorageAccounts(settings, development, new BlobStoreOptions { MaxRetries = 1 });
        try
        {
            var store = accounts.Get("AzureWebJobsStorage");
            switch (verb)
            {
                case "ls":
                    var count = 0;
                    await foreach (var item in store.ListAsync(container, blob.Length == 0 ? null : blob, ct))
                    {
                        await output.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                            $"{item.Properties.Length,12}  {item.Properties.LastModified.UtcDateTime:yyyy-MM-dd HH:mm:ss}  {container}/{item.Name}"));
                        count++;
                    }
                    await error.WriteLineAsync(string.Create(CultureInfo.InvariantCulture, $"faast: {count} blob(s) in {path}"));
                    return 0;
                case "put":
                    await store.CreateContainerIfNotExistsAsync(container, ct);
                    BlobProperties written;
                    if (file is not null)
                    {
                        if (!File.Exists(file))
                            return await Fail(error, 2, $"file {file} does not exist");
                        await using var source = File.OpenRead(file);
                        written = await store.UploadAsync(container, blob, source, source.Length, ct: ct);
                    }
                    else
                    {
                        // Standard input has no length to announce: read it whole first.
                        using var buffer = new MemoryStream();
                        await using (var stdin = standardInput())
                            await stdin.CopyToAsync(buffer, ct);
                        written = await store.UploadAsync(container, blob, buffer.GetBuffer().AsMemory(0, (int)buffer.Length), ct: ct);
                    }
                    await output.WriteLineAsync(string.Create(CultureInfo.InvariantCulture, $"put {container}/{blob}: {written.Length} bytes, ETag {written.ETag}"));
                    return 0;
                default: // get
                    BlobProperties? read;
                    if (file is not null)
                    {
                        // Into a temporary file first: a missing blob or a failure leaves no half file under the name asked for.
                        var temp = file + ".faast-" + Environment.ProcessId.ToString(CultureInfo.InvariantCulture) + ".tmp";
                        try
                        {
                            await using (var target = File.Create(temp))
                                read = await store.DownloadToAsync(container, blob, target, ct: ct);
                            if (read is not null)
                                File.Move(temp, file, overwrite: true);
                        }
                        finally
                        {
                            File.Delete(temp);
                        }
                    }
                    else
                    {
                        await using var stdout = standardOutput();
                        read = await store.DownloadToAsync(container, blob, stdout, ct: ct);
                    }
                    if (read is null)
                        return await Fail(error, 1, $"there is no blob {container}/{blob} in {store.Endpoint}");
                    await error.WriteLineAsync(string.Create(CultureInfo.InvariantCulture, $"faast: got {container}/{blob}: {read.Length} bytes, ETag {read.ETag}"));
                    return 0;
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            return await Fail(error, 1, $"there is no container {container} in the app's storage ({e.ErrorCode ?? "404"})");
        }
        catch (Exception e) when (e is BlobStorageException or StorageUnavailableException)
        {
            return await Fail(error, 5, $"{verb} {path} failed: {e.Message}");
        }
        catch (AppConfigException e)
        {
            return await Fail(error, 3, e.Message);
        }
    }

    private static async Task<int> Fail(TextWriter error, int code, string message)
    {
        await error.WriteLineAsync("faast: " + message);
        return code;
    }
}
