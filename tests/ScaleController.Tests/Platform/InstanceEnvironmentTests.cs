using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// What of the platform's environment an instance starts with (issue 19, defect 3): an allow-list, so that the operator's
/// AzureWebJobsStorage or any secret in their shell never reaches a tenant's instance (where it also overrode the app's
/// local.settings.json).
/// </summary>
public sealed class InstanceEnvironmentTests
{
    [Fact]
    public void An_instance_gets_only_the_allow_listed_variables_of_the_platforms_environment()
    {
        var platform = new System.Collections.Hashtable
        {
            ["PATH"] = "/usr/bin", ["LANG"] = "C.UTF-8", ["LC_ALL"] = "C", ["TZ"] = "UTC", ["DOTNET_ROOT"] = "/dotnet",
            ["FAAST_HOME"] = "/faast", ["TMPDIR"] = "/tmp", ["HOME"] = "/root",
            ["AzureWebJobsStorage"] = "AccountName=operator;AccountKey=c2VjcmV0", ["FAAST_PEER_SECRET"] = "operators",
            ["AWS_SECRET_ACCESS_KEY"] = "x", ["MyStorageConnectionString"] = "AccountName=operator", ["path"] = "/lowercase",
            ["FAAST_DEVELOPMENT_STORAGE"] = "AccountName=operator",
        };
        var allowed = LocalProcessProvider.InstanceEnvironment(platform).ToDictionary(p => p.Key, p => p.Value);
        Assert.Equal(["DOTNET_ROOT", "FAAST_HOME", "HOME", "LANG", "LC_ALL", "PATH", "TMPDIR", "TZ"], allowed.Keys.Order(StringComparer.Ordinal));
        Assert.Equal("/usr/bin", allowed["PATH"]);
    }
}
