namespace FaaST.Cachelet.Index;

/// <summary>
/// A blob in the storage namespace: account (or endpoint), container, blob name. Compared
/// ordinally; the hash (per process, randomized like string hashes) is computed once, when the key
/// is made, so dictionary lookups on the hit path do not hash three strings again. Not for
/// placement across processes: membership hashes keys its own, stable way.
/// </summary>
public readonly record struct BlobKey
{
    private readonly int _hash;

    public BlobKey(string account, string container, string blob)
    {
        ArgumentNullException.ThrowIfNull(account);
        ArgumentNullException.ThrowIfNull(container);
        ArgumentNullException.ThrowIfNull(blob);
        Account = account;
        Container = container;
        Blob = blob;
        _hash = HashCode.Combine(
            string.GetHashCode(account, StringComparison.Ordinal),
            string.GetHashCode(container, StringComparison.Ordinal),
            string.GetHashCode(blob, StringComparison.Ordinal));
    }

    /// <summary>Storage account name or blob endpoint, as the caller spells it (not normalized here).</summary>
    public string Account { get; }

    public string Container { get; }

    public string Blob { get; }

    public bool Equals(BlobKey other) =>
        _hash == other._hash
        && string.Equals(Blob, other.Blob, StringComparison.Ordinal)
        && string.Equals(Container, other.Container, StringComparison.Ordinal)
        && string.Equals(Account, other.Account, StringComparison.Ordinal);

    public override int GetHashCode() => _hash;

    public override string ToString() => $"{Account}/{Container}/{Blob}";
}
