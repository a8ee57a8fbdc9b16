using System.Collections.Concurrent;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Text.Json;

namespace FaaST.Storage.Tests;

/// <summary>
/// Everything a managed identity needs, on loopback only: a self-signed certificate for an HTTPS Azurite with
/// <c>--oauth basic</c>, and an App Service token endpoint (IDENTITY_ENDPOINT / IDENTITY_HEADER) that hands out
/// JWTs Azurite accepts (issuer https://sts.windows.net/TENANT/, audience = the requested resource, valid now).
/// Shared by Storage.Tests and Runtime.Tests (linked).
/// </summary>
internal sealed class IdentityTestEnvironment : IAsyncDisposable
{
    private IdentityTestEnvironment(string directory, X509Certificate2 certificate, TokenEndpoint tokens, AzuriteProcess azurite)
    {
        Directory = directory;
        Certificate = certificate;
        Tokens = tokens;
        Azurite = azurite;
    }

    public string Directory { get; }

    /// <summary>The self-signed certificate Azurite serves (trust it with <see cref="BlobStoreOptions.TrustedCertificate"/>).</summary>
    public X509Certificate2 Certificate { get; }

    public TokenEndpoint Tokens { get; }

    public AzuriteProcess Azurite { get; }

    /// <summary>https://127.0.0.1:PORT/devstoreaccount1: the blob service URI of an identity-based connection.</summary>
    public Uri ServiceUri => Azurite.BlobEndpoint;

    /// <summary>Options that trust this environment's certificate, with short retries.</summary>
    public BlobStoreOptions Options(int retries = 2) => new()
    {
        TrustedCertificate = Certificate,
        MaxRetries = retries,
        RetryBaseDelay = TimeSpan.FromMilliseconds(20),
        RetryMaxDelay = TimeSpan.FromMilliseconds(200),
    };

    /// <summary>A SharedKey store on the same Azurite (to seed and check blobs without the identity).</summary>
    public BlobStore SharedKeyStore() => new(Azurite.ConnectionString, Options());

    public static async Task<IdentityTestEnvironment> StartAsync(string repoRoot)
    {
        var directory = Path.Combine(Path.GetTempPath(), "faast-identity-" + Guid.NewGuid().ToString("N")[..12]);
        System.IO.Directory.CreateDirectory(directory);
        var certificate = CreateCertificate(directory);
        var tokens = new TokenEndpoint();
        try
        {
            var azurite = await AzuriteProcess.StartAsync(repoRoot,
                https: new AzuriteHttps(Path.Combine(directory, "cert.pem"), Path.Combine(directory, "key.pem"), OAuth: true));
            return new IdentityTestEnvironment(directory, certificate, tokens, azurite);
        }
        catch
        {
            await tokens.DisposeAsync();
            certificate.Dispose();
            System.IO.Directory.Delete(directory, recursive: true);
            throw;
        }
    }

    /// <summary>The App Service variables that point a managed identity at <see cref="Tokens"/>.</summary>
    public IReadOnlyDictionary<string, string> IdentityVariables => new Dictionary<string, string>
    {
        ["IDENTITY_ENDPOINT"] = Tokens.Endpoint.AbsoluteUri,
        ["IDENTITY_HEADER"] = Tokens.Secret,
    };

    public async ValueTask DisposeAsync()
    {
        await Azurite.DisposeAsync();
        await Tokens.DisposeAsync();
        Certificate.Dispose();
        try
        {
            System.IO.Directory.Delete(Directory, recursive: true);
        }
        catch (IOException)
        {
        }
    }

    /// <summary>A self-signed certificate for 127.0.0.1 and localhost, written as cert.pem and key.pem.</summary>
    private static X509Certificate2 CreateCertificate(string directory)
    {
        using var key = RSA.Create(2048);
        var request = new CertificateRequest("CN=127.0.0.1", key, HashAlgorithmName.SHA256, RSASignaturePadding.Pkcs1);
        var names = new SubjectAlternativeNameBuilder();
        names.AddIpAddress(IPAddress.Loopback);
        names.AddDnsName("localhost");
        request.CertificateExtensions.Add(names.Build());
        request.CertificateExtensions.Add(new X509BasicConstraintsExtension(true, false, 0, true));
        request.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension([new Oid("1.3.6.1.5.5.7.3.1")], false));
        var certificate = request.CreateSelfSigned(DateTimeOffset.UtcNow.AddMinutes(-5), DateTimeOffset.UtcNow.AddDays(1));
        File.WriteAllText(Path.Combine(directory, "cert.pem"), certificate.ExportCertificatePem());
        File.WriteAllText(Path.Combine(directory, "key.pem"), key.ExportPkcs8PrivateKeyPem());
        return certificate;
    }
}

/// <summary>
/// An App Service managed-identity token endpoint on a loopback port: GET ?resource=...&amp;api-version=2019-08-01
/// with the X-IDENTITY-HEADER secret gets a JWT for that resource. <see cref="Mode"/> makes it fail or hang.
/// </summary>
internal sealed class TokenEndpoint : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly CancellationTokenSource _stop = new();
    private readonly ConcurrentQueue<string> _requests = new();
    private readonly Task _loop;
    private readonly byte[] _signingKey = RandomNumberGenerator.GetBytes(32);

    public TokenEndpoint()
    {
        _listener.Start();
        Endpoint = new Uri(string.Create(CultureInfo.InvariantCulture, $"http://127.0.0.1:{((IPEndPoint)_listener.LocalEndpoint).Port}/msi/token"));
        _loop = AcceptAsync();
    }

    public enum Behaviour
    {
        Serve,
        Fail,
        Hang,
    }

    public Uri Endpoint { get; }

    /// <summary>The X-IDENTITY-HEADER value a request must carry.</summary>
    public string Secret { get; } = Convert.ToHexString(RandomNumberGenerator.GetBytes(16));

    public Behaviour Mode { get; set; } = Behaviour.Serve;

    /// <summary>The request lines received, e.g. "GET /msi/token?api-version=...&amp;resource=... header-ok".</summary>
    public IReadOnlyList<string> Requests => _requests.ToArray();

    /// <summary>Tokens handed out.</summary>
    public int Issued => _issued;

    private int _issued;

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync();
        _listener.Stop();
        try
        {
            await _loop;
        }
        catch (Exception e) when (e is OperationCanceledException or SocketException or ObjectDisposedException)
        {
        }

        _stop.Dispose();
    }

    private async Task AcceptAsync()
    {
        while (!_stop.IsCancellationRequested)
        {
            var client = await _listener.AcceptTcpClientAsync(_stop.Token);
            _ = ServeAsync(client);
        }
    }

    private async Task ServeAsync(TcpClient client)
    {
        using (client)
        {
            try
            {
                var stream = client.GetStream();
                using var reader = new StreamReader(stream, Encoding.ASCII, leaveOpen: true);
                var requestLine = await reader.ReadLineAsync(_stop.Token) ?? string.Empty;
                string? secret = null;
                for (var line = await reader.ReadLineAsync(_stop.Token); !string.IsNullOrEmpty(line); line = await reader.ReadLineAsync(_stop.Token))
                {
                    var colon = line.IndexOf(':', StringComparison.Ordinal);
                    if (colon > 0 && line[..colon].Trim().Equals("X-IDENTITY-HEADER", StringComparison.OrdinalIgnoreCase))
                    {
                        secret = line[(colon + 1)..].Trim();
                    }
                }

                var headerOk = secret == Secret;
                _requests.Enqueue(requestLine + (headerOk ? " header-ok" : " header-wrong"));
                var (status, body) = Mode switch
                {
                    Behaviour.Hang => (0, string.Empty),
                    Behaviour.Fail => (500, """{"error":"unavailable","error_description":"the test's token endpoint is failing on purpose"}"""),
                    _ when !headerOk => (401, """{"error":"unauthorized","error_description":"X-IDENTITY-HEADER is wrong"}"""),
                    _ => (200, Token(requestLine)),
                };
                if (status == 0)
                {
                    await Task.Delay(Timeout.Infinite, _stop.Token);
                    return;
                }

                var bytes = Encoding.UTF8.GetBytes(body);
                var head = string.Create(CultureInfo.InvariantCulture,
                    $"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {bytes.Length}\r\nConnection: close\r\n\r\n");
                await stream.WriteAsync(Encoding.ASCII.GetBytes(head), _stop.Token);
                await stream.WriteAsync(bytes, _stop.Token);
                await stream.FlushAsync(_stop.Token);
            }
            catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
            {
            }
        }
    }

    /// <summary>The App Service response: a JWT whose audience is the requested resource, valid for an hour.</summary>
    private string Token(string requestLine)
    {
        var target = requestLine.Split(' ') is { Length: > 1 } parts ? parts[1] : "/";
        var query = System.Web.HttpUtility.ParseQueryString(new Uri(new Uri("http://x"), target).Query);
        var resource = query["resource"] ?? "https://storage.azure.com";
        var now = DateTimeOffset.UtcNow.ToUnixTimeSeconds();
        var expires = now + 3600;
        var tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47";
        var header = Base64Url("""{"alg":"HS256","typ":"JWT"}""");
        var payload = Base64Url(JsonSerializer.Serialize(new Dictionary<string, object>
        {
            ["aud"] = resource,
            ["iss"] = $"https://sts.windows.net/{tenant}/",
            ["iat"] = now,
            ["nbf"] = now - 60,
            ["exp"] = expires,
            ["oid"] = "11059fcc-5514-4800-b5f8-49808b9cfab6",
            ["tid"] = tenant,
            ["appid"] = query["client_id"] ?? "system-assigned",
        }));
        var signature = Convert.ToBase64String(HMACSHA256.HashData(_signingKey, Encoding.ASCII.GetBytes(header + "." + payload)))
            .TrimEnd('=').Replace('+', '-').Replace('/', '_');
        Interlocked.Increment(ref _issued);
        return JsonSerializer.Serialize(new Dictionary<string, string>
        {
            ["access_token"] = header + "." + payload + "." + signature,
            ["expires_on"] = expires.ToString(CultureInfo.InvariantCulture),
            ["resource"] = resource,
            ["token_type"] = "Bearer",
            ["client_id"] = query["client_id"] ?? "00000000-0000-0000-0000-000000000000",
        });
    }

    private static string Base64Url(string json) =>
        Convert.ToBase64String(Encoding.UTF8.GetBytes(json)).TrimEnd('=').Replace('+', '-').Replace('/', '_');
}

/// <summary>Sets environment variables of this process for one test and puts back what was there.</summary>
internal sealed class EnvironmentScope : IDisposable
{
    private readonly Dictionary<string, string?> _previous = new();

    public EnvironmentScope(IReadOnlyDictionary<string, string?> variables)
    {
        foreach (var (name, value) in variables)
        {
            _previous[name] = Environment.GetEnvironmentVariable(name);
            Environment.SetEnvironmentVariable(name, value);
        }
    }

    public void Dispose()
    {
        foreach (var (name, value) in _previous)
        {
            Environment.SetEnvironmentVariable(name, value);
        }
    }
}
