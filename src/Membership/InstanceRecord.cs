using System.Buffers;
using System.Text.Json;
using System.Text.Json.Serialization;

namespace FaaST.Membership;

/// <summary>
/// The JSON of an instance blob: {id, peerAddress, started, seq, state, load}. State and load came later: a record
/// without them is an active instance that never reported its load. The state is also the blob's content type
/// parameter ("application/json; state=draining"), so that every listing shows it without reading a single record.
/// </summary>
internal sealed record InstanceRecord(string Id, Uri PeerAddress, DateTimeOffset Started, long Seq,
    MemberState State = MemberState.Active, MemberLoad? Load = null)
{
    private const int MaxNameLength = 128;
    private const string ContentTypePrefix = "application/json; state=";

    private static readonly SearchValues<char> NameChars =
        SearchValues.Create("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.");

    private static readonly string[] ContentTypes =
        [.. Enum.GetValues<MemberState>().Select(s => ContentTypePrefix + JsonNamingPolicy.CamelCase.ConvertName(s.ToString()))];

    private static readonly JsonSerializerOptions Json = new(JsonSerializerDefaults.Web)
    {
        RespectNullableAnnotations = true,
        RespectRequiredConstructorParameters = true,
        Converters = { new JsonStringEnumConverter<MemberState>(JsonNamingPolicy.CamelCase, allowIntegerValues: false) },
    };

    public static InstanceRecord Of(Member member, long seq) =>
        new(member.Id, member.PeerAddress, member.Started, seq, member.State, member.Load);

    public byte[] ToJson() => JsonSerializer.SerializeToUtf8Bytes(this, Json);

    public Member ToMember() => new(Id, PeerAddress, Started) { State = State, Load = Load };

    /// <summary>The content type a record of this state is written with.</summary>
    public static string ContentTypeOf(MemberState state) => ContentTypes[(int)state];

    /// <summary>The state a listed content type names; null if it names none (a store that does not list content types, an old record).</summary>
    public static MemberState? StateOf(string? contentType)
    {
        for (var i = 0; i < ContentTypes.Length; i++)
        {
            if (string.Equals(contentType, ContentTypes[i], StringComparison.OrdinalIgnoreCase))
            {
                return (MemberState)i;
            }
        }

        return null;
    }

    /// <summary>The member a blob holds; null if it holds no valid record.</summary>
    public static Member? Parse(byte[] json)
    {
        try
        {
            var r = JsonSerializer.Deserialize<InstanceRecord>(json, Json);
            return r is { PeerAddress.IsAbsoluteUri: true } && IsValidName(r.Id) && Enum.IsDefined(r.State) ? r.ToMember() : null;
        }
        catch (JsonException)
        {
            return null;
        }
    }

    public static bool IsValidName(string name) =>
        name.Length is > 0 and <= MaxNameLength && name[0] != '.' && !name.AsSpan().ContainsAnyExcept(NameChars);

    public static void ValidateName(string? name, string what, string paramName)
    {
        ArgumentNullException.ThrowIfNull(name, paramName);
        if (!IsValidName(name))
        {
            throw new ArgumentException(
                $"The {what} '{name}' cannot name a membership blob: use 1 to {MaxNameLength} letters, digits, '-', '_' or '.', not starting with '.'.",
                paramName);
        }
    }
}
