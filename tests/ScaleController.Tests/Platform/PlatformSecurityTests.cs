using System.Collections.Concurrent;
using System.Net;
using System.Net.Http.Headers;
using System.Net.Http.Json;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using FaaST.Peers;
using FaaST.Protos.Scale;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using Grpc.Core;
using Grpc.Net.Client;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// Issue 19 against a real platform (real Kestrel, real Azurite, real instances): who may deploy and read the admin API
/// (defect 1), the limits one request meets (defect 6), and the control port's checks (defect 10). Each test failed
/// before its fix: the platform deployed anything anyone sent, from anywhere.
/// </summary>
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class PlatformSecurityTests : IAsyncLifetime
{
    private PlatformTestBed _bed = null!;

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("platform-sec");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private Task<PlatformHost> StartPlatformAsync(Func<PlatformOptions, PlatformOptions>? configure = null)
    {
        var options = _bed.Options();
        return _bed.StartPlatformAsync(configure?.Invoke(options) ?? options,
            logging: l => l.ClearProviders().AddProvider(new QueueLogger(_bed.Lines)));
    }

    private string CopySample(string name) => _bed.CopyApp("python-app", name);

    private static byte[] Zip(string directory)
    {
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip);
        return zip.ToArray();
    }

    private string Output => _bed.Tail(60);

    /// <summary>A client that sends exactly the headers a test sets (no admin key of its own).</summary>
    private static HttpClient Bare(Uri address) => new() { BaseAddress = address, Timeout = TimeSpan.FromSeconds(60) };

    /// <summary>A client of the control port: HTTP/2 with prior knowledge, as it only speaks that in cleartext.</summary>
    private static HttpClient Control(Uri address) => new()
    {
        BaseAddress = address,
        Timeout = TimeSpan.FromSeconds(60),
        DefaultRequestVersion = HttpVersion.Version20,
        DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
    };

    /// <summary>A request message for the control port (a message's own version is 1.1 whatever the client's default).</summary>
    private static HttpRequestMessage H2(HttpRequestMessage request)
    {
        request.Version = HttpVersion.Version20;
        request.VersionPolicy = HttpVersionPolicy.RequestVersionExact;
        return request;
    }

    private static HttpRequestMessage Deploy(string app, byte[] zip, string? key, HttpMethod? method = null)
    {
        var request = new HttpRequestMessage(method ?? HttpMethod.Put, $"admin/platform/apps/{app}") { Content = new ByteArrayContent(zip) };
        if (key is not null)
            request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        return request;
    }

    private static async Task<PlatformStatus> StatusAsync(PlatformHost platform)
    {
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        return (await admin.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus))!;
    }

    private static async Task<PlatformError> ErrorOf(HttpResponseMessage response) =>
        (await response.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError))!;

    [Fact]
    public async Task A_deploy_without_a_key_is_401_on_the_frontend_and_on_the_control_port_and_deploys_nothing()
    {
        var platform = await StartPlatformAsync();
        var zip = Zip(CopySample("intruder"));
        using var frontend = Bare(platform.Address);
        using var control = Control(platform.ControlAddress);

        using var put = await frontend.SendAsync(Deploy("intruder", zip, key: null));
        using var post = await frontend.SendAsync(Deploy("intruder", zip, key: null, HttpMethod.Post));
        using var onControl = await control.SendAsync(H2(Deploy("intruder", zip, key: null)));

        foreach (var response in new[] { put, post, onControl })
        {
            Assert.True(response.StatusCode == HttpStatusCode.Unauthorized, $"{response.RequestMessage?.RequestUri} {response.Version} {response.StatusCode}: {await response.Content.ReadAsStringAsync()}");
            Assert.Equal("Bearer", response.Headers.WwwAuthenticate.Single().Scheme);
            Assert.Contains("Authorization: Bearer KEY", (await ErrorOf(response)).Error, StringComparison.Ordinal);
        }
        Assert.Empty((await StatusAsync(platform)).Apps);
        using var store = new Storage.BlobStore(_bed.Azurite.ConnectionString);
        Assert.Empty(await new DeploymentStore(store, PlatformKeys.Ephemeral()).ListAppsAsync());
        Assert.Contains(_bed.Lines, l => l.Contains("Refused PUT /admin/platform/apps/intruder from 127.0.0.1: 401", StringComparison.Ordinal));
    }

    [Fact]
    public async Task The_admin_api_without_a_key_is_401_with_a_wrong_key_403_and_with_the_admin_key_answers_on_both_ports()
    {
        var platform = await StartPlatformAsync();
        using var frontend = Bare(platform.Address);
        using var control = Control(platform.ControlAddress);

        using var none = await frontend.GetAsync("admin/platform");
        using var wrong = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        wrong.Headers.Authorization = new AuthenticationHeaderValue("Bearer", PlatformKeys.NewKeyText());
        using var wrongAnswer = await frontend.SendAsync(wrong);
        using var deployKey = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        deployKey.Headers.Authorization = new AuthenticationHeaderValue("Bearer", platform.Keys.DeployKeyOf("someapp"));
        using var deployKeyAnswer = await frontend.SendAsync(deployKey);
        using var noneOnControl = await control.GetAsync("admin/platform");
        using var good = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        good.Headers.Authorization = new AuthenticationHeaderValue("Bearer", platform.Keys.AdminKey);
        using var goodOnControl = await control.SendAsync(H2(good));

        Assert.Equal(HttpStatusCode.Unauthorized, none.StatusCode);
        Assert.Equal(HttpStatusCode.Forbidden, wrongAnswer.StatusCode);
        Assert.Contains("not the platform's admin key", (await ErrorOf(wrongAnswer)).Error, StringComparison.Ordinal);
        Assert.Equal(HttpStatusCode.Forbidden, deployKeyAnswer.StatusCode);
        Assert.Equal(HttpStatusCode.Unauthorized, noneOnControl.StatusCode);
        Assert.True(goodOnControl.StatusCode == HttpStatusCode.OK, $"{goodOnControl.StatusCode}: {await goodOnControl.Content.ReadAsStringAsync()}");
        Assert.Equal(platform.Address, (await StatusAsync(platform)).Address);
    }

    [Fact]
    public async Task An_apps_deploy_key_deploys_that_app_only_and_only_the_admin_key_reads_it()
    {
        var platform = await StartPlatformAsync();
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        var keyA = (await admin.GetFromJsonAsync("admin/platform/apps/tenant-a/deploy-key", PlatformJsonContext.Default.DeployKeyResult))!;
        Assert.Equal(("tenant-a", platform.Keys.DeployKeyOf("tenant-a")), (keyA.App, keyA.DeployKey));
        using var frontend = Bare(platform.Address);

        using var asB = await frontend.SendAsync(Deploy("tenant-b", Zip(CopySample("tenant-b")), keyA.DeployKey));
        using var readKeyWithDeployKey = new HttpRequestMessage(HttpMethod.Get, "admin/platform/apps/tenant-a/deploy-key");
        readKeyWithDeployKey.Headers.Authorization = new AuthenticationHeaderValue("Bearer", keyA.DeployKey);
        using var keyRefused = await frontend.SendAsync(readKeyWithDeployKey);
        using var asA = await frontend.SendAsync(Deploy("tenant-a", Zip(CopySample("tenant-a")), keyA.DeployKey));

        Assert.Equal(HttpStatusCode.Forbidden, asB.StatusCode);
        Assert.Contains("app \"tenant-b\"'s deploy key", (await ErrorOf(asB)).Error, StringComparison.Ordinal);
        Assert.Equal(HttpStatusCode.Forbidden, keyRefused.StatusCode);
        Assert.True(asA.StatusCode == HttpStatusCode.Created, $"{asA.StatusCode}: {await asA.Content.ReadAsStringAsync()}\n{Output}");
        Assert.Equal(["tenant-a"], (await StatusAsync(platform)).Apps.Select(a => a.App));
    }

    [Fact]
    public async Task A_cross_site_request_and_a_foreign_host_are_403_on_the_admin_api_even_with_the_admin_key()
    {
        var platform = await StartPlatformAsync();
        using var frontend = Bare(platform.Address);
        var key = platform.Keys.AdminKey;

        // What a web page can send without a preflight: a "simple" POST, text/plain, with its own Origin.
        using var page = Deploy("webpage", Zip(CopySample("webpage")), key, HttpMethod.Post);
        page.Content!.Headers.ContentType = new MediaTypeHeaderValue("text/plain");
        page.Headers.Add("Origin", "http://evil.example");
        using var fromPage = await frontend.SendAsync(page);
        using var fetch = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        fetch.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        fetch.Headers.Add("Sec-Fetch-Site", "cross-site");
        using var fromFetch = await frontend.SendAsync(fetch);
        // DNS rebinding: the page's own name, now resolving to this machine.
        using var rebound = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        rebound.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        rebound.Headers.Host = $"evil.example:{platform.Address.Port}";
        using var fromRebound = await frontend.SendAsync(rebound);
        // A loopback name, and the platform's own origin, pass.
        using var byName = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        byName.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        byName.Headers.Host = $"localhost:{platform.Address.Port}";
        using var fromName = await frontend.SendAsync(byName);

        Assert.Equal(HttpStatusCode.Forbidden, fromPage.StatusCode);
        Assert.Contains("Origin: http://evil.example", (await ErrorOf(fromPage)).Error, StringComparison.Ordinal);
        Assert.Equal(HttpStatusCode.Forbidden, fromFetch.StatusCode);
        Assert.Equal(HttpStatusCode.Forbidden, fromRebound.StatusCode);
        Assert.Contains("Host \"evil.example\"", (await ErrorOf(fromRebound)).Error, StringComparison.Ordinal);
        Assert.Equal(HttpStatusCode.OK, fromName.StatusCode);
        using var same = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        same.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        same.Headers.Add("Origin", $"http://127.0.0.1:{platform.Address.Port}");
        same.Headers.Add("Sec-Fetch-Site", "same-origin");
        using var fromSame = await frontend.SendAsync(same);
        Assert.Equal(HttpStatusCode.OK, fromSame.StatusCode);
        Assert.Empty((await StatusAsync(platform)).Apps);
    }

    [Fact]
    public async Task An_admin_host_given_by_the_operator_is_answered_and_the_404_of_an_unknown_path_names_no_app()
    {
        var platform = await StartPlatformAsync(o => o with { AllowedAdminHosts = ["platform.example"] });
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        using (var deployed = await admin.PutAsync("admin/platform/apps/hiddenapp", new ByteArrayContent(Zip(CopySample("hiddenapp")))))
            Assert.True(deployed.IsSuccessStatusCode, $"{await deployed.Content.ReadAsStringAsync()}\n{Output}");
        using var named = new HttpRequestMessage(HttpMethod.Get, "admin/platform");
        named.Headers.Host = "platform.example";
        using var namedAnswer = await admin.SendAsync(named);

        using var frontend = Bare(platform.Address);
        using var unknown = await frontend.GetAsync("nosuchapp/api/Hello");
        var body = await unknown.Content.ReadAsStringAsync();

        Assert.Equal(HttpStatusCode.OK, namedAnswer.StatusCode);
        Assert.Equal(HttpStatusCode.NotFound, unknown.StatusCode);
        Assert.DoesNotContain("hiddenapp", body, StringComparison.Ordinal);
        Assert.DoesNotContain(platform.ControlAddress.Port.ToString(System.Globalization.CultureInfo.InvariantCulture), body, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_admin_key_is_published_for_the_cli_while_the_platform_runs_and_removed_when_it_stops()
    {
        var platform = await StartPlatformAsync();
        var file = LocalCredentials.PathFor(Repo.Root, platform.Address);

        Assert.Equal(platform.Keys.AdminKey, LocalCredentials.Find(Repo.Root, platform.Address));
        Assert.Equal(platform.Keys.AdminKey, File.ReadAllText(PlatformKeys.AdminKeyFile(_bed.StatePath)).Trim());
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite, File.GetUnixFileMode(file));
        await platform.DisposeAsync();
        Assert.False(File.Exists(file), file);
    }

    // ---- defect 6: limits ----------------------------------------------------------------------------

    [Fact]
    public async Task A_package_over_the_size_cap_is_413_from_its_content_length_and_nothing_is_deployed()
    {
        var platform = await StartPlatformAsync(o => o with { Deploy = new DeployOptions { MaxPackageBytes = 64 << 10 } });
        using var frontend = Bare(platform.Address);
        var big = new byte[1 << 20];
        using var request = Deploy("toobig", big, platform.Keys.AdminKey);
        request.Headers.ExpectContinue = true; // the answer comes before the body: none of it is sent

        using var response = await frontend.SendAsync(request);

        Assert.Equal(HttpStatusCode.RequestEntityTooLarge, response.StatusCode);
        Assert.Contains("65536-byte cap", (await ErrorOf(response)).Error, StringComparison.Ordinal);
        Assert.Empty((await StatusAsync(platform)).Apps);
    }

    [Fact]
    public async Task A_second_deploy_of_an_app_in_progress_is_409_one_over_the_platforms_capacity_is_503_and_work_files_are_private()
    {
        // Left by a crash: removed at start.
        var work = Path.Combine(_bed.StatePath, "work");
        Directory.CreateDirectory(Path.Combine(work, "faast-deploy-left-over"));
        File.WriteAllText(Path.Combine(work, "faast-deploy-left-over", "package.zip"), "old");
        var platform = await StartPlatformAsync(o => o with { Deploy = new DeployOptions { MaxConcurrentDeploys = 1 } });
        Assert.False(Directory.Exists(Path.Combine(work, "faast-deploy-left-over")));
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute, File.GetUnixFileMode(work));
        var key = platform.Keys.AdminKey;
        using var frontend = Bare(platform.Address);

        // A deploy that stays in progress: its upload sends a first part and waits.
        var stalled = new StalledContent();
        using var stall = new CancellationTokenSource();
        var first = frontend.SendAsync(new HttpRequestMessage(HttpMethod.Put, "admin/platform/apps/slow")
        {
            Content = stalled,
            Headers = { Authorization = new AuthenticationHeaderValue("Bearer", key) },
        }, stall.Token);
        await stalled.Started.Task;
        // Admitted once its work folder is there (made after the admission), with the upload spooling into it.
        await Eventually.TrueAsync(() => Directory.GetDirectories(work).Any(d => Directory.GetFiles(d, "*.zip").Length > 0),
            "the first deploy to spool its upload", () => Output);
        var folder = Assert.Single(Directory.GetDirectories(work));
        var spooled = Assert.Single(Directory.GetFiles(folder, "*.zip"));

        using var second = await frontend.SendAsync(Deploy("slow", "not a zip"u8.ToArray(), key));
        using var other = await frontend.SendAsync(Deploy("another", "not a zip"u8.ToArray(), key));

        Assert.Equal(HttpStatusCode.Conflict, second.StatusCode);
        Assert.Contains("app \"slow\"", (await ErrorOf(second)).Error, StringComparison.Ordinal);
        Assert.Equal(HttpStatusCode.ServiceUnavailable, other.StatusCode);
        Assert.Equal(TimeSpan.FromSeconds(10), other.Headers.RetryAfter?.Delta);
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute, File.GetUnixFileMode(folder));
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite, File.GetUnixFileMode(spooled));

        // The first ends (its client goes away): the app can be deployed again, and its work folder is gone.
        await stall.CancelAsync();
        await Assert.ThrowsAnyAsync<Exception>(() => first);
        await Eventually.TrueAsync(async () =>
        {
            using var response = await frontend.SendAsync(Deploy("slow", "not a zip"u8.ToArray(), key));
            return response.StatusCode == HttpStatusCode.BadRequest;
        }, "the app's deploy to be admitted again once the first ended");
        await Eventually.TrueAsync(() => Directory.GetFileSystemEntries(work).Length == 0, "the deploys' work folders to be removed",
            () => string.Join(", ", Directory.GetFileSystemEntries(work)));
    }

    /// <summary>A request body that sends 4 KiB and then waits until the request is cancelled.</summary>
    private sealed class StalledContent : HttpContent
    {
        public TaskCompletionSource Started { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken)
        {
            await stream.WriteAsync(new byte[4096], cancellationToken);
            await stream.FlushAsync(cancellationToken);
            Started.TrySetResult();
            await Task.Delay(Timeout.Infinite, cancellationToken);
        }

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) => SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override bool TryComputeLength(out long length)
        {
            length = 0;
            return false;
        }
    }

    // ---- defect 10: the control port ----------------------------------------------------------------

    [Fact]
    public async Task A_scale_out_request_for_an_unknown_app_with_a_bad_signature_is_unauthenticated_not_not_found()
    {
        var platform = await StartPlatformAsync();
        using var channel = GrpcChannel.ForAddress(platform.ControlAddress);
        var client = new ScaleControl.ScaleControlClient(channel);
        var request = new ScaleOutRequest { App = "nosuchapp", TargetInstances = 2, InstanceId = "i", Policy = "bandwidth" };

        var unsigned = await Assert.ThrowsAsync<RpcException>(async () => await client.RequestScaleOutAsync(request));
        var forged = new Metadata { { PeerAuth.HeaderName, new PeerAuth("a guess"u8, "nosuchapp").SignCall(ScaleControlService.RequestScaleOutPath) } };
        var badlySigned = await Assert.ThrowsAsync<RpcException>(async () => await client.RequestScaleOutAsync(request, forged));
        // Signed as such an app would be (only the platform can): then, and only then, it learns there is none.
        var signed = new Metadata { { PeerAuth.HeaderName, new PeerAuth(Encoding.UTF8.GetBytes(platform.Keys.PeerSecretOf("nosuchapp")), "nosuchapp")
            .SignCall(ScaleControlService.RequestScaleOutPath) } };
        var notFound = await Assert.ThrowsAsync<RpcException>(async () => await client.RequestScaleOutAsync(request, signed));

        Assert.Equal(StatusCode.Unauthenticated, unsigned.StatusCode);
        Assert.Equal(StatusCode.Unauthenticated, badlySigned.StatusCode);
        Assert.Equal(StatusCode.NotFound, notFound.StatusCode);
    }

    [Fact]
    public async Task A_captured_scale_out_request_cannot_be_replayed_after_the_apps_policy_changed()
    {
        var platform = await StartPlatformAsync();
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        var dir = CopySample("replayed");
        using (var deployed = await admin.PutAsync("admin/platform/apps/replayed", new ByteArrayContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, $"{await deployed.Content.ReadAsStringAsync()}\n{Output}");
        using var channel = GrpcChannel.ForAddress(platform.ControlAddress);
        var client = new ScaleControl.ScaleControlClient(channel);
        var request = new ScaleOutRequest { App = "replayed", TargetInstances = 1, InstanceId = "i", Policy = "bandwidth", Reason = "test" };
        var captured = new Metadata { { PeerAuth.HeaderName, new PeerAuth(platform.PeerSecretOf("replayed"), "replayed").SignCall(ScaleControlService.RequestScaleOutPath) } };
        await client.RequestScaleOutAsync(request, captured);
        var loop = platform.Apps["replayed"].Loop;

        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "scale": { "maxInstances": 3 } }""");
        using (var redeployed = await admin.PutAsync("admin/platform/apps/replayed", new ByteArrayContent(Zip(dir))))
            Assert.True(redeployed.IsSuccessStatusCode, $"{await redeployed.Content.ReadAsStringAsync()}\n{Output}");
        Assert.NotSame(loop, platform.Apps["replayed"].Loop); // a new policy is a new loop
        var replay = await Assert.ThrowsAsync<RpcException>(async () => await client.RequestScaleOutAsync(request, captured));

        Assert.Equal(StatusCode.Unauthenticated, replay.StatusCode);
    }

    [Fact]
    public async Task The_control_port_beyond_loopback_without_tls_is_refused_at_start()
    {
        var e = await Assert.ThrowsAsync<ArgumentException>(() => StartPlatformAsync(o => o with { ControlListenAddress = "0.0.0.0" }));

        Assert.Contains("--control-tls-cert", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_tls_control_port_with_a_client_ca_refuses_keda_without_a_client_certificate_and_answers_with_one()
    {
        using var tls = new TempDirectory("faast-control-tls-");
        var (caFile, certFile, keyFile, client, serverCa) = Certificates.Write(tls.Path);
        using var _ = client;
        var platform = await StartPlatformAsync(o => o with
        {
            ControlTlsCertificateFile = certFile,
            ControlTlsKeyFile = keyFile,
            ControlClientCaFile = caFile,
        });
        Assert.Equal("https", platform.ControlAddress.Scheme);
        var reference = new Protos.Keda.ScaledObjectRef { Name = "so", Namespace = "faast" };
        reference.ScalerMetadata["app"] = "nosuchapp";

        using var without = Channel(platform.ControlAddress, serverCa, clientCertificate: null);
        var refused = await Assert.ThrowsAsync<RpcException>(async () => await new Protos.Keda.ExternalScaler.ExternalScalerClient(without).IsActiveAsync(reference));
        using var with = Channel(platform.ControlAddress, serverCa, client);
        var answered = await Assert.ThrowsAsync<RpcException>(async () => await new Protos.Keda.ExternalScaler.ExternalScalerClient(with).IsActiveAsync(reference));

        Assert.Equal(StatusCode.Unauthenticated, refused.StatusCode);
        Assert.Contains("client certificate", refused.Status.Detail, StringComparison.Ordinal);
        Assert.Equal(StatusCode.NotFound, answered.StatusCode); // past the certificate check: the app is not deployed
    }

    private static GrpcChannel Channel(Uri address, X509Certificate2 ca, X509Certificate2? clientCertificate)
    {
        var handler = new SocketsHttpHandler();
        handler.SslOptions.RemoteCertificateValidationCallback = (_, certificate, _, _) =>
            certificate is not null && ControlTlsCheck.IsIssuedBy(
                certificate as X509Certificate2 ?? X509CertificateLoader.LoadCertificate(certificate.GetRawCertData()), ca, serverAuth: true);
        if (clientCertificate is not null)
            handler.SslOptions.ClientCertificates = [clientCertificate];
        return GrpcChannel.ForAddress(address, new GrpcChannelOptions { HttpHandler = handler, DisposeHttpClient = true });
    }

    /// <summary>A CA, a server certificate for 127.0.0.1 and a client certificate, made here (PEM files for the platform).</summary>
    private static class Certificates
    {
        public static (string Ca, string Cert, string Key, X509Certificate2 Client, X509Certificate2 CaCert) Write(string dir)
        {
            using var caKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
            var caRequest = new CertificateRequest("CN=faast test CA", caKey, HashAlgorithmName.SHA256);
            caRequest.CertificateExtensions.Add(new X509BasicConstraintsExtension(true, false, 0, true));
            caRequest.CertificateExtensions.Add(new X509KeyUsageExtension(X509KeyUsageFlags.KeyCertSign | X509KeyUsageFlags.CrlSign, true));
            var now = DateTimeOffset.UtcNow;
            using var ca = caRequest.CreateSelfSigned(now.AddDays(-1), now.AddDays(30));

            using var serverKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
            var serverRequest = new CertificateRequest("CN=127.0.0.1", serverKey, HashAlgorithmName.SHA256);
            var san = new SubjectAlternativeNameBuilder();
            san.AddIpAddress(IPAddress.Loopback);
            san.AddDnsName("localhost");
            serverRequest.CertificateExtensions.Add(san.Build());
            serverRequest.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension([new Oid("1.3.6.1.5.5.7.3.1")], false));
            using var server = serverRequest.Create(ca, now.AddDays(-1), now.AddDays(30), RandomNumberGenerator.GetBytes(8));

            using var clientKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
            var clientRequest = new CertificateRequest("CN=keda", clientKey, HashAlgorithmName.SHA256);
            clientRequest.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension([new Oid("1.3.6.1.5.5.7.3.2")], false));
            using var clientPublic = clientRequest.Create(ca, now.AddDays(-1), now.AddDays(30), RandomNumberGenerator.GetBytes(8));
            using var clientWithKey = clientPublic.CopyWithPrivateKey(clientKey);
            var client = X509CertificateLoader.LoadPkcs12(clientWithKey.Export(X509ContentType.Pkcs12), null);

            var caFile = Path.Combine(dir, "ca.pem");
            var certFile = Path.Combine(dir, "control.pem");
            var keyFile = Path.Combine(dir, "control.key");
            File.WriteAllText(caFile, ca.ExportCertificatePem());
            File.WriteAllText(certFile, server.ExportCertificatePem());
            File.WriteAllText(keyFile, serverKey.ExportPkcs8PrivateKeyPem());
            return (caFile, certFile, keyFile, client, X509CertificateLoader.LoadCertificate(ca.RawData));
        }
    }

    /// <summary>Chain checks against one CA, for the test's own client.</summary>
    private static class ControlTlsCheck
    {
        public static bool IsIssuedBy(X509Certificate2 certificate, X509Certificate2 ca, bool serverAuth)
        {
            using var chain = new X509Chain();
            chain.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
            chain.ChainPolicy.CustomTrustStore.Add(ca);
            chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
            if (serverAuth)
                chain.ChainPolicy.ApplicationPolicy.Add(new Oid("1.3.6.1.5.5.7.3.1"));
            return chain.Build(certificate);
        }
    }

    /// <summary>The platform's log lines into the test's output queue.</summary>
    private sealed class QueueLogger(ConcurrentQueue<string> output) : ILoggerProvider, ILogger
    {
        public ILogger CreateLogger(string categoryName) => this;

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Information;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
            output.Enqueue(formatter(state, exception));

        public void Dispose()
        {
        }
    }
}
