namespace FaaST.Scaling;

/// <summary>
/// T_Load of Faa$T §4: how long adding an instance takes, from its start to its first ready answer. The platform
/// measures it (its app host implements this, and every vote query carries it as VoteRequest.instance_load_seconds);
/// an instance knows it as the controller last sent it, for the bandwidth planner of its read path. One contract for
/// both sides of protos/scale.proto.
/// </summary>
public interface IInstanceLoadTime
{
    /// <summary>The latest T_Load, or null until one was measured.</summary>
    TimeSpan? InstanceLoadTime { get; }
}
