/// Why bytes failed to decode. Pure: raised by the codecs in this folder, which never touch
/// the filesystem; the layers above decide whether it means "not yet written" or corruption.
package enum FormatError: Error, Equatable, Sendable {
    /// The bytes end before the structure does.
    case truncated
    /// The leading magic bytes are not the expected ones.
    case badMagic
    /// Written by a newer, incompatible major version of the format.
    case unsupportedVersion(major: UInt16)
    /// A stored checksum does not match the bytes it covers.
    case checksumMismatch
    /// A field holds a value the format does not allow.
    case invalidField(String)
    /// A journal frame whose checksum holds but that does not carry its segment's tag: bytes of
    /// a key, or of another segment (version 3).
    case foreignRecord
}
