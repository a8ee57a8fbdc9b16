using FaaST.Cachelet.Bandwidth;
using FaaST.Scaling;

namespace FaaST.Runtime.Bandwidth;

/// <summary>
/// The cache's bandwidth planner on this instance: the T_DR rule of src/Scaling (<see cref="BandwidthPlanner"/>)
/// over this instance's <see cref="ProfiledBandwidth"/>, which the cache's transfers keep measuring (and
/// which the instance reports in its votes, protos/scale.proto BandwidthProfile).
/// </summary>
internal sealed class ProfiledBandwidthPlanner(ProfiledBandwidth profile, int maxInstances) : IBandwidthPlanner
{
    public ProfiledBandwidth Profile => profile;

    public int PlanInstances(long objectBytes, int running) =>
        BandwidthPlanner.PlanInstances(objectBytes, running, profile.Snapshot(), maxInstances);

    public void ObserveStorageTransfer(long bytes, TimeSpan elapsed) => profile.ObserveStorageTransfer(bytes, elapsed);

    public void ObserveInstanceTransfer(long bytes, TimeSpan elapsed) => profile.ObserveInstanceTransfer(bytes, elapsed);

    public void ObserveLoad(TimeSpan elapsed) => profile.ObserveLoad(elapsed);
}
