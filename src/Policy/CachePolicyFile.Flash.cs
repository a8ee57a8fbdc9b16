using System.Diagnostics;
using System.Text.Json;

namespace FaaST.Policy;

public static partial class CachePolicyFile
{
    private sealed partial class Reader
    {
        private FlashPolicy ReadFlash(JsonElement section, PolicyKey sectionKey)
        {
            RequireKind(section, sectionKey, JsonValueKind.Object, "an object");
            var flash = FlashPolicy.Default;
            foreach (var (key, value) in Members(section, sectionKey.Path))
            {
                flash = key.Name switch
                {
                    "enabled" => flash with { Enabled = ReadBoolean(value, key) },
                    "address" => flash with { Address = ReadAddress(value, key) },
                    "iopsSlo" => flash with { IopsSlo = ReadNumber(value, key) },
                    "p95LatencyUs" => flash with { P95LatencyUs = (int)ReadInteger(value, key) },
                    "readRatio" => flash with { ReadRatio = ReadNumber(value, key) },
                    "timeoutMs" => flash with { Timeout = TimeSpan.FromMilliseconds(ReadInteger(value, key)) },
                    "retryAfterSeconds" => flash with { RetryAfter = TimeSpan.FromSeconds(ReadInteger(value, key)) },
                    "demote" => flash with { Demote = ReadBoolean(value, key) },
                    "minDemoteBytes" => flash with { MinDemoteBytes = ReadSize(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            // En4S §4.2.1: an LC tenant's SLO is an IOPS rate at a tail latency; one without the other cannot be admitted
            // or scheduled, so it is an error rather than a guess at the missing half.
            if ((flash.IopsSlo is null) != (flash.P95LatencyUs is null))
            {
                var (given, missing) = flash.IopsSlo is null ? ("p95LatencyUs", "iopsSlo") : ("iopsSlo", "p95LatencyUs");
                throw new PolicyFileException(file, "flash." + given,
                    $"flash.{given} is set without flash.{missing}; an SLO needs both (latency-critical), or leave both out (best-effort)");
            }
            return flash;
        }

        private Uri ReadAddress(JsonElement value, PolicyKey key)
        {
            RequireKind(value, key, JsonValueKind.String, "a string");
            var s = value.GetString()!;
            if (!Uri.TryCreate(s, UriKind.Absolute, out var uri) || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps)
                || uri.PathAndQuery != "/" || uri.UserInfo.Length > 0)
            {
                throw Error(key, $"\"{s}\" is not a flash server address; write an absolute http:// or https:// URI with a host and "
                    + "port and nothing else, like \"http://127.0.0.1:7300\" (leave it out to use the platform's own server)");
            }
            return uri;
        }
    }
}
