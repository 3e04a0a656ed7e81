import Foundation
import Testing

@testable import SharedCache

@Suite("SharedCache: put, get, remove, clear, metadata, expiry")
struct SharedCacheTests {
    @Test func putThenGetReturnsBodyAndMetadata() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let body = Data((0..<5000).map { UInt8($0 % 251) })
        let stored = try cache.put(
            key: "https://example.com/a", data: body,
            metadata: EntryMetadata(etag: "W/\"v1\"", lastModified: "Tue, 15 Nov 1994 08:12:31 GMT"))

        let hit = try #require(try cache.get(key: "https://example.com/a"))
        #expect(hit.data == body)
        #expect(hit.entry == stored)
        #expect(hit.entry.etag == "W/\"v1\"")
        #expect(hit.entry.lastModified == "Tue, 15 Nov 1994 08:12:31 GMT")
        #expect(hit.entry.size == 5000)
        #expect(hit.entry.hash == KeyHash(key: "https://example.com/a"))
        // The default expiry of a new directory is one week.
        let week = try #require(hit.entry.expiresAt).timeIntervalSince(hit.entry.storedAt)
        #expect(abs(week - 7 * 24 * 3600) < 1)

        #expect(try cache.entry(forKey: "https://example.com/a") == stored)
        #expect(try cache.contains(key: "https://example.com/a"))
        #expect(try cache.get(key: "https://example.com/b") == nil)
        #expect(try !cache.contains(key: "https://example.com/b"))
    }

    @Test func emptyBodyAndEmptyKeyAreEntriesLikeAnyOther() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "", data: Data())
        let hit = try #require(try cache.get(key: ""))
        #expect(hit.data.isEmpty)
        #expect(hit.entry.etag == nil)
    }

    @Test func putReplacesAndUnlinksTheSupersededBlob() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        for version in 0..<5 { try cache.put(key: "k", data: Data("version \(version)".utf8)) }
        #expect(try cache.get(key: "k")?.data == Data("version 4".utf8))
        #expect(try blobFiles(in: directory("cache")).count == 1)
        #expect(try cache.statistics().entryCount == 1)
    }

    @Test func removeAndClear() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        for index in 0..<10 { try cache.put(key: "key \(index)", data: Data("body \(index)".utf8)) }
        #expect(try cache.remove(key: "key 3"))
        #expect(try !cache.remove(key: "key 3"))
        #expect(try cache.get(key: "key 3") == nil)
        #expect(try cache.remove(hash: KeyHash(key: "key 4")))
        #expect(try cache.get(key: "key 4") == nil)
        #expect(try cache.statistics().entryCount == 8)

        try cache.clear()
        #expect(try cache.statistics().entryCount == 0)
        #expect(try cache.statistics().totalBytes == 0)
        #expect(try blobFiles(in: directory("cache")).isEmpty)
        for index in 0..<10 { #expect(try cache.get(key: "key \(index)") == nil) }
        try cache.put(key: "after", data: Data("x".utf8))
        #expect(try cache.get(key: "after")?.data == Data("x".utf8))
    }

    /// Expiry is judged by the configured clock, which the test moves: no waiting, no race.
    @Test func expiredEntriesAreMisses() throws {
        let directory = try TemporaryDirectory()
        let clock = TestClock()
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration().judgingTime(by: clock))
        let aSecondAgo = Date(timeIntervalSince1970: Double(clock.now - 1000) / 1000)
        try cache.put(key: "past", data: Data("x".utf8), metadata: EntryMetadata(expiry: .at(aSecondAgo)))
        try cache.put(key: "soon", data: Data("x".utf8), metadata: EntryMetadata(expiry: .after(.milliseconds(50))))
        try cache.put(key: "never", data: Data("x".utf8), metadata: EntryMetadata(expiry: .never))
        #expect(try cache.get(key: "past") == nil)
        #expect(try !cache.contains(key: "past"))
        #expect(try cache.entry(forKey: "past") == nil)

        clock.advance(by: .milliseconds(49))
        #expect(try cache.get(key: "soon") != nil)
        #expect(try cache.contains(key: "soon"))
        #expect(try cache.entry(forKey: "soon") != nil)
        clock.advance(by: .milliseconds(1))
        #expect(try cache.get(key: "soon") == nil)
        #expect(try !cache.contains(key: "soon"))
        #expect(try cache.entry(forKey: "soon") == nil)

        clock.advance(by: .seconds(100 * 365 * 24 * 3600))
        let never = try #require(try cache.get(key: "never"))
        #expect(never.entry.expiresAt == nil)
    }

    /// Keys are bytes: path separators, NUL and length are never interpreted.
    @Test(arguments: ["../../etc/passwd", "a\0b", "a\0c", String(repeating: "k", count: 10_000), "ключ/🔑", "/", "."])
    func unusualKeysAreSafe(key: String) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        try cache.put(key: key, data: Data(key.utf8))
        try cache.put(key: key + "-other", data: Data("other".utf8))
        #expect(try cache.get(key: key)?.data == Data(key.utf8))
        #expect(try cache.get(key: key)?.entry.key == key)
        #expect(try cache.get(key: key + "-other")?.data == Data("other".utf8))
        #expect(try blobFiles(in: directory("cache")).count == 2)
        #expect(!FileManager.default.fileExists(atPath: directory("etc")))
    }

    @Test func oversizedKeysAndValidatorsAreRejectedClearly() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(
            errorCode { try cache.put(key: String(repeating: "k", count: 70_000), data: Data()) } == "invalidArgument")
        #expect(
            errorCode {
                try cache.put(
                    key: "k", data: Data(), metadata: EntryMetadata(etag: String(repeating: "e", count: 70_000)))
            } == "invalidArgument")
        #expect(try blobFiles(in: directory("cache")).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory("cache/tmp")).isEmpty)
        // "hash long keys": the long key's SHA-256, in hex, stores and reads like any key.
        let hashed = KeyHash(key: String(repeating: "k", count: 70_000)).hex
        try cache.put(key: hashed, data: Data("long".utf8))
        #expect(try cache.get(key: hashed)?.data == Data("long".utf8))
    }

    @Test func sharedLimitsComeFromTheDirectory() throws {
        let directory = try TemporaryDirectory()
        let first = try SharedCache(
            directory: directory("cache"), configuration: Configuration(sizeLimit: 12345, defaultExpiry: .seconds(60)))
        #expect(first.configuration.sizeLimit == 12345)
        let second = try SharedCache(
            directory: directory("cache"), configuration: Configuration(sizeLimit: 999, defaultExpiry: nil))
        #expect(second.configuration.sizeLimit == 12345)
        #expect(second.configuration.defaultExpiry == .seconds(60))
        let entry = try second.put(key: "k", data: Data())
        #expect(abs(try #require(entry.expiresAt).timeIntervalSince(entry.storedAt) - 60) < 1)
    }

    @Test func durablePutsRoundTrip() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(durability: .synchronized))
        try cache.put(key: "k", data: Data("durable".utf8))
        try cache.checkpoint()
        #expect(try cache.get(key: "k")?.data == Data("durable".utf8))
    }

    /// Two opens in one process are as separate as two processes: each sees the other's writes.
    @Test func twoInstancesSeeEachOthersChanges() throws {
        let directory = try TemporaryDirectory()
        let a = try SharedCache(directory: directory("cache"))
        let b = try SharedCache(directory: directory("cache"))
        try a.put(key: "k", data: Data("from a".utf8))
        #expect(try b.get(key: "k")?.data == Data("from a".utf8))
        try b.put(key: "k", data: Data("from b".utf8))
        #expect(try a.get(key: "k")?.data == Data("from b".utf8))
        #expect(try a.remove(key: "k"))
        #expect(try b.get(key: "k") == nil)
        #expect(try b.statistics().entryCount == 0)
    }

    @Test func concurrentThreadsShareOneInstance() async throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    for index in 0..<100 {
                        let key = "key \(index % 10)"
                        try cache.put(key: key, data: Data("\(key) from \(thread)".utf8))
                        if let hit = try cache.get(key: key) {
                            #expect(String(decoding: hit.data, as: UTF8.self).hasPrefix("\(key) from "))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try cache.statistics().entryCount == 10)
        #expect(try blobFiles(in: directory("cache")).count == 10)
    }
}

/// Every file under `blobs/`, as paths relative to it.
func blobFiles(in cache: String) throws -> [String] {
    let root = URL(fileURLWithPath: cache).appendingPathComponent("blobs")
    var files: [String] = []
    for folder in try FileManager.default.contentsOfDirectory(atPath: root.path) {
        let path = root.appendingPathComponent(folder).path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            files.append(folder)
            continue
        }
        files += try FileManager.default.contentsOfDirectory(atPath: path).map { "\(folder)/\($0)" }
    }
    return files
}
