#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform

/// One open journal segment, `journal/<generation as 16 hex digits>`.
///
/// Opened for reading and appending (`O_APPEND`), so every record lands at the end in one
/// `write(2)`. The flock on this descriptor is the append lock of the segment: puts hold it
/// shared, so they append at once (version 3); a change decided from the current index holds it
/// exclusively, as does sealing and repairing.
package final class JournalSegment {
    package let generation: UInt64
    package let header: SegmentHeader
    package let file: FileDescriptor
    /// The segment's full path, for messages.
    package let path: String

    private init(generation: UInt64, header: SegmentHeader, file: consuming FileDescriptor, path: String) {
        self.generation = generation
        self.header = header
        self.file = file
        self.path = path
    }

    package static func name(_ generation: UInt64) -> String {
        var name = "\(CacheDirectory.journalDirectory)/"
        let digits = String(generation, radix: 16)
        name += String(repeating: "0", count: max(0, 16 - digits.count)) + digits
        return name
    }

    /// The oldest of `generations` (oldest first) whose segment opens, passing over damaged
    /// ones (not a segment, or something else in its place) except the last; `nil` when none
    /// exists.
    package static func oldestThatOpens(among generations: [UInt64], in directory: CacheDirectory) throws
        -> JournalSegment?
    {
        for generation in generations {
            do {
                if let segment = try open(generation, in: directory) { return segment }
            } catch let error as SharedCacheError
                where generation != generations.last && [.corruptData, .unsafePath].contains(error.code)
            {
                continue
            }
        }
        return nil
    }

    /// Generations present in `journal/`, oldest first; names that are not generations are ignored.
    package static func generations(in directory: CacheDirectory) throws -> [UInt64] {
        try directory.contents(of: CacheDirectory.journalDirectory)
            .compactMap { $0.utf8.count == 16 ? UInt64($0, radix: 16) : nil }
            .sorted()
    }

    /// Opens and checks a segment; `nil` when it does not exist (not created yet, or retired).
    package static func open(_ generation: UInt64, in directory: CacheDirectory) throws -> JournalSegment? {
        let name = name(generation)
        guard let file = try directory.openIfPresent(name, flags: O_RDWR | O_APPEND | O_NONBLOCK) else { return nil }
        try directory.requireRegularFile(
            file, named: name, role: "journal segment \(generation)", advice: "run `sharedcache verify --repair`")
        var bytes = [UInt8](repeating: 0, count: SegmentHeader.size)
        let count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        func notASegment(_ error: FormatError) -> SharedCacheError {
            SharedCacheError(
                .corruptData,
                "\(directory.path)/\(name) is not a journal segment (\(error)); remove it and run "
                    + "`sharedcache verify --repair`", path: "\(directory.path)/\(name)")
        }
        let header: SegmentHeader
        do {
            guard count == SegmentHeader.size else { throw FormatError.truncated }
            header = try bytes.withUnsafeBytes { buffer throws(FormatError) in try SegmentHeader.decode(buffer) }
        } catch let error as FormatError {
            // A damaged header; an intact one of a newer version is refused as it is.
            if case .unsupportedVersion = error { throw notASegment(error) }
            guard let rebuilt = try rebuildHeader(of: file, generation: generation, in: directory) else {
                throw notASegment(error)
            }
            header = rebuilt
        }
        // An intact header of another generation: another segment, put here by hand.
        guard header.generation == generation else { throw notASegment(.invalidField("generation")) }
        return JournalSegment(generation: generation, header: header, file: file, path: "\(directory.path)/\(name)")
    }

    /// Writes a damaged header anew when the records after it show what it was
    /// (``SegmentHeader/reconstructed(generation:records:firstSequence:)``): its name gives the
    /// generation, its first record the salt (version 3) or the first sequence number (before),
    /// and in version 3 the manifest that names it the first sequence number. The header is
    /// never written otherwise, so every process that finds it damaged writes the same bytes.
    /// `nil` when it cannot be.
    private static func rebuildHeader(
        of file: borrowing FileDescriptor, generation: UInt64, in directory: CacheDirectory
    ) throws -> SegmentHeader? {
        // Enough records to tell the versions apart; a first record may be up to 1 MiB.
        let size = try file.sizeAndLinkCount().size
        guard size > Int64(SegmentHeader.size) else { return nil }
        let length = Int(min(size - Int64(SegmentHeader.size), Int64(JournalRecord.maximumPayloadSize + 4096)))
        var records = [UInt8](repeating: 0, count: length)
        let count = try records.withUnsafeMutableBytes {
            try file.read(fromAbsoluteOffset: Int64(SegmentHeader.size), into: $0)
        }
        // A checkpoint names the segment it made, right after the seal it covers.
        let manifest = try ManifestFile.readHeader(in: directory)
        let firstSequence = manifest.flatMap { $0.generation == generation ? $0.lastSequence + 1 : nil }
        guard
            let header = records.withUnsafeBytes({
                SegmentHeader.reconstructed(
                    generation: generation, records: UnsafeRawBufferPointer(rebasing: $0[..<count]),
                    firstSequence: firstSequence)
            })
        else { return nil }
        let written = try writeInPlace(header.encoded(), at: 0, of: file, named: name(generation), in: directory)
        return written ? header : nil
    }

    /// Writes `bytes` at `offset` of the segment file `file`, in place: the segment's own
    /// descriptor appends wherever it writes (`O_APPEND`). Flushed, as a header is whatever
    /// `durable` says. Whether it wrote: not if something else was put at the name since.
    static func writeInPlace(
        _ bytes: [UInt8], at offset: Int64, of file: borrowing FileDescriptor, named name: String,
        in directory: CacheDirectory, flush: Bool = true
    ) throws -> Bool {
        guard let writer = try directory.openIfPresent(name, flags: O_WRONLY | O_NONBLOCK) else { return false }
        let (opened, expected) = (try writer.status(), try file.status())
        guard opened.device == expected.device && opened.inode == expected.inode else { return false }
        try bytes.withUnsafeBytes { try writer.writeAll($0, atAbsoluteOffset: offset) }
        if flush { try writer.synchronizeData() }
        return true
    }

    /// Creates a segment, with a salt of its own, unless it already exists (another process may
    /// have created it first: its header, salt included, is then the one every process uses).
    ///
    /// The header is written to `tmp/`, flushed, and renamed into place without replacing, so
    /// a segment never exists without its whole header, even after a power loss. The flush is
    /// made whatever `durable` says: a rename without replacing brings no data with it on ext4
    /// (`auto_da_alloc` covers renames over a file), and a segment left empty would make the
    /// directory unreadable. It costs one `fdatasync` per checkpoint. `durable` adds the
    /// directory's flush, which makes the new name itself survive.
    package static func create(
        _ generation: UInt64, firstSequence: UInt64, in directory: CacheDirectory, durable: Bool
    ) throws {
        let name = name(generation)
        let salt = UInt32.random(in: 1...UInt32.max)
        let bytes = SegmentHeader(generation: generation, firstSequence: firstSequence, salt: salt).encoded()
        do {
            try directory.publishNewFile(
                purpose: "segment", durable: true,
                write: { file in try bytes.withUnsafeBytes { try file.writeAll($0) } },
                publish: { temporary in
                    try directory.renameWithoutReplacing(temporary, to: name)
                })
        } catch let error as SystemError {
            // Another process created it first; every process uses its header.
            guard error.errno == EEXIST else { throw error }
            return
        }
        if durable { try directory.synchronizeDirectory(containing: name) }
    }
}
