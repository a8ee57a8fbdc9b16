using FaaST.ScaleController.Frontend;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>The frontend's settings: defaults and validation.</summary>
public sealed class FrontendOptionsTests
{
    [Fact]
    public void The_defaults_are_the_documented_ones_and_valid()
    {
        var options = new FrontendOptions().Validate();

        Assert.Equal(1000, options.MaxQueueLength);
        Assert.Equal(TimeSpan.FromSeconds(30), options.QueueTimeout);
        Assert.Equal(TimeSpan.FromSeconds(2), options.ConnectTimeout);
        Assert.Equal(TimeSpan.FromSeconds(1), options.RetryAfter);
        Assert.Equal(2, options.MaxRetries);
        Assert.Equal(64 * 1024, options.CopyBufferSize);
    }

    [Theory]
    [InlineData(nameof(FrontendOptions.MaxQueueLength), "FrontendOptions.MaxQueueLength is -1: it must be 0 or more")]
    [InlineData(nameof(FrontendOptions.QueueTimeout), "FrontendOptions.QueueTimeout is -00:00:01: it must not be negative")]
    [InlineData(nameof(FrontendOptions.ConnectTimeout), "FrontendOptions.ConnectTimeout is 00:00:00: it must be positive")]
    [InlineData(nameof(FrontendOptions.RetryAfter), "FrontendOptions.RetryAfter is 00:00:00.5000000: it must be at least 1 s (Retry-After is whole seconds)")]
    [InlineData(nameof(FrontendOptions.MaxRetries), "FrontendOptions.MaxRetries is -1: it must be 0 or more")]
    [InlineData(nameof(FrontendOptions.CopyBufferSize), "FrontendOptions.CopyBufferSize is 100: it must be between 4096 and 4194304 bytes")]
    public void An_out_of_range_setting_is_refused_naming_it(string setting, string message)
    {
        var options = setting switch
        {
            nameof(FrontendOptions.MaxQueueLength) => new FrontendOptions { MaxQueueLength = -1 },
            nameof(FrontendOptions.QueueTimeout) => new FrontendOptions { QueueTimeout = TimeSpan.FromSeconds(-1) },
            nameof(FrontendOptions.ConnectTimeout) => new FrontendOptions { ConnectTimeout = TimeSpan.Zero },
            nameof(FrontendOptions.RetryAfter) => new FrontendOptions { RetryAfter = TimeSpan.FromMilliseconds(500) },
            nameof(FrontendOptions.MaxRetries) => new FrontendOptions { MaxRetries = -1 },
            _ => new FrontendOptions { CopyBufferSize = 100 },
        };

        var error = Assert.Throws<ArgumentException>(() => new AppFrontend("app", options, NullLogger.Instance));

        Assert.Equal(setting, error.ParamName);
        Assert.StartsWith(message, error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_instance_added_twice_is_refused_naming_it_and_the_app()
    {
        await using var frontend = new AppFrontend("shop", new FrontendOptions(), NullLogger.Instance);
        frontend.AddInstance(new InstanceEndpoint("i1", new Uri("http://127.0.0.1:1/"), "v1"));

        var error = Assert.Throws<ArgumentException>(() => frontend.AddInstance(new InstanceEndpoint("i1", new Uri("http://127.0.0.1:2/"), "v2")));

        Assert.StartsWith("instance i1 is already in app \"shop\"'s frontend", error.Message, StringComparison.Ordinal);
    }
}
