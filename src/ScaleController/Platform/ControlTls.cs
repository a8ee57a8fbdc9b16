using System.Net;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.AspNetCore.Server.Kestrel.Https;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The control port's transport (issue 19, defect 10). Cleartext HTTP/2 on loopback by default; beyond loopback only
/// with TLS (<see cref="PlatformOptions.ControlTlsCertificateFile"/>), since its KEDA scaler answers without a key and
/// names apps. With a client CA, a client certificate is asked for and checked against that CA alone; the KEDA scaler
/// then answers only a client that presented one (instances' ScaleControl calls carry the app's signature instead, and
/// the admin endpoints the admin key).
/// </summary>
internal sealed class ControlTls
{
    private ControlTls(X509Certificate2 certificate, X509Certificate2? clientCa)
    {
        Certificate = certificate;
        ClientCa = clientCa;
    }

    public X509Certificate2 Certificate { get; }

    public X509Certificate2? ClientCa { get; }

    /// <summary>The control port's TLS, or null for cleartext (loopback only).</summary>
    /// <exception cref="ArgumentException">The control options do not go together, or a file is unusable: the message names it.</exception>
    public static ControlTls? Load(PlatformOptions options)
    {
        if (!IPAddress.TryParse(options.ControlListenAddress, out var address))
            throw new ArgumentException($"--control-listen must be an IP address, not \"{options.ControlListenAddress}\"");
        var (certFile, keyFile, caFile) = (options.ControlTlsCertificateFile, options.ControlTlsKeyFile, options.ControlClientCaFile);
        if ((certFile is null) != (keyFile is null))
            throw new ArgumentException("--control-tls-cert and --control-tls-key go together: the certificate (PEM) and its private key (PEM)");
        if (caFile is not null && certFile is null)
            throw new ArgumentException("--control-client-ca needs --control-tls-cert and --control-tls-key: client certificates are asked for over TLS");
        if (certFile is null)
        {
            if (!IPAddress.IsLoopback(address))
            {
                throw new ArgumentException($"the control port would listen on {address}, beyond loopback, in cleartext: its KEDA scaler answers anyone " +
                    "and names apps. Give it TLS (--control-tls-cert PEM --control-tls-key PEM, and --control-client-ca PEM to require KEDA's " +
                    "client certificate), or leave --control-listen at 127.0.0.1");
            }
            return null;
        }
        X509Certificate2 certificate;
        try
        {
            using var pem = X509Certificate2.CreateFromPemFile(certFile, keyFile);
            // A PEM key is ephemeral; TLS servers want it in a store-backed form on some platforms: a PKCS#12 round trip.
            certificate = X509CertificateLoader.LoadPkcs12(pem.Export(X509ContentType.Pkcs12), null);
        }
        catch (Exception e) when (e is CryptographicException or IOException or UnauthorizedAccessException)
        {
            throw new ArgumentException($"--control-tls-cert {certFile} / --control-tls-key {keyFile}: not a usable PEM certificate and key: {e.Message}", e);
        }
        X509Certificate2? ca = null;
        if (caFile is not null)
        {
            try
            {
                ca = X509Certificate2.CreateFromPem(File.ReadAllText(caFile));
            }
            catch (Exception e) when (e is CryptographicException or IOException or UnauthorizedAccessException)
            {
                throw new ArgumentException($"--control-client-ca {caFile}: not a usable PEM certificate: {e.Message}", e);
            }
        }
        return new ControlTls(certificate, ca);
    }

    public void Configure(ListenOptions listen) => listen.UseHttps(https =>
    {
        https.ServerCertificate = Certificate;
        if (ClientCa is not { } ca)
            return;
        // Asked for, not required at the handshake: instances calling ScaleControl have none (their calls are signed).
        // A certificate presented must chain to this CA alone (not the machine's roots).
        https.ClientCertificateMode = ClientCertificateMode.AllowCertificate;
        https.CheckCertificateRevocation = false;
        https.ClientCertificateValidation = (certificate, _, _) => IsIssuedBy(certificate, ca);
    });

    internal static bool IsIssuedBy(X509Certificate2 certificate, X509Certificate2 ca)
    {
        using var chain = new X509Chain();
        chain.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
        chain.ChainPolicy.CustomTrustStore.Add(ca);
        chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
        chain.ChainPolicy.ApplicationPolicy.Add(new Oid("1.3.6.1.5.5.7.3.2")); // client authentication
        return chain.Build(certificate);
    }
}
