import Foundation
import SharedCacheFormat
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Bad input: wrong paths, foreign files, damage — clear errors or repair, never wrong bytes")
struct BadInputTests {
    /// Damage is planted on disk after a put; the memory tier would serve its verified copy of
    /// the put, so the tests that read damaged blobs turn it off.
    static let diskOnly = Configuration(memoryCostLimit: 0).withBlobFiles

    @Test func aPathThatIsAFileIsNotADirectory() throws {
        let directory = try TemporaryDirectory()
        _ = FileManager.default.createFile(atPath: directory("file"), contents: Data("x".utf8))
        #expect(errorCode { try SharedCache(directory: directory("file")) } == "notADirectory")
        #expect(errorCode { try SharedCache(directory: directory("file/cache")) } == "notADirectory")
        #expect(try String(contentsOfFile: directory("file"), encoding: .utf8) == "x")
    }

    @Test func missingParentsAreCreated() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("a/b/c"))
        try cache.put(key: "k", data: Data("v".utf8))
        #expect(try SharedCache(directory: directory("a/b/c")).get(key: "k")?.data == Data("v".utf8))
    }

    @Test(.enabled(if: !Requirements.isRoot, "root writes anywhere; the next test asks as another user"))
    func anUnwritableDirectoryIsPermissionDenied() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory("readonly"), withIntermediateDirectories: false)
        chmod(directory("readonly"), 0o555)
        #expect(errorCode { try SharedCache(directory: directory("readonly")) } == "permissionDenied")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory("readonly")).isEmpty)
    }

    /// Root writes anywhere; ask as an unprivileged user, in a process of its own.
    @Test(.enabled(if: Requirements.canRunAsOtherUsers, "needs root and setpriv(1)"))
    func anUnwritableDirectoryIsPermissionDeniedToAnotherUser() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory("readonly"), withIntermediateDirectories: false)
        chmod(directory.path, 0o755)
        let result = try Worker.run(["put", directory("readonly"), "k", "v"], asUser: 65534)
        #expect(result.errorCode == "permissionDenied", "\(result.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory("readonly")).isEmpty)
    }

    @Test func aForeignNonEmptyDirectoryIsRefusedAndLeftAlone() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory("home/Documents"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: directory("home/notes.txt"), contents: Data("mine".utf8))
        #expect(errorCode { try SharedCache(directory: directory("home")) } == "notACacheDirectory")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory("home")).sorted() == [
                "Documents", "notes.txt",
            ])

        _ = FileManager.default.createFile(atPath: directory("other/format"), contents: nil)
        try FileManager.default.createDirectory(atPath: directory("other"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: directory("other/format"), contents: Data("some other tool\n".utf8))
        #expect(errorCode { try SharedCache(directory: directory("other")) } == "notACacheDirectory")
    }

    /// A folder holding only names the cache uses, but not as the cache makes them (another
    /// program's `config`, files in a `tmp/` or `blobs/`), is no half-made cache: refused, and
    /// nothing in it touched. (It was taken for one: `config` overwritten, `tmp/` swept.)
    @Test(arguments: [
        ["config"], ["tmp/notes.txt"], ["config", "tmp/draft.txt", "blobs/photo.jpg"], ["config/settings.yml"],
    ])
    func aFolderWithOnlyTheCachesNamesIsRefusedAndLeftAlone(files: [String]) throws {
        let directory = try TemporaryDirectory()
        for file in files {
            let path = directory("app/\(file)")
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: path, contents: Data("mine: \(file)\n".utf8)))
        }
        #expect(errorCode { try SharedCache(directory: directory("app")) } == "notACacheDirectory")
        for file in files {
            let kept = try Data(contentsOf: URL(fileURLWithPath: directory("app/\(file)")))
            #expect(kept == Data("mine: \(file)\n".utf8))
        }
        #expect(!FileManager.default.fileExists(atPath: directory("app/format")))
    }

    /// A creation that a power loss cut short: its `config` zeros (written, never flushed), no
    /// `format` file. The next process finishes it with its own limits.
    @Test func aCreationAPowerLossCutShortIsFinished() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory("cache/tmp"), withIntermediateDirectories: true)
        try Data(count: 64).write(to: URL(fileURLWithPath: directory("cache/config")))
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: 5_000_000))
        try cache.put(key: "k", data: Data("v".utf8))
        #expect(try SharedCache(directory: directory("cache")).get(key: "k")?.data == Data("v".utf8))
        #expect(cache.configuration.sizeLimit == 5_000_000)
        #expect(cache.warnings.isEmpty)
    }

    @Test func aNewerFormatIsRefused() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "k", data: Data("v".utf8))
        try Data("sharedcache 4.0\n".utf8).write(to: URL(fileURLWithPath: directory("cache/format")))
        #expect(errorCode { try SharedCache(directory: directory("cache")) } == "unsupportedFormat")
        // A newer minor version is compatible.
        try Data("sharedcache 3.9\n".utf8).write(to: URL(fileURLWithPath: directory("cache/format")))
        #expect(try SharedCache(directory: directory("cache")).get(key: "k")?.data == Data("v".utf8))
    }

    @Test func aCorruptConfigIsAClearError() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        try Data("size-limit = a lot\n".utf8).write(to: URL(fileURLWithPath: directory("cache/config")))
        #expect(errorCode { try SharedCache(directory: directory("cache")) } == "corruptData")
    }

    @Test func foreignFilesInBlobsAreIgnored() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        try cache.put(key: "k", data: Data("v".utf8))
        _ = FileManager.default.createFile(atPath: directory("cache/blobs/ab/hello.txt"), contents: Data("x".utf8))
        _ = FileManager.default.createFile(atPath: directory("cache/blobs/README"), contents: Data("x".utf8))
        try FileManager.default.createDirectory(
            atPath: directory("cache/blobs/zz/nested"), withIntermediateDirectories: true)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: directory("cache/manifest")))  // force a rebuild scan
        let reopened = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        #expect(try reopened.statistics().rebuiltOnOpen)
        #expect(try reopened.statistics().entryCount == 1)
        #expect(try reopened.get(key: "k")?.data == Data("v".utf8))
    }

    /// Replace the blob of a live entry with something else; the get must miss and discard it.
    private func plant(_ replacement: (String) throws -> Void) throws -> (SharedCache, TemporaryDirectory) {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "victim", data: Data("the real body".utf8))
        let blob = try #require(try blobFiles(in: directory("cache")).first)
        let path = directory("cache/blobs/\(blob)")
        try FileManager.default.removeItem(atPath: path)
        try replacement(path)
        return (cache, directory)
    }

    @Test func aSymlinkPlantedAsABlobIsNeverFollowed() throws {
        let (cache, directory) = try plant { path in
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/etc/passwd")
        }
        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
        #expect(try !cache.contains(key: "victim"))
        _ = directory
    }

    @Test func aFIFOPlantedAsABlobDoesNotHang() throws {
        let (cache, directory) = try plant { path in #expect(mkfifo(path, 0o600) == 0) }
        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
        _ = directory
    }

    @Test func anotherKeysBlobPlantedInPlaceIsRejected() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "victim", data: Data("victim body".utf8))
        let victimBlob = try #require(try blobFiles(in: directory("cache")).first)
        try cache.put(key: "intruder", data: Data("intruder body".utf8))
        let intruderBlob = try #require(try blobFiles(in: directory("cache")).first { $0 != victimBlob })
        try FileManager.default.removeItem(atPath: directory("cache/blobs/\(victimBlob)"))
        try FileManager.default.copyItem(
            atPath: directory("cache/blobs/\(intruderBlob)"), toPath: directory("cache/blobs/\(victimBlob)"))
        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.get(key: "intruder")?.data == Data("intruder body".utf8))
    }

    /// A blob whose header names the entry's hash but holds another key (made so: its
    /// checksums are right) is not the entry's body: a miss, never another key's bytes.
    @Test func aBlobHoldingAnotherKeyUnderTheEntrysHashIsRejected() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        try cache.put(key: "victim", data: Data("victim body".utf8))
        let blob = directory("cache/blobs/\(try #require(try blobFiles(in: directory("cache")).first))")
        let body = Array("other body!".utf8)  // as long as the victim's: only the key differs
        let header = BlobHeader(
            bodySize: UInt64(body.count), bodyChecksum: CRC32C.checksum(body), storedAt: 1, expiresAt: .max,
            keyHash: KeyHash(key: "victim"), key: Array("other".utf8), etag: [], lastModified: [], attributes: [])
        try Data(header.encoded() + body).write(to: URL(fileURLWithPath: blob))
        #expect(try cache.get(key: "victim") == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
    }

    /// A pinned blob is copied (a download written to a file, a body stored again after a
    /// 304) after it was checked whole, and is checked again as it is copied: bytes damaged
    /// in between make the read that reaches the end throw, so no copy of them is published
    /// (mutation: the copy's checksum was not compared, and the damaged bytes went through).
    @Test func aPinnedBlobDamagedAfterItsCheckFailsItsCopy() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try cache.put(key: "k", data: body)
        let hash = KeyHash(key: "k")
        let entry = try #require(try cache.engine.currentEntry(hash))
        let (pinned, _) = try #require(
            try cache.engine.bodies.pin(hash, at: entry.location, key: "k", expectedSize: entry.bodySize))
        guard case .found(let hit) = try pinned.read(), hit.data == body else {
            Issue.record("the pinned blob did not read back whole before it was damaged")
            return
        }

        let blob = directory("cache/blobs/\(try #require(try blobFiles(in: directory("cache")).first))")
        try flipByte(at: -1000, inFileAt: blob)

        let read = pinned.reader()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var copied = 0
        #expect(throws: BodyDamage.self) {
            while case .bytes(let count) = try read(buffer) { copied += count }
        }
        #expect(copied == body.count)  // every byte was read; the check at the end stopped it
    }

    @Test(arguments: [0, 30, 90, -1])
    func aDamagedBlobByteIsAMissAndIsDiscarded(offsetFromBodyEnd: Int) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let body = Data(repeating: 0x41, count: 100)
        try cache.put(key: "k", data: body)
        let blob = directory("cache/blobs/\(try #require(try blobFiles(in: directory("cache")).first))")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: blob))
        if offsetFromBodyEnd < 0 {
            bytes.removeLast(10)  // truncated
        } else {
            bytes[bytes.count - 1 - offsetFromBodyEnd] ^= 0x20
        }
        try bytes.write(to: URL(fileURLWithPath: blob))

        #expect(try cache.get(key: "k") == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
        #expect(!FileManager.default.fileExists(atPath: blob))
        let other = try SharedCache(directory: directory("cache"))
        #expect(try !other.contains(key: "k"))
    }

    @Test(arguments: ["garbage", "truncated", "missing", "empty"])
    func aBadManifestIsRebuiltFromTheBlobs(damage: String) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        for index in 0..<50 { try cache.put(key: "key \(index)", data: Data("body \(index)".utf8)) }
        try cache.remove(key: "key 7")
        try cache.checkpoint()
        try cache.put(key: "key 50", data: Data("body 50".utf8))
        let manifest = URL(fileURLWithPath: directory("cache/manifest"))
        switch damage {
        case "garbage": try Data(repeating: 0x5A, count: 5000).write(to: manifest)
        case "truncated": try Data(try Data(contentsOf: manifest).prefix(1000)).write(to: manifest)
        case "missing": try FileManager.default.removeItem(at: manifest)
        default: try Data().write(to: manifest)
        }

        let reopened = try SharedCache(directory: directory("cache"))
        let statistics = try reopened.statistics()
        #expect(statistics.rebuiltOnOpen)
        #expect(statistics.entryCount == 50)
        for index in 0...50 where index != 7 {
            #expect(try reopened.get(key: "key \(index)")?.data == Data("body \(index)".utf8))
        }
        #expect(try reopened.get(key: "key 7") == nil)
        // The rebuilt manifest is valid for the next process.
        #expect(try !SharedCache(directory: directory("cache")).statistics().rebuiltOnOpen)
    }

    /// A process that holds the journal's append lock and hangs: writers time out with a clear
    /// error; readers carry on.
    @Test func aHungLockHolderTimesOutWritersButNotReaders() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(lockTimeout: .milliseconds(200)).withBlobFiles)
        try cache.put(key: "k", data: Data("v".utf8))
        let holder = open(directory("cache/journal/0000000000000001"), O_RDWR)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX) == 0)

        let start = Date()
        #expect(errorCode { try cache.put(key: "k2", data: Data("v".utf8)) } == "lockTimeout")
        #expect(Date().timeIntervalSince(start) >= 0.2)
        #expect(try cache.get(key: "k")?.data == Data("v".utf8))
        #expect(try cache.get(key: "k2") == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory("cache/tmp")).isEmpty)
        #expect(try blobFiles(in: directory("cache")).count == 1)

        flock(holder, LOCK_UN)
        try cache.put(key: "k2", data: Data("v2".utf8))
        #expect(try cache.get(key: "k2")?.data == Data("v2".utf8))
    }
}
