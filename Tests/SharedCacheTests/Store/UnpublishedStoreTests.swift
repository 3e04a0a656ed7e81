import Foundation
import SharedCacheEngine
import SharedCacheTestSupport
import Testing

@testable import SharedCache

/// A streamed store told not to publish (`CacheEngine.store(…publishing:readingBody:)`): what the
/// HTTP layer uses for a download larger than the size limit, served but not stored.
@Suite("Streamed stores: a body not to be published is written once and handed back")
struct UnpublishedStoreTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// `size` bytes that differ, with a megabyte of zeros in the middle when there is room.
    static func body(size: Int) -> Data {
        var generator = SplitMix64(seed: 61)
        var data = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        if size > 2 << 20 { data.replaceSubrange((1 << 20)..<(2 << 20), with: Data(count: 1 << 20)) }
        return data
    }

    /// A reader handing on `body` 64 KiB at a time, its zeros as a run of zeros (a hole), as a
    /// streamed put of a sparse file does; `ended` says whether it returned `.end`.
    final class Reader {
        let body: Data
        var offset = 0
        var ended = false

        init(_ body: Data) { self.body = body }

        func next(_ buffer: UnsafeMutableRawBufferPointer) -> StreamedChunk {
            guard offset < body.count else {
                ended = true
                return .end
            }
            if body.count > 2 << 20, offset == 1 << 20 {
                offset += 1 << 20
                return .zeros(1 << 20)
            }
            let count = min(buffer.count, 64 << 10, body.count - offset)
            body.withUnsafeBytes { bytes in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
            }
            offset += count
            return .bytes(count)
        }
    }

    /// Told not to publish, once the body has ended, a store returns exactly the bytes read, and
    /// leaves nothing: no journal record, no entry (the key's earlier one stays), no blob, nothing
    /// in `tmp/`. A small body (packed, had it been stored) and a large one (a blob's temporary
    /// file, holes and all) alike.
    @Test(arguments: [1000, 3 << 20])
    func aStoreToldNotToPublishReturnsTheBodyAndLeavesNothing(size: Int) throws {
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "k", data: Data("earlier".utf8))
        let before = try cache.statistics()
        let body = Self.body(size: size)
        let reader = Reader(body)
        var asked = 0
        let stored = try cache.engine.store(
            key: "k", metadata: EntryMetadata(), storedAt: 0, expiresAt: .max,
            publishing: {
                // Asked once, and only once the body has ended.
                #expect(reader.ended)
                asked += 1
                return false
            }, readingBody: reader.next)
        guard case .unpublished(let returned) = stored else {
            Issue.record("the body was stored")
            return
        }
        #expect(asked == 1)
        #expect(returned == body)
        let after = try cache.statistics()
        #expect(after.journalSequence == before.journalSequence, "a record was journaled")
        #expect(after.entryCount == 1 && after.totalBytes == before.totalBytes)
        #expect(try cache.get(key: "k")?.data == Data("earlier".utf8))
        #expect(try blobFiles(in: directory("cache")).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory("cache/tmp")).isEmpty)
        #expect(try cache.verify().isClean)
        // Told to publish, the same store stores it.
        let published = try cache.engine.store(
            key: "k", metadata: EntryMetadata(), storedAt: 0, expiresAt: .max, publishing: { true },
            readingBody: Reader(body).next)
        guard case .stored(let version) = published else {
            Issue.record("the body was not stored")
            return
        }
        #expect(version.entry.size == UInt64(size))
        #expect(try cache.get(key: "k")?.data == body)
    }

    /// A large body handed back is mapped from its temporary file, which has no name: the file's
    /// space is held by the mapping alone, and goes back when the `Data` does.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/maps"), "needs /proc/self/maps"))
    func aLargeBodyHandedBackIsMappedFromAFileThatGoesWithIt() throws {
        let cache = try SharedCache(directory: directory("cache"))
        let temporaryFolder = URL(fileURLWithPath: directory("cache/tmp")).resolvingSymlinksInPath().path + "/"
        func mappings() throws -> [String] {
            // Read to the end: `String(contentsOfFile:)` stops after the first read of a procfs
            // file, which in a process with many mappings is a small part of it.
            let maps = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps")).readToEnd() ?? Data()
            return String(decoding: maps, as: UTF8.self).split(separator: "\n")
                .filter { $0.contains(temporaryFolder) }.map(String.init)
        }
        let body = Self.body(size: 3 << 20)
        do {
            let stored = try cache.engine.store(
                key: "k", metadata: EntryMetadata(), storedAt: 0, expiresAt: .max, publishing: { false },
                readingBody: Reader(body).next)
            guard case .unpublished(let returned) = stored else {
                Issue.record("the body was stored")
                return
            }
            try withExtendedLifetime(returned) {
                #expect(returned == body)
                let held = try mappings()
                #expect(held.count == 1 && held.allSatisfy { $0.hasSuffix("(deleted)") }, "\(held)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory("cache/tmp")).isEmpty)
            }
        }
        #expect(try mappings().isEmpty)
    }
}
