using FaaST.Protos.Keda;
using Google.Protobuf.Reflection;

namespace FaaST.ScaleController.Tests.Keda;

/// <summary>
/// protos/externalscaler.proto against KEDA's published contract (kedacore/keda, pkg/scalers/externalscaler):
/// KEDA's client encodes by field number and type, so a renumbered or retyped field would break every
/// ScaledObject silently. The expectations are KEDA's specification, written out.
/// </summary>
public sealed class ExternalScalerContractTests
{
    private static readonly FileDescriptor File = ExternalscalerReflection.Descriptor;

    [Fact]
    public void TheServiceIsKedas_WithItsFourMethods_AndStreamIsActiveStreamsItsAnswers()
    {
        Assert.Equal("externalscaler", File.Package);
        var service = Assert.Single(File.Services);
        Assert.Equal("externalscaler.ExternalScaler", service.FullName);
        Assert.Equal(
            [
                ("IsActive", "ScaledObjectRef", "IsActiveResponse", false),
                ("StreamIsActive", "ScaledObjectRef", "IsActiveResponse", true),
                ("GetMetricSpec", "ScaledObjectRef", "GetMetricSpecResponse", false),
                ("GetMetrics", "GetMetricsRequest", "GetMetricsResponse", false),
            ],
            service.Methods.Select(m => (m.Name, m.InputType.Name, m.OutputType.Name, m.IsServerStreaming)).ToArray());
        Assert.All(service.Methods, m => Assert.False(m.IsClientStreaming));
    }

    [Theory]
    [InlineData("ScaledObjectRef", "name:1:String namespace:2:String scalerMetadata:3:map<String,String>")]
    [InlineData("IsActiveResponse", "result:1:Bool")]
    [InlineData("GetMetricSpecResponse", "metricSpecs:1:repeated MetricSpec")]
    [InlineData("MetricSpec", "metricName:1:String targetSize:2:Int64 targetSizeFloat:3:Double")]
    [InlineData("GetMetricsRequest", "scaledObjectRef:1:ScaledObjectRef metricName:2:String")]
    [InlineData("GetMetricsResponse", "metricValues:1:repeated MetricValue")]
    [InlineData("MetricValue", "metricName:1:String metricValue:2:Int64 metricValueFloat:3:Double")]
    public void EachMessage_HasKedasFieldNamesNumbersAndTypes(string message, string fields)
    {
        var descriptor = File.MessageTypes.Single(m => m.Name == message);

        Assert.Equal(fields, string.Join(' ', descriptor.Fields.InFieldNumberOrder().Select(Describe)));
    }

    private static string Describe(FieldDescriptor f)
    {
        string TypeOf(FieldDescriptor d) => d.FieldType == FieldType.Message ? d.MessageType.Name : d.FieldType.ToString();
        var type = f.IsMap
            ? $"map<{TypeOf(f.MessageType.FindFieldByNumber(1))},{TypeOf(f.MessageType.FindFieldByNumber(2))}>"
            : (f.IsRepeated ? "repeated " : "") + TypeOf(f);
        return $"{f.Name}:{f.FieldNumber}:{type}";
    }
}
