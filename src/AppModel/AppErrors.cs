namespace FaaST.AppModel;

/// <summary>A problem with the app's files that stops the app (or one function) from loading.
/// The message names the file, the key and what is wrong.</summary>
public sealed class AppConfigException(string message) : Exception(message);
