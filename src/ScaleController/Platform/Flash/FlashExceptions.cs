namespace FaaST.ScaleController.Platform.Flash;

/// <summary>The flash tier's admission control refused an app's SLO: the deploy is refused (422) with this message,
/// which names the app, the SLO and the server's reason.</summary>
public sealed class FlashAdmissionException(string message) : Exception(message);

/// <summary>The platform's flash server could not be started or asked (its state folder, its device, its port).</summary>
public sealed class FlashServerException(string message, Exception? inner = null) : IOException(message, inner);
