using FaaST.Cachelet;
using FaaST.Hosting;
using FaaST.Membership;
using Microsoft.Extensions.DependencyInjection.Extensions;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// How a component joins the host's registry (<see cref="RuntimeHostOptions.ConfigureServices"/>): registered once
/// as a singleton that receives what it needs through its constructor, and, when it has stages or states to
/// observe, also as an <see cref="ILifecycleParticipant"/> — the same instance (the model is Orleans'
/// <c>AddFromExisting&lt;ILifecycleParticipant&lt;ISiloLifecycle&gt;, T&gt;</c>).
/// </summary>
public static class ComponentRegistration
{
    /// <summary>
    /// Registers <typeparamref name="T"/> once, and that instance as an <see cref="ILifecycleParticipant"/>: the host
    /// subscribes every participant, in registration order, before it starts (within one stage, the earlier
    /// registered starts first and stops last).
    /// </summary>
    public static IServiceCollection AddLifecycleComponent<T>(this IServiceCollection services) where T : class, ILifecycleParticipant
    {
        services.TryAddSingleton<T>();
        return services.AddFromExisting<ILifecycleParticipant, T>();
    }

    /// <summary>Also registers the singleton <typeparamref name="TImplementation"/> as <typeparamref name="TService"/> (not a second instance).</summary>
    public static IServiceCollection AddFromExisting<TService, TImplementation>(this IServiceCollection services)
        where TService : class where TImplementation : class, TService =>
        services.AddSingleton<TService>(provider => provider.GetRequiredService<TImplementation>());
}

/// <summary>The cachelet as a component sees it (injected; the host registers its cache component as this).</summary>
public interface IHostCache
{
    /// <summary>The cachelet, from the <see cref="ServiceLifecycleStage.Cache"/> stage's start on; null before, and when faast.json turns the cache off.</summary>
    BlobCache? Cache { get; }
}

/// <summary>The app's membership as this instance sees it (injected; with peers off, only ever empty).</summary>
public interface IHostMembership
{
    /// <summary>The app's instances in this one's current view (empty before it joined, and without peers).</summary>
    IReadOnlyList<Member> Members { get; }

    /// <summary>This instance's membership id and peer endpoint, once joined (from the <see cref="ServiceLifecycleStage.Peers"/> stage on); null without peers.</summary>
    Member? Self { get; }
}
