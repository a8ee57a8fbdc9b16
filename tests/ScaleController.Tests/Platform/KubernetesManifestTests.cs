using System.Diagnostics;
using System.Net;
using System.Text.Json;
using System.Text.Json.Nodes;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// deploy/kubernetes against the platform's security model (issue 19, docs/security.md). No cluster runs here: the
/// manifests are read as YAML (Debian's python3-yaml turns them into JSON) and checked for what the platform needs
/// of them: every document has apiVersion and kind; each app's pods read only Secrets of their own, never another
/// app's or the platform's; the control port beyond loopback has TLS and a client CA, and KEDA's trigger presents a
/// certificate; the admin API is reachable through the Service's name; the instances run as non-root with an isolation
/// mode a non-root host accepts, in a folder named as the app; and deploy/kubernetes/derive-peer-secret.py derives
/// what <see cref="PlatformKeys.PeerSecretOf"/> derives.
/// </summary>
public sealed class KubernetesManifestTests
{
    private static readonly string Folder = Path.Combine(Repo.Root, "deploy", "kubernetes");

    /// <summary>The platform's own Secrets: no app's pod may read them.</summary>
    private static readonly string[] PlatformSecrets = ["faast-master", "faast-platform-storage", "faast-control-tls", "faast-keda-client"];

    private static readonly Lazy<Dictionary<string, List<JsonNode?>>> Files = new(() => Load(Folder));

    private static IEnumerable<JsonObject> Documents => Files.Value.Values.SelectMany(d => d).OfType<JsonObject>();

    private static IEnumerable<JsonObject> OfKind(string kind) => Documents.Where(d => (string?)d["kind"] == kind);

    [Fact]
    public void Every_file_parses_and_every_document_has_an_apiVersion_and_a_kind_and_kustomize_lists_every_file()
    {
        Assert.NotEmpty(Files.Value);
        foreach (var (file, documents) in Files.Value)
        {
            Assert.True(documents.Count > 0, $"{file}: no document");
            for (var i = 0; i < documents.Count; i++)
            {
                var document = Assert.IsType<JsonObject>(documents[i]);
                Assert.False(string.IsNullOrEmpty((string?)document["apiVersion"]), $"{file}, document {i + 1}: no apiVersion");
                Assert.False(string.IsNullOrEmpty((string?)document["kind"]), $"{file}, document {i + 1}: no kind");
            }
        }
        var kustomization = Assert.Single(OfKind("Kustomization"));
        var listed = kustomization["resources"]!.AsArray().Select(r => (string)r!).Order().ToList();
        Assert.Equal(Files.Value.Keys.Where(f => f != "kustomization.yaml").Order().ToList(), listed);
    }

    [Fact]
    public void Each_apps_pods_read_only_Secrets_made_for_that_app_and_none_of_the_platforms()
    {
        var apps = InstanceDeployments().ToList();
        Assert.NotEmpty(apps);
        Assert.Empty(SecretProblems(apps.Select(a => (a.App, a.Deployment))));
    }

    /// <summary>The check itself, on the shape these manifests had before issue 19 (one faast-peer and the platform's
    /// storage for every app) and on two apps sharing a Secret: it must find each.</summary>
    [Fact]
    public void The_secret_check_finds_a_shared_peer_secret_the_platforms_storage_and_a_Secret_two_apps_share()
    {
        var before = Deployment(("FAAST_PEER_SECRET", "faast-peer"), ("AzureWebJobsStorage", "faast-storage"));
        Assert.Equal(2, SecretProblems([("counter", before)]).Count);

        var platformStorage = Deployment(("AzureWebJobsStorage", "faast-platform-storage"));
        Assert.Single(SecretProblems([("counter", platformStorage)]));

        var one = Deployment(("FAAST_PEER_SECRET", "faast-counter-peer"));
        var other = Deployment(("FAAST_PEER_SECRET", "faast-counter-peer"));
        Assert.Contains(SecretProblems([("counter", one), ("other", other)]), p => p.Contains("counter and other", StringComparison.Ordinal));
    }

    [Fact]
    public void Instances_hold_their_apps_own_peer_secret_and_storage_and_run_from_a_folder_named_as_the_app()
    {
        foreach (var (app, deployment) in InstanceDeployments())
        {
            var container = Container(deployment);
            var env = container["env"]!.AsArray().OfType<JsonObject>().ToDictionary(e => (string)e["name"]!);
            Assert.Equal($"faast-{app}-peer", (string?)env["FAAST_PEER_SECRET"]["valueFrom"]?["secretKeyRef"]?["name"]);
            Assert.Equal($"faast-{app}-storage", (string?)env["AzureWebJobsStorage"]["valueFrom"]?["secretKeyRef"]?["name"]);
            // The runtime names the app after its folder, and peer credentials are bound to that name.
            var command = Strings(container["command"]);
            var appDirectory = command.Concat(Strings(container["args"])).First(a => a.StartsWith('/') && !a.EndsWith(".dll", StringComparison.Ordinal));
            Assert.Equal(app, Path.GetFileName(appDirectory.TrimEnd('/')));
            // The ScaledObject for this Deployment asks the scaler for the same app.
            var scaled = Assert.Single(OfKind("ScaledObject"), s => (string?)s["spec"]!["scaleTargetRef"]!["name"] == (string?)deployment["metadata"]!["name"]);
            Assert.All(scaled["spec"]!["triggers"]!.AsArray(), t => Assert.Equal(app, (string?)t!["metadata"]!["app"]));
        }
    }

    [Fact]
    public void Instances_run_as_non_root_without_capabilities_or_API_token_and_with_an_isolation_mode_a_non_root_host_accepts()
    {
        foreach (var (app, deployment) in InstanceDeployments())
        {
            var pod = deployment["spec"]!["template"]!["spec"]!;
            var container = Container(deployment);
            Assert.True((bool?)pod["securityContext"]?["runAsNonRoot"] == true, $"{app}: runAsNonRoot");
            Assert.True((bool?)pod["automountServiceAccountToken"] == false, $"{app}: automountServiceAccountToken");
            var security = container["securityContext"]!;
            Assert.True((bool?)security["allowPrivilegeEscalation"] == false, $"{app}: allowPrivilegeEscalation");
            Assert.True((bool?)security["readOnlyRootFilesystem"] == true, $"{app}: readOnlyRootFilesystem");
            Assert.Contains("ALL", Strings(security["capabilities"]?["drop"]));
            Assert.Null(security["capabilities"]?["add"]);
            // Not root: --isolation required refuses to start (WorkerIdentity.Choose), auto falls back with a log line.
            Assert.Equal("off", OptionValue(Strings(container["args"]), "--isolation"));
            // The scale controller's address is TLS when the control port is, and the pod trusts its CA.
            var env = container["env"]!.AsArray().OfType<JsonObject>().ToDictionary(e => (string)e["name"]!, e => (string?)e["value"]);
            var controller = new Uri(env["FAAST_SCALE_CONTROLLER"]!);
            Assert.Equal(PlatformServiceName(), controller.Host);
            Assert.Equal(int.Parse(OptionValue(PlatformArgs(), "--control-port")!, System.Globalization.CultureInfo.InvariantCulture), controller.Port);
            Assert.Equal("https", controller.Scheme);
            var trusted = env["SSL_CERT_DIR"]!.Split(':');
            Assert.Contains("/etc/ssl/certs", trusted);
            Assert.Contains(trusted, dir => MountedFrom(deployment, dir) is { } volume && volume["configMap"] is not null);
        }
    }

    [Fact]
    public void The_platforms_flags_are_its_own_and_the_control_port_beyond_loopback_has_TLS_and_a_client_CA()
    {
        var args = PlatformArgs();
        Assert.Equal("platform", args[0]);
        var known = System.Text.RegularExpressions.Regex.Matches(Program.PlatformUsage, "--[a-z-]+").Select(m => m.Value).ToHashSet();
        foreach (var flag in args.Where(a => a.StartsWith("--", StringComparison.Ordinal)))
            Assert.True(known.Contains(flag), $"{flag} is not an option of `faast platform` ({Program.PlatformUsage})");
        var listen = IPAddress.Parse(OptionValue(args, "--control-listen") ?? "127.0.0.1");
        Assert.False(IPAddress.IsLoopback(listen), "KEDA reaches the control port from another pod: --control-listen must be beyond loopback");
        foreach (var flag in new[] { "--control-tls-cert", "--control-tls-key", "--control-client-ca" })
        {
            var file = OptionValue(args, flag);
            Assert.True(file is not null, $"--control-listen {listen} without {flag}");
            Assert.True(MountedFrom(PlatformDeployment(), file!) is { } volume && volume["secret"] is not null, $"{flag} {file} is not in a Secret volume");
        }
    }

    [Fact]
    public void The_platform_keeps_its_state_on_a_persistent_volume_its_master_key_in_a_Secret_and_names_its_Service_for_admins()
    {
        var args = PlatformArgs();
        var deployment = PlatformDeployment();
        var state = MountedFrom(deployment, OptionValue(args, "--state")!);
        var claim = (string?)state?["persistentVolumeClaim"]?["claimName"];
        Assert.True(claim is not null, "--state is not on a persistent volume (keys/admin would change at every restart)");
        Assert.Contains(OfKind("PersistentVolumeClaim"), c => (string?)c["metadata"]!["name"] == claim);
        Assert.True(MountedFrom(deployment, OptionValue(args, "--master-key-file")!) is { } master && master["secret"] is not null,
            "--master-key-file is not in a Secret volume");
        var adminHosts = args.Select((a, i) => (a, i)).Where(p => p.a == "--admin-host").Select(p => args[p.i + 1]).ToList();
        Assert.Contains(PlatformServiceName(), adminHosts);
    }

    [Fact]
    public void KEDAs_trigger_dials_the_platforms_Service_with_a_CA_and_a_client_certificate()
    {
        var address = $"{PlatformServiceName()}:{OptionValue(PlatformArgs(), "--control-port")}";
        var triggers = OfKind("ScaledObject").SelectMany(s => s["spec"]!["triggers"]!.AsArray().OfType<JsonObject>()).ToList();
        Assert.NotEmpty(triggers);
        foreach (var trigger in triggers)
        {
            Assert.Contains((string?)trigger["type"], new[] { "external", "external-push" });
            Assert.Equal(address, (string?)trigger["metadata"]!["scalerAddress"]);
            var name = (string?)trigger["authenticationRef"]?["name"];
            var authentication = Assert.Single(OfKind("TriggerAuthentication"), a => (string?)a["metadata"]!["name"] == name);
            var parameters = authentication["spec"]!["secretTargetRef"]!.AsArray().Select(r => (string)r!["parameter"]!).ToList();
            Assert.Equal(["caCert", "tlsClientCert", "tlsClientKey"], parameters.Order().ToList());
        }
    }

    [Theory]
    [InlineData("counter")]
    [InlineData("a")]
    [InlineData("python-app")]
    [InlineData("x23456789-123456789-123456789-123456789-123456789-123456789")]
    public async Task The_peer_secret_script_derives_what_the_platform_derives(string app)
    {
        using var state = new TempDirectory("faast-k8s-keys-");
        var masterFile = Path.Combine(state.Path, "master");
        await File.WriteAllTextAsync(masterFile, Convert.ToBase64String(System.Security.Cryptography.RandomNumberGenerator.GetBytes(32)) + "\n");
        var expected = PlatformKeys.LoadOrCreate(Path.Combine(state.Path, "state"), masterFile).PeerSecretOf(app);

        var (exit, output, error) = await RunAsync("/usr/bin/python3", [Path.Combine(Folder, "derive-peer-secret.py"), masterFile, app]);
        Assert.True(exit == 0, error);
        Assert.Equal(expected, output); // exactly: a trailing newline in the Secret would be another secret
        (exit, output, error) = await RunAsync("/usr/bin/python3", [Path.Combine(Folder, "derive-peer-secret.py"), "-", app], await File.ReadAllTextAsync(masterFile));
        Assert.True(exit == 0, error);
        Assert.Equal(expected, output);
    }

    [Fact]
    public async Task The_peer_secret_script_refuses_a_name_no_app_has_and_a_short_master_key()
    {
        using var state = new TempDirectory("faast-k8s-keys-");
        var masterFile = Path.Combine(state.Path, "master");
        await File.WriteAllTextAsync(masterFile, Convert.ToBase64String(new byte[16]));
        var (exit, _, error) = await RunAsync("/usr/bin/python3", [Path.Combine(Folder, "derive-peer-secret.py"), masterFile, "counter"]);
        Assert.Equal(2, exit);
        Assert.Contains("16 bytes", error, StringComparison.Ordinal);
        (exit, _, error) = await RunAsync("/usr/bin/python3", [Path.Combine(Folder, "derive-peer-secret.py"), masterFile, "Counter"]);
        Assert.Equal(2, exit);
        Assert.Contains("is not an app name", error, StringComparison.Ordinal);
    }

    // ---- the manifests' parts ----------------------------------------------------------------------------------------

    /// <summary>Deployments of instances: labelled with the app they run (faast.io/app).</summary>
    private static IEnumerable<(string App, JsonObject Deployment)> InstanceDeployments() =>
        OfKind("Deployment").Where(d => d["metadata"]?["labels"]?["faast.io/app"] is not null)
            .Select(d => ((string)d["metadata"]!["labels"]!["faast.io/app"]!, d));

    private static JsonObject PlatformDeployment() => Assert.Single(OfKind("Deployment"), d => (string?)d["metadata"]!["name"] == "faast-platform");

    private static List<string> PlatformArgs() => Strings(Container(PlatformDeployment())["args"]);

    /// <summary>The DNS name of the Service in front of the platform's pods.</summary>
    private static string PlatformServiceName()
    {
        var labels = PlatformDeployment()["spec"]!["template"]!["metadata"]!["labels"]!.AsObject();
        var service = Assert.Single(OfKind("Service"), s => s["spec"]!["selector"]!.AsObject().All(p => (string?)labels[p.Key] == (string?)p.Value));
        return $"{service["metadata"]!["name"]}.{service["metadata"]!["namespace"]}.svc.cluster.local";
    }

    private static JsonObject Container(JsonObject deployment) =>
        Assert.Single(deployment["spec"]!["template"]!["spec"]!["containers"]!.AsArray().OfType<JsonObject>());

    /// <summary>The volume that holds <paramref name="path"/> in the deployment's container (the deepest mount above it).</summary>
    private static JsonObject? MountedFrom(JsonObject deployment, string path)
    {
        var mount = Container(deployment)["volumeMounts"]?.AsArray().OfType<JsonObject>()
            .Where(m => path == (string)m["mountPath"]! || path.StartsWith((string)m["mountPath"]! + "/", StringComparison.Ordinal))
            .MaxBy(m => ((string)m["mountPath"]!).Length);
        return mount is null ? null : deployment["spec"]!["template"]!["spec"]!["volumes"]!.AsArray().OfType<JsonObject>()
            .Single(v => (string?)v["name"] == (string?)mount["name"]);
    }

    /// <summary>Every Secret a pod of the deployment reads: env, envFrom, volumes (projected ones too).</summary>
    private static IEnumerable<string> SecretsOf(JsonObject deployment)
    {
        var pod = deployment["spec"]!["template"]!["spec"]!;
        foreach (var container in pod["containers"]!.AsArray().Concat(pod["initContainers"]?.AsArray() ?? []).OfType<JsonObject>())
        {
            foreach (var e in container["env"]?.AsArray().OfType<JsonObject>() ?? [])
                if ((string?)e["valueFrom"]?["secretKeyRef"]?["name"] is { } name)
                    yield return name;
            foreach (var e in container["envFrom"]?.AsArray().OfType<JsonObject>() ?? [])
                if ((string?)e["secretRef"]?["name"] is { } name)
                    yield return name;
        }
        foreach (var volume in pod["volumes"]?.AsArray().OfType<JsonObject>() ?? [])
        {
            if ((string?)volume["secret"]?["secretName"] is { } name)
                yield return name;
            foreach (var source in volume["projected"]?["sources"]?.AsArray().OfType<JsonObject>() ?? [])
                if ((string?)source["secret"]?["name"] is { } projected)
                    yield return projected;
        }
    }

    /// <summary>What is wrong with the Secrets each app's pods read: one that is not faast-APP-*, one of the platform's, one two apps share.</summary>
    private static List<string> SecretProblems(IEnumerable<(string App, JsonObject Deployment)> apps)
    {
        var problems = new List<string>();
        var readers = new Dictionary<string, string>();
        foreach (var (app, deployment) in apps)
        {
            foreach (var secret in SecretsOf(deployment).Distinct())
            {
                if (PlatformSecrets.Contains(secret))
                    problems.Add($"app {app} reads the platform's Secret {secret}");
                else if (!secret.StartsWith($"faast-{app}-", StringComparison.Ordinal))
                    problems.Add($"app {app} reads Secret {secret}, which is not named faast-{app}-*");
                if (readers.TryGetValue(secret, out var other) && other != app)
                    problems.Add($"Secret {secret} is read by apps {other} and {app}");
                readers.TryAdd(secret, app);
            }
        }
        return problems;
    }

    /// <summary>An instances Deployment whose container reads each (variable, Secret).</summary>
    private static JsonObject Deployment(params (string Variable, string Secret)[] env) => new()
    {
        ["spec"] = new JsonObject
        {
            ["template"] = new JsonObject
            {
                ["spec"] = new JsonObject
                {
                    ["containers"] = new JsonArray(new JsonObject
                    {
                        ["env"] = new JsonArray(env.Select(e => (JsonNode)new JsonObject
                        {
                            ["name"] = e.Variable,
                            ["valueFrom"] = new JsonObject { ["secretKeyRef"] = new JsonObject { ["name"] = e.Secret, ["key"] = "k" } },
                        }).ToArray()),
                    }),
                },
            },
        },
    };

    private static List<string> Strings(JsonNode? node) => node?.AsArray().Select(n => n!.GetValueKind() == JsonValueKind.String
        ? (string)n!
        : throw new Xunit.Sdk.XunitException($"{n.ToJsonString()} is not a string (YAML reads unquoted off/on/yes/no as booleans)")).ToList() ?? [];

    private static string? OptionValue(List<string> args, string option)
    {
        var i = args.IndexOf(option);
        return i >= 0 && i + 1 < args.Count ? args[i + 1] : null;
    }

    // ---- reading YAML --------------------------------------------------------------------------------------------------

    private const string ToJson = """
        import glob, json, os, sys
        try:
            import yaml
        except ImportError:
            sys.stderr.write("python3-yaml is not installed: apt-get install -y python3-yaml\n")
            sys.exit(3)
        files = {}
        for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
            with open(path, encoding="utf-8") as f:
                files[os.path.basename(path)] = list(yaml.safe_load_all(f))
        json.dump(files, sys.stdout)
        """;

    private static Dictionary<string, List<JsonNode?>> Load(string folder)
    {
        var (exit, output, error) = RunAsync("/usr/bin/python3", ["-c", ToJson, folder]).GetAwaiter().GetResult();
        if (exit != 0)
            throw new InvalidOperationException($"reading {folder} as YAML failed (exit {exit}): {error}");
        var parsed = JsonNode.Parse(output)!.AsObject();
        return parsed.ToDictionary(p => p.Key, p => p.Value!.AsArray().Select(d => d?.DeepClone()).ToList());
    }

    private static async Task<(int Exit, string Output, string Error)> RunAsync(string file, IEnumerable<string> args, string? input = null)
    {
        var info = new ProcessStartInfo(file) { RedirectStandardOutput = true, RedirectStandardError = true, RedirectStandardInput = true, UseShellExecute = false };
        foreach (var a in args)
            info.ArgumentList.Add(a);
        using var process = Process.Start(info)!;
        var output = process.StandardOutput.ReadToEndAsync();
        var error = process.StandardError.ReadToEndAsync();
        if (input is not null)
            await process.StandardInput.WriteAsync(input);
        process.StandardInput.Close();
        await process.WaitForExitAsync();
        return (process.ExitCode, await output, await error);
    }
}
