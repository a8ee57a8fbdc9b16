using System.Reflection;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Tests;

/// <summary>The dependency rules of CONTRIBUTING's layout, checked on the built assemblies.</summary>
public sealed class ArchitectureTests
{
    [Fact]
    public void The_platform_does_not_reference_the_runtime_host_it_runs_as_a_process()
    {
        var references = typeof(PlatformHost).Assembly.GetReferencedAssemblies().Select(a => a.Name).ToList();
        Assert.DoesNotContain("FaaST.Runtime", references);
        Assert.Contains("FaaST.AppModel", references);
    }

    [Fact]
    public void The_platform_reads_the_policy_file_from_its_own_project_not_from_the_cachelet()
    {
        // The compiler records only the assemblies whose types the platform uses: the cachelet still comes
        // along as the peer transport's dependency (PeerAuth), but nothing of the platform's own uses it.
        var references = typeof(PlatformHost).Assembly.GetReferencedAssemblies().Select(a => a.Name).ToList();
        Assert.DoesNotContain("FaaST.Cachelet", references);
        Assert.Equal("FaaST.Policy", typeof(FaaST.Policy.CachePolicyFile).Assembly.GetName().Name);
    }

    [Fact]
    public void The_cache_core_takes_the_policy_without_the_app_model_or_ASP_NET_Core()
    {
        // A flash tier or another process may embed the cachelet: it must not drag in the app model's route parser.
        var cachelet = Assembly.LoadFrom(Path.Combine(AppContext.BaseDirectory, "FaaST.Cachelet.dll"));
        var references = cachelet.GetReferencedAssemblies().Select(a => a.Name!).ToList();
        Assert.Contains("FaaST.Policy", references);
        Assert.DoesNotContain("FaaST.AppModel", references);
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
    }

    [Fact]
    public void The_runtime_host_does_not_reference_the_platform()
    {
        var runtime = Assembly.LoadFrom(Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"));
        Assert.DoesNotContain("FaaST.ScaleController", runtime.GetReferencedAssemblies().Select(a => a.Name));
    }
}
