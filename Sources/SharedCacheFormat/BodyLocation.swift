/// Where an entry's body lives, as the journal and the index record it: above the engine's
/// body store, an opaque value that also names the version (it is never reused, so two puts
/// of one key never share a location).
///
/// ```
/// location = pack:u64 position:u64 length:u32     ; 20 bytes in format version 2
/// ```
/// A small body is a record in a pack segment, `packs/<pack>`: `position` is the record's
/// offset in it and `length` its size. A large body is a blob file of its own,
/// `blobs/<xx>/<hash>.<blob-id>`: `pack` is 0, `position` the blob ID and `length` 0. Format
/// version 1 had blob files only and recorded a location as the blob ID alone (`blob-id:u64`).
package struct BodyLocation: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The pack segment holding the body, or 0 for a blob file of its own.
    package var pack: UInt64
    /// The record's offset in its pack, or the blob ID.
    package var position: UInt64
    /// The record's size in its pack (frame, header and body); 0 for a blob file.
    package var length: UInt32

    /// Bytes of an encoded location.
    package static let encodedSize = 20

    /// A blob file of its own.
    package init(blobID: UInt64) {
        self.init(pack: 0, position: blobID, length: 0)
    }

    /// A record in a pack segment.
    package init(pack: UInt64, position: UInt64, length: UInt32) {
        self.pack = pack
        self.position = position
        self.length = length
    }

    /// Whether the body is a record in a pack segment.
    package var isPacked: Bool { pack != 0 }

    /// The blob ID of a body in a file of its own (meaningless for a packed one).
    package var blobID: UInt64 { position }

    // Written out and inlinable: the synthesized one was called through the protocol witness
    // from other modules, in every index and memory-tier comparison. It compares every stored
    // property, as the synthesized hash(into:) hashes them: a new property goes in both.
    @inlinable
    package static func == (lhs: BodyLocation, rhs: BodyLocation) -> Bool {
        lhs.pack == rhs.pack && lhs.position == rhs.position && lhs.length == rhs.length
    }

    package static func < (lhs: BodyLocation, rhs: BodyLocation) -> Bool {
        (lhs.pack, lhs.position) < (rhs.pack, rhs.position)
    }

    package var description: String {
        isPacked
            ? "pack \(String(pack, radix: 16)) at \(position) (\(length) bytes)"
            : "blob \(String(blobID, radix: 16))"
    }
}

extension ByteWriter {
    package mutating func append(_ location: BodyLocation) {
        append(location.pack)
        append(location.position)
        append(location.length)
    }
}

extension ByteReader {
    /// A location as format version `major` encodes it: a bare blob ID in version 1.
    package mutating func readLocation(major: UInt16) throws(FormatError) -> BodyLocation {
        guard major >= 2 else { return BodyLocation(blobID: try read()) }
        return BodyLocation(pack: try read(), position: try read(), length: try read())
    }
}
