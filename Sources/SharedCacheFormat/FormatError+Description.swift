extension FormatError: CustomStringConvertible {
    /// What is wrong with the bytes, for a person: messages interpolate this, never the case name.
    package var description: String {
        switch self {
        case .truncated: "it ends before its last field"
        case .badMagic: "it does not start with the bytes that identify it"
        case .unsupportedVersion(let major): "it is format version \(major), newer than this SharedCache reads"
        case .checksumMismatch: "its checksum does not match its contents"
        case .invalidField(let detail): "invalid \(detail)"
        case .foreignRecord: "it does not carry its journal segment's tag"
        }
    }
}
