using System.Runtime.CompilerServices;

// The engine's tests check the device layer (DirectFile's alignment guard) and the index snapshot across a restart.
[assembly: InternalsVisibleTo("FaaST.FlashBackend.Tests")]
