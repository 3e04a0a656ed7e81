import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

// Linux only: the small filesystem is a tmpfs mounted with Linux's mount(2) (Darwin's takes
// other arguments and has no tmpfs), so elsewhere this suite is not compiled.
#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Issue 18, defect 4: on a full filesystem the compactor exited 74 (it had to write its PID
/// before it could work) and the cache stayed far over its limit. Eviction must work with no
/// free bytes at all: the lock's witness is written best effort, and the reserve the directory
/// keeps is released to journal the evictions that free the space.
@Suite("Compacting a cache on a full filesystem", .serialized)
struct FullDiskTests {
    /// Mounting a small tmpfs needs root (and a kernel that lets this process mount).
    static let canMount: Bool = {
        guard geteuid() == 0 else { return false }
        let probe = NSTemporaryDirectory() + "sharedcache-mount-probe-\(getpid())"
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount(probe)
        return true
    }()

    /// Run twice: as a pass finds pack segments written a moment ago (left alone for a minute),
    /// and as one finds them settled (`SHAREDCACHE_PACK_SETTLE_MS=0`), when it also compacts
    /// the segments eviction left mostly dead. There is no room to copy their live records into:
    /// the pass exited 74 there, having evicted; it now retires what has nothing live and stops
    /// compacting.
    @Test(.enabled(if: canMount, "needs root and mount(2) to make a small filesystem"), arguments: [false, true])
    func theCompactorEvictsWithNoFreeBytes(packsSettled: Bool) async throws {
        let directory = try TemporaryDirectory()
        let small = try SmallFilesystem(at: directory("small"))
        defer { withExtendedLifetime(small) {} }
        let mountPoint = small.path
        let path = "\(mountPoint)/cache"
        let limit: UInt64 = 1 << 20
        do {
            let cache = try SharedCache(directory: path, configuration: Configuration(sizeLimit: limit))
            for index in 0..<40 { try cache.put(key: "key \(index)", data: Data(count: 64 << 10)) }
            #expect(try cache.statistics().totalBytes == 40 * (64 << 10))
        }
        // Fill the filesystem to its last byte.
        let filler = FileHandle(forWritingAtPath: {
            _ = FileManager.default.createFile(atPath: "\(mountPoint)/filler", contents: nil)
            return "\(mountPoint)/filler"
        }())!
        let block = Data(count: 4096)
        while (try? filler.write(contentsOf: block)) != nil {}
        var space = statvfs()
        #expect(statvfs(mountPoint, &space) == 0 && space.f_bavail == 0)

        let pass = try await Tool.daemon.run(
            ["--dir", path, "--once"], environment: packsSettled ? ["SHAREDCACHE_PACK_SETTLE_MS": "0"] : [:])
        #expect(pass.status == 0, "\(pass.errors)")
        let cache = try SharedCache(directory: path)
        #expect(try cache.statistics().totalBytes <= limit)
        #expect(try cache.verify().isClean)
        // And the cache works again once the filler is gone; the reserve is back after a pass.
        // (Evicted packed bodies give their space back with their segment, a minute later, so
        // only the filler's going frees it now. Truncated first: an unlinked file keeps its
        // blocks while any process holds it open, and a child another test's thread is starting
        // holds a copy of every descriptor of this process until it closes them before exec.
        // Truncating frees the blocks whoever holds the file.)
        try filler.truncate(atOffset: 0)
        try filler.close()
        try FileManager.default.removeItem(atPath: "\(mountPoint)/filler")
        try cache.put(key: "after", data: Data("works".utf8))
        #expect(try cache.get(key: "after")?.data == Data("works".utf8))
    }

    /// Puts fill the filesystem, with no compactor running: the error says to free space or to
    /// lower the size-limit and compact at once, with the commands. Run as it says (the size
    /// filled in), the cache is within the new limit and takes puts again, and what it kept
    /// reads back. (It said only to lower the limit, which evicts nothing without a compaction;
    /// the next puts took the space the limit's write had freed, and then nothing, not even a
    /// compaction, could work until space was freed outside the cache.)
    @Test(.enabled(if: canMount, "needs root and mount(2) to make a small filesystem"))
    func aFullDiskIsLeftAsTheErrorSays() async throws {
        let directory = try TemporaryDirectory()
        let small = try SmallFilesystem(at: directory("small"))
        defer { withExtendedLifetime(small) {} }
        let path = "\(small.path)/cache"
        let body = directory("body")
        try Data((0..<(100 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: body))
        var full: Worker.Result?
        for index in 0..<200 where full == nil {
            let put = try await Tool.admin.run(["--dir", path, "put", "key \(index)", body])
            if put.status != 0 { full = put }
        }
        let refused = try #require(full, "200 puts of 100 KB fit in 8 MB")
        #expect(refused.status == 74, "\(refused.errors)")
        let stored = try SharedCache(directory: path).statistics().entryCount

        let command = try Advice(refused.errors).enclosed(by: "`").replacingOccurrences(of: "SIZE", with: "4M")
        let followed = await Worker.Result(
            finishing: try ChildProcess(
                URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", "exec 2>&1; \(command)"],
                environment: ["PATH": "\(Tool.admin.executable.deletingLastPathComponent().path):/usr/bin:/bin"]))
        #expect(followed.status == 0, "\(followed.output)")
        let cache = try SharedCache(directory: path)
        let statistics = try cache.statistics()
        #expect(statistics.totalBytes <= 4_000_000)
        #expect(statistics.entryCount > 0 && statistics.entryCount < stored)
        try cache.put(key: "after", data: Data("works".utf8))
        #expect(try cache.get(key: "after")?.data == Data("works".utf8))
        for entry in try cache.listEntries() where entry.key.hasPrefix("key ") {
            #expect(try cache.get(key: entry.key)?.data.count == 100 << 10, "\(entry.key)")
        }
        #expect(try cache.verify().isClean)
    }
}

/// An 8 MB tmpfs mounted at `path` for as long as this lives.
final class SmallFilesystem {
    let path: String

    init(at path: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=8m") == 0 else { throw POSIXError(.EPERM) }
    }

    // Detached rather than unmounted: a plain umount fails (EBUSY) while a child another
    // test's thread is starting still holds a copy of a descriptor on the mount.
    deinit { umount2(path, Int32(MNT_DETACH)) }
}
#endif
