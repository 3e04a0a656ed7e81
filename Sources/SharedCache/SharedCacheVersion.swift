/// The version of this SharedCache release, as the tools print it.
public enum SharedCacheVersion {
    public static let string = "0.1.0"
}
