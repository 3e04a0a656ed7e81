import Foundation

@testable import SharedCache

/// Reading a journal segment's header from its file, for tests that write records into it.
enum SegmentFile {
    static func header(_ path: String) throws -> SegmentHeader {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)).prefix(SegmentHeader.size))
        return try bytes.withUnsafeBytes { try SegmentHeader.decode($0) }
    }

    /// One record framed as the segment at `path` frames its records, numbered `sequence` where
    /// records carry their numbers.
    static func frame(_ record: JournalRecord, for path: String, sequence: UInt64) throws -> [UInt8] {
        var writer = ByteWriter()
        record.encode(mark: try header(path).mark(forSequence: sequence), into: &writer)
        return writer.bytes
    }

    /// Appends `bytes` to the segment at `path`, as a writer of the journal would (whole, torn,
    /// or after a seal).
    static func append(_ bytes: some DataProtocol, to path: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
    }
}
