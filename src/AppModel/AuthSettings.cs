namespace FaaST.AppModel;

/// <summary>
/// What an app's files say about authorization: function.json's <c>authLevel</c>, and which settings hold keys
/// (the kubernetes secret storage type's names). Part of the app model, so that the platform validates a deploy
/// by the same rules the host serves by; the keys themselves are checked by the runtime (FunctionKeys).
/// </summary>
public static class AuthSettings
{
    public const string MasterSetting = "host.master", HostKeyPrefix = "host.function.", SystemKeyPrefix = "host.systemKey.", FunctionKeyPrefix = "functions.";

    /// <summary>function.json's authLevel: anonymous, function (the default), system or admin.</summary>
    public static AuthLevel ParseAuthLevel(string? text, string file, string key) => text?.ToLowerInvariant() switch
    {
        null => AuthLevel.Function,
        "anonymous" => AuthLevel.Anonymous,
        "function" => AuthLevel.Function,
        "system" => AuthLevel.System,
        "admin" => AuthLevel.Admin,
        "user" => throw new AppConfigException(
            $"{file}: {key} \"user\" needs App Service authentication, which FaaST does not have; use anonymous, function, system or admin"),
        _ => throw new AppConfigException(
            $"{file}: {key} \"{LogText.Escape(text)}\" is not an authorization level (anonymous, function, system or admin)"),
    };

    /// <summary>Whether setting <paramref name="name"/> holds a key (so it is taken from the environment too).</summary>
    public static bool IsKeySetting(string name) =>
        name.Equals(MasterSetting, StringComparison.OrdinalIgnoreCase) ||
        name.StartsWith(HostKeyPrefix, StringComparison.OrdinalIgnoreCase) ||
        name.StartsWith(SystemKeyPrefix, StringComparison.OrdinalIgnoreCase) ||
        (name.StartsWith(FunctionKeyPrefix, StringComparison.OrdinalIgnoreCase) && name.IndexOf('.', FunctionKeyPrefix.Length) > FunctionKeyPrefix.Length);
}
