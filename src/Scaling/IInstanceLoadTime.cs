namespace FaaST.Scaling;

/// <summary>
/// T_Load of Faa$T §4 as this instance last heard it from the controller (VoteRequest.instance_load_seconds):
/// how long adding an instance takes. The bandwidth planner of the read path reads it.
/// </summary>
public interface IInstanceLoadTime
{
    /// <summary>Seconds from starting an instance to its first ready answer; 0 until the controller measured one.</summary>
    double LoadSeconds { get; }
}
