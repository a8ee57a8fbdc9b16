using System.Net.Http.Headers;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// Sends the platform's admin key (Authorization: Bearer) on requests to its admin API (/admin/platform...) and on no
/// other: a function must not see the operator's key in the requests tests make of it.
/// </summary>
internal sealed class AdminKey(string key) : DelegatingHandler(new HttpClientHandler())
{
    protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken cancellationToken)
    {
        if (request.RequestUri?.AbsolutePath.StartsWith("/admin/platform", StringComparison.Ordinal) == true && request.Headers.Authorization is null)
            request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        return base.SendAsync(request, cancellationToken);
    }

    /// <summary>A client of <paramref name="baseAddress"/> that sends <paramref name="key"/> to the admin API only.</summary>
    public static HttpClient Client(Uri baseAddress, string key, TimeSpan? timeout = null) =>
        new(new AdminKey(key)) { BaseAddress = baseAddress, Timeout = timeout ?? TimeSpan.FromSeconds(60) };

    /// <summary>The admin key a local platform published for <paramref name="url"/> (as the CLI finds it).</summary>
    public static string Published(string url) =>
        ScaleController.Platform.LocalCredentials.Find(Repo.Root, new Uri(url))
        ?? throw new InvalidOperationException($"no admin key published for {url} under {Repo.Root}/.faast/credentials");
}
