namespace FaaST.Storage.Tests;

/// <summary>The tests of this collection share one Azurite (FaaST.TestSupport.AzuriteFixture).</summary>
[CollectionDefinition(Name)]
public sealed class AzuriteCollection : ICollectionFixture<AzuriteFixture>
{
    public const string Name = "Azurite";
}
