using System.Text;

namespace FaaST.Membership.Tests;

/// <summary>The instance record's format, old and new, and the ring a view builds (no storage).</summary>
public sealed class InstanceRecordTests
{
    private static readonly DateTimeOffset Started = new(2026, 1, 1, 0, 0, 0, TimeSpan.Zero);

    [Fact]
    public void RecordOfAnOlderVersion_WithoutStateOrLoad_ParsesAsActive()
    {
        var member = InstanceRecord.Parse("""{"id":"i-1","peerAddress":"http://127.0.0.1:7000/","started":"2026-01-01T00:00:00+00:00","seq":3}"""u8.ToArray());
        Assert.Equal(new Member("i-1", new Uri("http://127.0.0.1:7000/"), Started), member);
        Assert.Equal(MemberState.Active, member!.State);
        Assert.Null(member.Load);
    }

    [Fact]
    public void Record_WithStateAndLoad_RoundTrips()
    {
        var member = new Member("i-2", new Uri("http://127.0.0.1:7001/"), Started)
        {
            State = MemberState.Draining,
            Load = new MemberLoad(3, 1, 1 << 20) { At = Started.AddMinutes(1) },
        };
        var json = InstanceRecord.Of(member, 9).ToJson();
        Assert.Contains("\"state\":\"draining\"", Encoding.UTF8.GetString(json), StringComparison.Ordinal);
        Assert.Equal(member, InstanceRecord.Parse(json));
    }

    [Theory]
    [InlineData("""{"id":"i-3","peerAddress":"http://127.0.0.1:7002/","started":"2026-01-01T00:00:00+00:00","seq":1,"state":"sleeping"}""")]
    [InlineData("""{"id":"i-3","peerAddress":"http://127.0.0.1:7002/","started":"2026-01-01T00:00:00+00:00","seq":1,"state":7}""")]
    [InlineData("""{"id":"i-3","peerAddress":"relative/","started":"2026-01-01T00:00:00+00:00","seq":1}""")]
    [InlineData("""{"peerAddress":"http://127.0.0.1:7002/","started":"2026-01-01T00:00:00+00:00","seq":1}""")]
    [InlineData("""{"id":"i-3","peerAddress":"http://127.0.0.1:7002/","started":"2026-01-01T00:00:00+00:00","seq":1,"load":{"cachedBytes":1}}""")]
    [InlineData("not json")]
    public void UnusableRecords_AreNoMember(string json) => Assert.Null(InstanceRecord.Parse(Encoding.UTF8.GetBytes(json)));

    [Fact]
    public void ContentType_NamesTheState_AndOnlyOurContentTypesNameOne()
    {
        foreach (var state in Enum.GetValues<MemberState>())
        {
            Assert.Equal(state, InstanceRecord.StateOf(InstanceRecord.ContentTypeOf(state)));
        }

        Assert.Equal("application/json; state=joining", InstanceRecord.ContentTypeOf(MemberState.Joining));
        Assert.Null(InstanceRecord.StateOf("application/json"));
        Assert.Null(InstanceRecord.StateOf(null));
        Assert.Null(InstanceRecord.StateOf("application/json; state=asleep"));
    }

    [Fact]
    public void Ring_HoldsTheActiveMembers_OrEveryoneWhenNoneIsActive()
    {
        var (a, b, c) = (Of("a", MemberState.Active), Of("b", MemberState.Draining), Of("c", MemberState.Joining));
        var view = MembershipView.Of([c, b, a], HashRing.DefaultVirtualNodes);
        Assert.Equal(["a", "b", "c"], view.Members.Select(m => m.Id));
        Assert.Equal(["a"], view.Ring.Members.Select(m => m.Id));

        // The last instances all draining (or all starting): keys still have an owner, the same on every instance.
        var none = MembershipView.Of([b, c], HashRing.DefaultVirtualNodes);
        Assert.Equal(["b", "c"], none.Ring.Members.Select(m => m.Id));
        Assert.Empty(MembershipView.Of([], HashRing.DefaultVirtualNodes).Ring.Members);
    }

    private static Member Of(string id, MemberState state) => new(id, new Uri("http://127.0.0.1:7003/"), Started) { State = state };
}
