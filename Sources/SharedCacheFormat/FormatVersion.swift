/// The `format` file: which version of the on-disk format a directory holds.
///
/// ```
/// format-file = "sharedcache " major "." minor LF      ; ASCII, e.g. "sharedcache 2.0\n"
/// ```
/// A reader refuses a directory whose major version is newer than its own; a newer minor version
/// only adds things an older reader may ignore (record types, trailing fields).
package struct FormatVersion: Equatable, Sendable, CustomStringConvertible {
    /// 2.0: small bodies in pack segments, 20-byte locations. 2.1: the `lost` journal record,
    /// which a repair writes over damaged bytes (2.0 readers skip it). 3.0: puts append to the
    /// journal at once, under a shared lock: records are numbered by their place and carry their
    /// segment's tag, and a stored record supersedes where it is applied. Directories of versions
    /// 1 and 2 are upgraded in place when opened (see `sharedcache(5)`). 3.1: a stored HTTP
    /// response's flag 2 (a shared cache stored it) and `config`'s `http-audience`, both of which
    /// a 3.0 reader ignores.
    package static let current = FormatVersion(major: 3, minor: 1)
    package static let fileName = "format"

    package var major: UInt16
    package var minor: UInt16

    package init(major: UInt16, minor: UInt16) {
        self.major = major
        self.minor = minor
    }

    package var description: String { "\(major).\(minor)" }

    package func encoded() -> [UInt8] {
        Array("sharedcache \(major).\(minor)\n".utf8)
    }

    /// Parses a `format` file.
    ///
    /// - Throws: `badMagic` when the file is not a SharedCache format file, `invalidField` when
    ///   its version is unreadable, `unsupportedVersion` when its major version is newer.
    package static func decode(_ bytes: [UInt8]) throws(FormatError) -> FormatVersion {
        let prefix = Array("sharedcache ".utf8)
        guard bytes.starts(with: prefix) else { throw .badMagic }
        var text = String(decoding: bytes.dropFirst(prefix.count), as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = UInt16(parts[0]), let minor = UInt16(parts[1]) else {
            throw .invalidField("version \"\(text)\"")
        }
        guard major <= current.major else { throw .unsupportedVersion(major: major) }
        return FormatVersion(major: major, minor: minor)
    }
}
