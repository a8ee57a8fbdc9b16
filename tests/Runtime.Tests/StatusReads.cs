using System.Net.Http.Json;
using FaaST.Hosting.Status;

namespace FaaST.Runtime.Tests;

/// <summary>Reads the admin endpoints into the status contract's records (the host writes the same ones).</summary>
internal static class StatusReads
{
    public static async Task<HostStatus> GetHostStatusAsync(this HttpClient http, Uri? instance = null) =>
        await http.GetFromJsonAsync(Address(instance, "admin/host/status"), StatusJsonContext.Default.HostStatus)
            ?? throw new InvalidOperationException("/admin/host/status answered null");

    public static async Task<CacheStatus> GetCacheStatusAsync(this HttpClient http, Uri? instance = null) =>
        await http.GetFromJsonAsync(Address(instance, "admin/cache"), StatusJsonContext.Default.CacheStatus)
            ?? throw new InvalidOperationException("/admin/cache answered null");

    private static Uri Address(Uri? instance, string path) =>
        instance is null ? new Uri("/" + path, UriKind.Relative) : new Uri(instance, path);
}
