import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 18: "process N is already compacting" named a process that had exited. The PID in
/// `<root>/daemon` is written by a compactor after it takes the lock, so between the two (or
/// after a holder that never wrote one) the file names the previous compactor.
@Suite("Who holds the compactor lock")
struct CompactorHolderTests {
    let directory: TemporaryDirectory
    var cache: String { directory("cache") }

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// A process that has exited and been waited for: its ID names nobody.
    func exitedProcessID() async throws -> Int32 {
        let process = try ChildProcess(URL(fileURLWithPath: "/bin/true"), output: .discard)
        await process.wait()
        return process.processID
    }

    /// This process takes the compactor lock as a compactor does, with the previous holder's
    /// process ID still in the file: the moment between a compactor's flock and its write.
    @Test func theHolderIsNamedNotTheProcessIDInTheFile() async throws {
        _ = try SharedCache(directory: cache)
        let stale = try await exitedProcessID()
        let file = open("\(cache)/daemon", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(file >= 0)
        defer { close(file) }
        let text = Array("\(stale)\n".utf8)
        #expect(text.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) } == text.count)
        #expect(flock(file, LOCK_EX) == 0)

        let stat = try await Tool.admin.run(["stat", "--json"], environment: ["SHAREDCACHE_DIR": cache])
        let report = try #require(JSONSerialization.jsonObject(with: Data(stat.output.utf8)) as? [String: Any])
        #expect((report["compactorProcessID"] as? NSNumber)?.int32Value == getpid())
        #expect(try SharedCache(directory: cache).compactorProcessID() == getpid())
        #expect(try await Tool.admin.run(["compact"], environment: ["SHAREDCACHE_DIR": cache]).status == 75)
        #expect(try await Tool.daemon.run(["--dir", cache, "--once"]).status == 75)

        // Once it lets go, nobody holds it, whatever the file says.
        #expect(flock(file, LOCK_UN) == 0)
        #expect(try SharedCache(directory: cache).compactorProcessID() == nil)
        #expect(try await Tool.daemon.run(["--dir", cache, "--once"]).status == 0)
    }

    /// Where the lock table has no entry for the file (overlayfs, Darwin), the PID in the file
    /// is believed only if that process exists.
    @Test func withoutTheLockTableTheFileIsBelievedOnlyForALiveProcess() async throws {
        _ = try SharedCache(directory: cache)
        let path = "\(cache)/daemon"
        let holder = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(holder >= 0)
        defer { close(holder) }
        func written(_ processID: Int32) throws -> Int32? {
            let text = Array("\(processID)\n".utf8)
            #expect(ftruncate(holder, 0) == 0)
            #expect(text.withUnsafeBytes { pwrite(holder, $0.baseAddress, $0.count, 0) } == text.count)
            return try DaemonLock.writtenHolder(of: try FileDescriptor(path: path, flags: O_RDONLY))
        }
        #expect(try written(getpid()) == nil)  // not locked: nobody, whatever the file says
        #expect(flock(holder, LOCK_EX) == 0)
        #expect(try written(getpid()) == getpid())
        #expect(try written(try await exitedProcessID()) == 0)  // locked by someone the file cannot name
    }

    /// A process checking whether a compactor runs (`stat` takes a shared lock on the file for
    /// an instant) made a compactor starting at that instant give up: "another process is
    /// already compacting", exit 75, with no compactor anywhere. The failpoint makes the
    /// process's first flock, the compactor's try, find the lock taken.
    @Test(.enabled(if: FaultInjectionTests.hasFailpoints, "release builds have no failpoints"))
    func aMomentaryHolderDoesNotStopACompactor() async throws {
        _ = try SharedCache(directory: cache)
        let failpoint = ["SHAREDCACHE_FAILPOINT": "flock:1:\(EWOULDBLOCK)"]
        let compact = try await Tool.admin.run(
            ["compact"], environment: failpoint.merging(["SHAREDCACHE_DIR": cache]) { $1 })
        #expect(compact.status == 0, "\(compact.errors)")
        #expect(try await Tool.daemon.run(["--dir", cache, "--once"], environment: failpoint).status == 0)
    }
}
