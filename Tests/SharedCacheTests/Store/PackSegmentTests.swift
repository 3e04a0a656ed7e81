import Foundation
import SharedCacheCLI
import SharedCacheEngine
import SharedCacheFormat
import SharedCacheTestSupport
import Testing

@testable import SharedCache

/// sharedcache(5), "Pack segment": small bodies as records in segments one process owns.
@Suite("Pack segments: small bodies packed, read by one copy or pread, reclaimed a segment at a time")
struct PackSegmentTests {
    static let diskOnly = Configuration(memoryCostLimit: 0)

    static func body(_ index: Int, size: Int = 1000) -> Data {
        Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
    }

    @Test func smallBodiesArePackedIntoOneSegmentAndLargeOnesGetAFile() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in 0..<100 { try cache.put(key: "k\(index)", data: Self.body(index)) }
        try cache.put(key: "at the threshold", data: Self.body(1, size: Configuration.defaultPackThreshold))
        try cache.put(key: "large", data: Self.body(2, size: Configuration.defaultPackThreshold + 1))
        #expect(try packSegments(in: directory("cache")).count == 1)
        #expect(try blobFiles(in: directory("cache")).count == 1)

        let other = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in 0..<100 { #expect(try other.get(key: "k\(index)")?.data == Self.body(index)) }
        #expect(try other.get(key: "at the threshold")?.data == Self.body(1, size: Configuration.defaultPackThreshold))
        #expect(try other.get(key: "large")?.data.count == Configuration.defaultPackThreshold + 1)
        #expect(try other.verify().problems.isEmpty)

        let stat = try Tool.admin.run(["--dir", directory("cache"), "stat", "--json"])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(stat.output.utf8)) as? [String: Any])
        #expect(report["packSegments"] as? Int == 1)
        #expect((report["packBytes"] as? Int ?? 0) > 100 * 1000)
        #expect(report["packThreshold"] as? Int == Configuration.defaultPackThreshold)
    }

    /// sharedcache(5): a writer gives its segment up when the next record would take it past
    /// 64 MiB, and starts another; every record reads back from either (mutation: the one
    /// segment grew past its capacity and its mapping).
    @Test func aWriterGivesItsSegmentUpAtItsCapacity() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let size = Configuration.defaultPackThreshold
        let count = Int(PackSegments.segmentCapacity) / size + 8
        /// Filled with one byte, so that making 65 MiB of them costs little; the index first.
        func body(_ index: Int) -> Data {
            var data = Data(repeating: UInt8(truncatingIfNeeded: index), count: size)
            withUnsafeBytes(of: UInt64(index)) { data.replaceSubrange(0..<8, with: $0) }
            return data
        }
        for index in 0..<count { try cache.put(key: "k\(index)", data: body(index)) }
        let segments = try packSegments(in: directory("cache"))
        #expect(segments.count == 2)
        for segment in segments {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory("cache/packs/\(segment)"))
            #expect((attributes[.size] as? UInt64 ?? .max) <= PackSegments.segmentCapacity)
        }
        #expect(try blobFiles(in: directory("cache")).isEmpty)
        let other = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in stride(from: 0, to: count, by: 7) + [count - 1] {
            #expect(try other.get(key: "k\(index)")?.data == body(index))
        }
    }

    #if os(Linux)
    /// Segments are read through descriptors that spare each read the access-time update:
    /// `O_NOATIME` (0o1000000 on every architecture Swift runs on), allowed as the files are
    /// this user's. Checked from outside, in the flags /proc shows for every read-only
    /// descriptor of this process open on the segment.
    @Test func segmentsAreReadWithoutUpdatingAccessTimes() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "k", data: Self.body(1))
        #expect(try cache.get(key: "k")?.data == Self.body(1))
        let segment = directory("cache/packs/\(try #require(try packSegments(in: directory("cache")).first))")
        var readers = 0
        for (descriptor, target) in Self.openDescriptors() where target == segment {
            guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8),
                let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                let flags = Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8),
                flags & 0o3 == 0  // O_RDONLY: a reader, not this process's writer
            else { continue }
            readers += 1
            #expect(
                flags & 0o1_000_000 != 0,
                "descriptor \(descriptor) reads the segment with flags \(String(flags, radix: 8))")
        }
        #expect(readers >= 1)
        withExtendedLifetime(cache) {}  // its descriptors stay open until the scan is done
    }
    #endif

    /// Writers at the same time each own a segment; a writer that comes later takes on a
    /// segment nobody writes any more, so a tool run a thousand times leaves one, not a thousand.
    @Test func concurrentWritersOwnASegmentEachAndLaterOnesTakeOnAFinishedOne() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "here", data: Self.body(0))
        for worker in 0..<4 {
            #expect(try Worker.run(["put", directory("cache"), "there \(worker)", "from a worker"]).status == 0)
        }
        #expect(try packSegments(in: directory("cache")).count == 2)
        for worker in 0..<4 { #expect(try cache.get(key: "there \(worker)")?.data == Data("from a worker".utf8)) }
        #expect(try cache.verify().problems.isEmpty)
    }

    /// sharedcache(5): a record is padded with zeros to the next one's place. A writer encodes
    /// every record into one buffer it keeps, so this puts small records after a large one whose
    /// bytes are all 0xAB and reads the padding of each back from the segment.
    @Test func recordsAfterALargerOneArePaddedWithZeros() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "large", data: Data(repeating: 0xAB, count: 8000))
        for size in 1...15 {
            try cache.put(key: String(repeating: "k", count: size), data: Data(repeating: 0xAB, count: size))
        }
        let segment = try #require(try packSegments(in: directory("cache")).first)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(directory("cache"))/packs/\(segment)")))
        var position = PackRecord.segmentHeaderSize
        var records = 0
        while position < bytes.count {
            #expect(Array(bytes[position..<position + 4]) == PackRecord.recordMagic)
            let length = bytes.withUnsafeBytes {
                UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: position + 4, as: UInt32.self))
            }
            let next = Int(PackRecord.next(after: UInt64(position), length: length))
            #expect(bytes[position + Int(length)..<next].allSatisfy { $0 == 0 }, "record \(records)")
            position = next
            records += 1
        }
        #expect(records == 16)
        for size in 1...15 {
            #expect(try cache.get(key: String(repeating: "k", count: size))?.data == Data(repeating: 0xAB, count: size))
        }
    }

    /// sharedcache(5): the check ties a record to its place.
    @Test func aRecordReadAtAnotherPlaceFailsItsCheck() throws {
        let header = BlobHeader(
            bodySize: 3, bodyChecksum: CRC32C.checksum(Array("abc".utf8)), storedAt: 1, expiresAt: .max,
            keyHash: KeyHash(key: "k"), key: Array("k".utf8), etag: [], lastModified: [], attributes: [])
        let length = UInt32(PackRecord.length(headerSize: header.encoded().count, bodySize: 3))
        let record = Array("abc".utf8).withUnsafeBytes {
            PackRecord.encoded(header, body: $0, pack: 7, position: 32)
        }
        // Padded with zeros to the next record's place.
        #expect(record.count == (Int(length) + 7) / 8 * 8)
        #expect(record[Int(length)...].allSatisfy { $0 == 0 })
        try record.withUnsafeBytes { bytes in
            let decoded = try PackRecord.decode(bytes, at: BodyLocation(pack: 7, position: 32, length: length))
            #expect(BlobHeader(decoded.header, in: decoded.headerBytes) == header)
            #expect(throws: FormatError.checksumMismatch) {
                try PackRecord.decode(bytes, at: BodyLocation(pack: 7, position: 40, length: length))
            }
            #expect(throws: FormatError.checksumMismatch) {
                try PackRecord.decode(bytes, at: BodyLocation(pack: 8, position: 32, length: length))
            }
        }
    }

    /// A body byte or a header byte (in the key) flipped, in a record read whole by one `pread`
    /// and in one whose body is read to its place by a `preadv` (past `wholeRecordReadLimit`).
    @Test(arguments: [-1, 40], [1000, 8000])
    func aDamagedRecordIsAMissAndIsDiscarded(offset: Int, size: Int) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "first", data: Self.body(1, size: size))
        try cache.put(key: "victim", data: Self.body(2, size: size))
        try cache.put(key: "last", data: Self.body(3, size: size))
        let segment = directory("cache/packs/\(try #require(try packSegments(in: directory("cache")).first))")
        let location = try #require(try cache.engine.currentEntry(KeyHash(key: "victim"))).location
        let at = offset < 0 ? location.position + UInt64(location.length) - 1 : location.position + UInt64(offset)
        try flipByte(at: Int64(at), inFileAt: segment)

        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
        #expect(try !cache.contains(key: "victim"))
        #expect(try cache.get(key: "first")?.data == Self.body(1, size: size))
        #expect(try cache.get(key: "last")?.data == Self.body(3, size: size))
    }

    /// sharedcache(5), "Reading and recovery": a lost manifest comes back from the journal
    /// for packed entries, and no removed one comes back although its record is still there.
    @Test func aLostManifestBringsBackPackedEntriesButNoRemovedOne() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in 0..<20 { try cache.put(key: "k\(index)", data: Self.body(index)) }
        #expect(try cache.remove(key: "k7"))
        try cache.checkpoint()
        try cache.put(key: "k3", data: Self.body(33))
        try FileManager.default.removeItem(atPath: directory("cache/manifest"))

        let reopened = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        #expect(try reopened.statistics().rebuiltOnOpen)
        #expect(reopened.warnings.count == 1)  // a rebuild may lose packed entries: never in silence
        #expect(try reopened.statistics().entryCount == 19)
        for index in 0..<20 where index != 7 && index != 3 {
            #expect(try reopened.get(key: "k\(index)")?.data == Self.body(index))
        }
        #expect(try reopened.get(key: "k3")?.data == Self.body(33))
        #expect(try reopened.get(key: "k7") == nil)
    }

    /// The names of three finished segments, k0, k1 and k2 one in each (three writers at once,
    /// then closed), each opened by `reader`, which reads all three entries.
    static func threeFinishedSegments(in path: String, readBy reader: SharedCache) throws -> [String] {
        do {
            let writers = try (0..<3).map { _ in try SharedCache(directory: path, configuration: Self.diskOnly) }
            for (index, writer) in writers.enumerated() { try writer.put(key: "k\(index)", data: Self.body(index)) }
        }
        let segments = try packSegments(in: path)
        #expect(segments.count == 3)
        for index in 0..<3 { #expect(try reader.get(key: "k\(index)") != nil) }
        return segments
    }

    /// A finished segment with no entry left goes whole, and every process lets go of it.
    @Test func anEmptyFinishedSegmentIsRetiredAndEveryProcessClosesIt() throws {
        let directory = try TemporaryDirectory()
        let reader = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let segments = try Self.threeFinishedSegments(in: directory("cache"), readBy: reader)
        #expect(Self.openDescriptors(to: directory("cache/packs/")).count == 3)
        #if os(Linux)
        withKnownIssue("a sanitizer's runtime may keep segments unmapped", isIntermittent: true) {
            #expect(Self.mappedFiles(under: directory("cache/packs/")).count == 3)
        } when: {
            Requirements.underSanitizer
        }
        #endif
        #expect(try reader.remove(key: "k0"))
        #expect(try reader.remove(key: "k1"))
        try Self.age(segments.map { directory("cache/packs/\($0)") })

        // Another process retires them: the reader learns it from the journal alone. (It used
        // to keep every segment another process retired open, and mapped, once it had heard of
        // one: only the compacting process itself closed them.)
        let compaction = try Tool.admin.run(["--dir", directory("cache"), "compact", "--json"])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(compaction.output.utf8)) as? [String: Any])
        #expect(report["packSegmentsRetired"] as? Int == 2)
        #expect(try packSegments(in: directory("cache")).count == 1)
        #expect(try reader.get(key: "k2") != nil)
        #expect(Self.openDescriptors(to: directory("cache/packs/")).count == 1)
        #expect(Self.openDescriptors(to: directory("cache/packs/")).allSatisfy { !$0.hasSuffix("(deleted)") })
        #if os(Linux)
        // Nor does a mapping keep a deleted segment's space.
        #expect(Self.mappedFiles(under: directory("cache/packs/")).count <= 1)
        #expect(Self.mappedFiles(under: directory("cache/packs/")).allSatisfy { !$0.hasSuffix("(deleted)") })
        #endif
        #expect(try reader.verify().problems.isEmpty)
    }

    /// A process that fell behind a retired journal segment never reads the records saying
    /// which pack segments were retired meanwhile: it resynchronizes from the manifest. It then
    /// closes (and unmaps) every segment it holds whose file is gone, so their space comes back
    /// at once, not when it happens to open many others.
    @Test func aProcessThatResynchronizesClosesTheSegmentsRetiredMeanwhile() throws {
        let directory = try TemporaryDirectory()
        let reader = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let segments = try Self.threeFinishedSegments(in: directory("cache"), readBy: reader)
        #expect(try reader.remove(key: "k0"))
        #expect(try reader.remove(key: "k1"))
        #expect(Self.openDescriptors(to: directory("cache/packs/")).count == 3)
        try Self.age(segments.map { directory("cache/packs/\($0)") })

        // Other processes: the first compaction checkpoints (sealing segment 1), then retires
        // the two emptied pack segments, journaled in segment 2. Each later one checkpoints and
        // removes the segments sealed more than a minute ago: aged, 1 and then 2.
        let compaction = try Tool.admin.run(["--dir", directory("cache"), "compact", "--json"])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(compaction.output.utf8)) as? [String: Any])
        #expect(report["packSegmentsRetired"] as? Int == 2)
        for _ in 0..<2 {
            let journal = try FileManager.default.contentsOfDirectory(atPath: directory("cache/journal"))
            try Self.age(journal.map { directory("cache/journal/\($0)") })
            #expect(try Tool.admin.run(["--dir", directory("cache"), "compact"]).status == 0)
        }
        let journal = try FileManager.default.contentsOfDirectory(atPath: directory("cache/journal")).sorted()
        #expect(journal == ["0000000000000003", "0000000000000004"])

        #expect(try reader.get(key: "k2") != nil)
        #expect(try reader.statistics().resynchronizations == 1)
        #expect(try packSegments(in: directory("cache")).count == 1)
        #expect(Self.openDescriptors(to: directory("cache/packs/")).count == 1)
        #expect(Self.openDescriptors(to: directory("cache/packs/")).allSatisfy { !$0.hasSuffix("(deleted)") })
        #if os(Linux)
        #expect(Self.mappedFiles(under: directory("cache/packs/")).allSatisfy { !$0.hasSuffix("(deleted)") })
        #endif
    }

    /// Between calls a cache holds one file lock, on the segment it appends to; iOS ends an app
    /// suspended with a file lock in a shared container, so `prepareForSuspension()` lets go of
    /// it. Checked from another process (flock(1)) on every file of the directory; the next put
    /// takes a segment again.
    @Test(.enabled(if: Requirements.isInstalled("/usr/bin/flock"), "needs flock(1), from util-linux"))
    func preparedForSuspensionACacheHoldsNoFileLock() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "k0", data: Self.body(0))
        /// The files of the cache another process cannot lock right now.
        func locked() throws -> [String] {
            let files = try FileManager.default.subpathsOfDirectory(atPath: directory("cache")).filter {
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: directory("cache/\($0)"), isDirectory: &isDirectory)
                    && !isDirectory.boolValue
            }
            return try files.filter { file in
                let probe = try ChildProcess(
                    URL(fileURLWithPath: "/usr/bin/flock"),
                    arguments: ["--nonblock", directory("cache/\(file)"), "true"])
                return probe.wait() != .exited(0)
            }
        }
        let segment = "packs/\(try #require(try packSegments(in: directory("cache")).first))"
        #expect(try locked() == [segment])
        cache.prepareForSuspension()
        #expect(try locked() == [])
        try cache.put(key: "k1", data: Self.body(1))
        #expect(try packSegments(in: directory("cache")).count == 1, "the segment let go of is taken on again")
        for index in 0..<2 { #expect(try cache.get(key: "k\(index)")?.data == Self.body(index)) }
    }

    /// A file named as a pack segment that does not begin with one's header (other bytes) is
    /// reported by `verify` as not a segment, and `--repair` removes it; the entries stay. (It
    /// passed as a segment; the same bytes under another name were reported.) Left alone: one
    /// written in the last minute or held locked (a writer may be making it), and a segment
    /// entries live in, whatever its header says (a read never looks at it).
    ///
    /// Until the repair, this process never locks the planted file: the writer holding it is
    /// another process, and the report without repair comes from the tool. A lock this process
    /// took would outlive its `close` for as long as a child another test spawned meanwhile
    /// keeps its copy of the descriptor (from its fork until it closes every descriptor to run
    /// its program, which on a loaded machine can be long), and `verify` spares a segment it
    /// cannot lock: under the whole suite, the planted file once went unreported.
    @Test func aFileNamedAsASegmentThatIsNotOneIsReported() async throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in 0..<3 { try cache.put(key: "k\(index)", data: Self.body(index)) }
        let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let planted = "packs/00000000000000aa"
        try garbage.write(to: URL(fileURLWithPath: directory("cache/\(planted)")))
        #expect(try cache.verify().isClean, "too young to be anything but a segment being made")

        try Self.age([directory("cache/\(planted)")])
        // Held locked, as a writer making it would: spared too.
        let holder = try Worker.start(["hold-lock", directory("cache/\(planted)")], input: .pipe)
        defer { holder.signal(SIGKILL) }
        try #require(await holder.nextLine(within: .seconds(120)) == "holding")
        #expect(try cache.verify().isClean, "held by a writer")
        holder.closeInput()
        #expect(await holder.wait() == .exited(0))

        // A real segment whose header took damage (its creation time): its records check
        // themselves and still read, so it is spared while entries live in it.
        let live = "packs/\(try #require(try packSegments(in: directory("cache")).first { "packs/\($0)" != planted }))"
        let segment = try #require(FileHandle(forUpdatingAtPath: directory("cache/\(live)")))
        try segment.seek(toOffset: 16)
        try segment.write(contentsOf: Data([0xFF]))
        try segment.close()
        try Self.age([directory("cache/\(live)")])
        cache.prepareForSuspension()  // its writer lets go of it: spared for its entries alone

        let found = try await Tool.admin.run(["--dir", directory("cache"), "verify", "--json"])
        #expect(found.status == 65)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(found.output.utf8)) as? [String: Any])
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(problems.map { $0["path"] as? String } == [planted])
        #expect(problems.map { $0["kind"] as? String } == ["foreignFile"])
        #expect(FileManager.default.fileExists(atPath: directory("cache/\(planted)")), "looking removes nothing")

        let repaired = try cache.verify(repair: true)
        #expect(repaired.problems.map(\.path) == [planted])
        #expect(repaired.problems.map(\.kind) == [.foreignFile])
        #expect(repaired.problems.map(\.repaired) == [true])
        #expect(!FileManager.default.fileExists(atPath: directory("cache/\(planted)")))
        #expect(FileManager.default.fileExists(atPath: directory("cache/\(live)")))
        #expect(try cache.verify().isClean)
        for index in 0..<3 { #expect(try cache.get(key: "k\(index)")?.data == Self.body(index)) }
    }

    /// A socket where a pack segment belongs does not open as a file (ENXIO): `verify` reports
    /// it, `--repair` removes it, and compaction goes on. (The scan of finished segments failed
    /// with an I/O error on it.)
    @Test(.enabled(if: Requirements.isInstalled("/usr/bin/python3"), "binds the socket with python3"))
    func aSocketWhereASegmentBelongsIsReported() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "k0", data: Self.body(0))
        let planted = "packs/00000000000000ab"
        let bind = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/python3"),
            arguments: [
                "-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
                directory("cache/\(planted)"),
            ])
        #expect(bind.wait() == .exited(0))
        #expect(try cache.verify().problems.map(\.path) == [planted])
        #expect(try cache.compact().packs.segmentsRetired == 0)
        #expect(try cache.verify(repair: true).problems.map(\.repaired) == [true])
        #expect(try cache.verify().isClean)
        #expect(try cache.get(key: "k0")?.data == Self.body(0))
    }

    /// A packed record whose header fails its checksum, in a segment that is there, is a
    /// damaged body, not a missing one: verify looked for a file named "packs/… at 32" (the
    /// record's place, for people), found none, and said the journal named a body that did not
    /// exist (helper-57). The repair was and is the same: the entry is journaled as corrupt.
    @Test func aDamagedRecordHeaderIsReportedAsDamagedNotMissing() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "victim", data: Data(repeating: 7, count: 1000))
        try cache.put(key: "bystander", data: Data(repeating: 8, count: 1000))
        let location = try #require(try cache.engine.currentEntry(KeyHash(key: "victim"))).location
        let segment = directory("cache/packs/\(try #require(try packSegments(in: directory("cache")).first))")
        try flipByte(at: Int64(location.position) + 20, inFileAt: segment)  // inside the record's header

        let report = try cache.verify()
        #expect(report.problems.map(\.kind) == [.damagedBlob], "\(report.problems)")
        let repaired = try cache.verify(repair: true)
        #expect(repaired.problems.map(\.kind) == [.damagedBlob] && repaired.problems.allSatisfy(\.repaired))
        #expect(try cache.verify().isClean)
        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.get(key: "bystander")?.data == Data(repeating: 8, count: 1000))
    }

    /// The names of the pack segments (one, finished) of a writer that stored k0...k9 and is done:
    /// closing the cache finishes its segment.
    static func finishedSegmentOfTenEntries(in path: String) throws -> [String] {
        do {
            let writer = try SharedCache(directory: path, configuration: Self.diskOnly)
            for index in 0..<10 { try writer.put(key: "k\(index)", data: Self.body(index)) }
        }
        let old = try packSegments(in: path)
        #expect(old.count == 1)
        return old
    }

    /// A segment mostly dead: its live records move to the compactor's segment (journaled, so
    /// every process follows), and the old one goes whole; nobody hears of a removal.
    @Test func aMostlyDeadSegmentIsCompactedAndItsLiveEntriesMove() throws {
        let directory = try TemporaryDirectory()
        let old = try Self.finishedSegmentOfTenEntries(in: directory("cache"))
        let reader = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let remover = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let keys = try remover.entries().map(\.key).sorted()
        #expect(keys.count == 10)
        let kept = [keys[3], keys[8]]
        let bodies = try kept.map { try #require(try reader.get(key: $0)).data }
        for key in keys where !kept.contains(key) { #expect(try remover.remove(key: key)) }
        try Self.age(old.map { directory("cache/packs/\($0)") })

        let report = try remover.compact()
        #expect(report.packs.entriesMoved == 2)
        #expect(report.packs.segmentsRetired == 1)
        #expect(try !packSegments(in: directory("cache")).contains(old[0]))
        for (key, body) in zip(kept, bodies) {
            #expect(try reader.get(key: key)?.data == body)
            #expect(try SharedCache(directory: directory("cache")).get(key: key)?.data == body)
        }
        // The journal has the eight removals and two moves, and no removal of a moved entry.
        let journal = try Tool.admin.run(["--dir", directory("cache"), "journal"]).output
        let types = journal.split(separator: "\n").compactMap { $0.split(separator: " ").dropFirst().first }
        #expect(types.filter { $0 == "removed" }.count == 8)
        #expect(types.filter { $0 == "moved" }.count == 2)
        #expect(try reader.entries().map(\.key).sorted() == kept)
        #expect(try reader.verify().problems.isEmpty)
    }

    @Test func aSegmentItsWriterStillOwnsIsNeverRetired() throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try writer.put(key: "k", data: Self.body(0))
        #expect(try writer.remove(key: "k"))
        try Self.age(try packSegments(in: directory("cache")).map { directory("cache/packs/\($0)") })
        // Another instance's compaction: the writer instance holds its segment's lock.
        let other = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        #expect(try other.compact().packs.segmentsRetired == 0)
        try writer.put(key: "again", data: Self.body(1))
        #expect(try packSegments(in: directory("cache")).count == 1)
        #expect(try other.get(key: "again")?.data == Self.body(1))
    }

    /// A put writes its record a moment before it journals it, so a finished segment is left
    /// alone until nobody wrote it for the settle time (a minute): though no entry names it, it
    /// is not retired while young, and is once it settled.
    @Test func aFinishedSegmentIsLeftAloneUntilItSettles() throws {
        let directory = try TemporaryDirectory()
        do {
            // A writer that is done: closing the cache finishes its segment.
            let writer = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
            try writer.put(key: "k", data: Self.body(0))
            #expect(try writer.remove(key: "k"))
        }
        let segments = try packSegments(in: directory("cache"))
        #expect(segments.count == 1)
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        #expect(try cache.compact().packs.segmentsRetired == 0)
        #expect(try packSegments(in: directory("cache")) == segments)
        try Self.age(segments.map { directory("cache/packs/\($0)") })
        #expect(try cache.compact().packs.segmentsRetired == 1)
        #expect(try packSegments(in: directory("cache")).isEmpty)
    }

    /// A live record that fails its check when its mostly-dead segment is compacted is not
    /// copied: its entry is journaled as removed (corrupt), so that none is left naming the
    /// segment that goes (it would stay listed and counted, a miss for good, and fail `verify`).
    @Test func aDamagedRecordInACompactedSegmentIsRemovedNotMoved() throws {
        let directory = try TemporaryDirectory()
        let old = try Self.finishedSegmentOfTenEntries(in: directory("cache"))
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        for index in 2..<10 { #expect(try cache.remove(key: "k\(index)")) }
        // A body byte of k1's record flipped, before anyone read it.
        let location = try #require(try cache.engine.currentEntry(KeyHash(key: "k1"))).location
        try flipByte(
            at: Int64(location.position) + Int64(location.length) - 1, inFileAt: directory("cache/packs/\(old[0])"))
        try Self.age(old.map { directory("cache/packs/\($0)") })

        let report = try cache.compact()
        #expect(report.packs.segmentsRetired == 1)
        #expect(try !packSegments(in: directory("cache")).contains(old[0]))
        #expect(try cache.get(key: "k0")?.data == Self.body(0))
        #expect(try !cache.contains(key: "k1"))
        #expect(try cache.statistics().entryCount == 1)
        #expect(try cache.verify().isClean)
    }

    /// Backdates files past the compactor's settle time.
    static func age(_ paths: [String]) throws {
        for path in paths {
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
        }
    }

    /// The targets of this process's descriptors that contain `fragment`.
    static func openDescriptors(to fragment: String) -> [String] {
        openDescriptors().map(\.target).filter { $0.contains(fragment) }
    }

    /// The files under `fragment` this process has mapped, each once.
    static func mappedFiles(under fragment: String) -> Set<String> {
        Set(fileMappings().map(\.path).filter { $0.hasPrefix(fragment) })
    }

    /// This process's descriptors (their numbers, as /proc names them) and what each is open on.
    static func openDescriptors() -> [(descriptor: String, target: String)] {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.compactMap { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"))
                .map { (descriptor, $0) }
        }
    }
}

/// sharedcache(5), "Versions": directories of format versions 1 and 2 are upgraded in place.
@Suite("Format version 1 and 2 directories: read, upgraded in place, nothing lost")
struct FormatUpgradeTests {
    /// A directory an earlier format version made, kept in `Fixtures/`.
    enum Fixture: String, CaseIterable, CustomTestStringConvertible {
        /// Made by format version 1 with `sharedcache put` of key-a, key-b (twice), key-c
        /// (40 KB), key-gone (removed), a compaction, key-d, and the removal of key-a, so both
        /// its manifest and journal records after it are of version 1.
        case versionOne = "format-1"
        /// Made by format version 2.1 with `sharedcache put` of key-a, key-b, key-c (40 KB,
        /// packed), key-gone, key-large (200 KB, a blob file), the removal of key-gone, a
        /// compaction, key-b again (a `removed … superseded` record follows its `stored` one),
        /// key-d, and the removal of key-a.
        case versionTwo = "format-2"

        var testDescription: String { rawValue }
        var formatLine: String { self == .versionOne ? "sharedcache 1.0\n" : "sharedcache 2.1\n" }
        /// The keys it holds besides key-b, key-c and key-d.
        var moreKeys: [String] { self == .versionOne ? [] : ["key-large"] }
    }

    static func directory(_ fixture: Fixture, in directory: TemporaryDirectory) throws -> String {
        let archive = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(fixture.rawValue).tar.gz").path
        let tar = try ChildProcess.run(
            URL(fileURLWithPath: "/bin/tar"), arguments: ["-xzf", archive, "-C", directory.path])
        #expect(tar.termination == .exited(0), "\(tar.output)")
        return directory(fixture.rawValue)
    }

    static var bodyB: Data { Data((0..<3000).map { UInt8(($0 * 7 + 3) % 256) }) }
    static var bodyC: Data { Data((0..<40000).map { UInt8(($0 * 13 + 1) % 251) }) }
    static var bodyD: Data { Data("hello, version one\n".utf8) }
    static var bodyLarge: Data { Data((0..<200_000).map { UInt8(($0 * 11 + 5) % 253) }) }

    /// The fixture's entries are all there, exactly, and `added` besides.
    static func expectEntries(of fixture: Fixture, in cache: SharedCache, added: [String] = []) throws {
        #expect(try cache.get(key: "key-a") == nil)
        #expect(try cache.get(key: "key-gone") == nil)
        #expect(try cache.get(key: "key-b")?.data == bodyB)
        #expect(try cache.get(key: "key-b")?.entry.etag == "\"b2\"")
        #expect(try cache.get(key: "key-c")?.data == bodyC)
        if fixture == .versionOne {
            #expect(try cache.get(key: "key-c")?.entry.lastModified == "Tue, 01 Jan 2030 00:00:00 GMT")
        } else {
            #expect(try cache.get(key: "key-large")?.data == bodyLarge)
        }
        #expect(try cache.get(key: "key-d")?.data == bodyD)
        let entries = try cache.entries().map(\.key).sorted()
        #expect(entries == (["key-b", "key-c", "key-d"] + fixture.moreKeys + added).sorted())
    }

    @Test(arguments: Fixture.allCases)
    func aDirectoryIsUpgradedAndKeepsEveryEntry(_ fixture: Fixture) throws {
        let directory = try TemporaryDirectory()
        let path = try Self.directory(fixture, in: directory)
        #expect(try String(contentsOfFile: "\(path)/format", encoding: .utf8) == fixture.formatLine)

        let cache = try SharedCache(directory: path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(path)/format")) == Data(FormatVersion.current.encoded()))
        try Self.expectEntries(of: fixture, in: cache)
        let packsBefore = try packSegments(in: path).count
        try cache.put(key: "new", data: Data("packed".utf8))
        #expect(try packSegments(in: path).count == max(packsBefore, 1))
        #expect(try cache.verify().problems.isEmpty)

        let reopened = try SharedCache(directory: path)
        try Self.expectEntries(of: fixture, in: reopened, added: ["new"])
        #expect(try reopened.get(key: "new")?.data == Data("packed".utf8))
        #expect(try !reopened.statistics().rebuiltOnOpen)
    }

    /// The version 2 segment is sealed into one of the current version, which carries a salt and
    /// numbers its records by place, on from the version 2 numbers.
    @Test func anUpgradedVersionTwoJournalGoesOnInTheCurrentVersion() throws {
        let directory = try TemporaryDirectory()
        let path = try Self.directory(.versionTwo, in: directory)
        let cache = try SharedCache(directory: path)
        let segments = try FileManager.default.contentsOfDirectory(atPath: "\(path)/journal").sorted()
        #expect(segments.count == 3)
        let sealed = try SegmentFile.header("\(path)/journal/\(segments[1])")
        let newest = try SegmentFile.header("\(path)/journal/\(segments[2])")
        #expect(sealed.major == 2)
        #expect(newest.major == FormatVersion.current.major && newest.numbersByPlace && newest.salt != 0)
        // Version 2 numbered the fixture's 11 records and the upgrade's seal 1 to 12.
        #expect(newest.firstSequence == 13)
        try cache.put(key: "key-b", data: Data("b3".utf8))
        #expect(try cache.statistics().journalSequence > 13)
        #expect(try SharedCache(directory: path).get(key: "key-b")?.data == Data("b3".utf8))
    }

    /// Interrupted after the seal and the manifest but before `format` says the new version:
    /// the next opener finishes it, and nothing is lost or read twice.
    @Test(arguments: Fixture.allCases)
    func anInterruptedUpgradeIsFinishedByTheNextOpener(_ fixture: Fixture) throws {
        let directory = try TemporaryDirectory()
        let path = try Self.directory(fixture, in: directory)
        do {
            let cache = try SharedCache(directory: path)
            try cache.put(key: "during", data: Data("x".utf8))
        }
        try Data(fixture.formatLine.utf8).write(to: URL(fileURLWithPath: "\(path)/format"))
        let cache = try SharedCache(directory: path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(path)/format")) == Data(FormatVersion.current.encoded()))
        try Self.expectEntries(of: fixture, in: cache, added: ["during"])
        #expect(try cache.get(key: "during")?.data == Data("x".utf8))
        #expect(try cache.verify().problems.isEmpty)
    }

    @Test(arguments: Fixture.allCases)
    func theCompactorAndTheToolWorkOnAnUpgradedDirectory(_ fixture: Fixture) async throws {
        let directory = try TemporaryDirectory()
        let path = try Self.directory(fixture, in: directory)
        let compact = try await Tool.admin.run(["--dir", path, "compact"])
        #expect(compact.status == 0, "\(compact.errors)")
        let get = try await Tool.admin.run(["--dir", path, "get", "key-c", "-o", directory("key-c")])
        #expect(get.status == 0, "\(get.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("key-c"))) == Self.bodyC)
        #expect(try await Tool.admin.run(["--dir", path, "verify"]).status == 0)
    }
}
