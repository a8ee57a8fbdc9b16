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
    public void The_platform_reads_the_policy_file_from_the_app_model_not_from_the_cachelet()
    {
        // The compiler records only the assemblies whose types the platform uses: the cachelet still comes
        // along as the peer transport's dependency (PeerAuth), but nothing of the platform's own uses it.
        var references = typeof(PlatformHost).Assembly.GetReferencedAssemblies().Select(a => a.Name).ToList();
        Assert.DoesNotContain("FaaST.Cachelet", references);
        Assert.Equal("FaaST.AppModel", typeof(FaaST.AppModel.Policy.CachePolicyFile).Assembly.GetName().Name);
    }

    [Fact]
    public void The_runtime_host_does_not_reference_the_platform()
    {
        var runtime = Assembly.LoadFrom(Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"));
        Assert.DoesNotContain("FaaST.ScaleController", runtime.GetReferencedAssemblies().Select(a => a.Name));
    }
}
