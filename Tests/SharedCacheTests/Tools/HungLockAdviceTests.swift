import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process that holds one of the cache's locks and hangs: the timeout says to find it with
/// `fuser PATH`. Each case runs that command as the message gives it, checks that it names the
/// holder, ends it as its owner would, and uses the cache.
@Suite("A hung lock holder is found by the fuser the timeout names")
struct HungLockAdviceTests {
    static let fuser = ["/usr/bin/fuser", "/bin/fuser"].first(where: Requirements.isInstalled)

    /// `append`: the journal segment's append lock (a put times out); `directory`: `lock`
    /// (a checkpoint times out).
    @Test(.enabled(if: fuser != nil, "needs fuser(1), from psmisc"), arguments: ["append", "directory"])
    func theHolderIsFoundAndEnded(lock: String) async throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(lockTimeout: .milliseconds(200)))
        try cache.put(key: "k", data: Data("v".utf8))
        let file = lock == "append" ? directory("cache/journal/0000000000000001") : directory("cache/lock")
        let holder = try Worker.start(["hold-lock", file], input: .pipe)
        defer { holder.signal(SIGKILL) }
        try #require(await holder.nextLine(within: .seconds(120)) == "holding")

        let timeout = #expect(throws: SharedCacheError.self) {
            if lock == "append" { try cache.put(key: "k2", data: Data("v2".utf8)) } else { try cache.checkpoint() }
        }
        #expect(timeout?.code == .lockTimeout, "\(String(describing: timeout))")
        let command = try Advice(try #require(timeout?.message)).command()
        try #require(command.first == "fuser" && command.count == 2, "\(command)")
        #expect(command[1] == file)

        // fuser prints the holders' process IDs on standard output (each may carry a letter
        // saying how it uses the file), its other words on standard error. This process has the
        // file open too, through `cache`; and a child another test spawns at that moment may
        // hold its descriptors for an instant, before it closes them and runs its program.
        let fuser = await Worker.Result(
            finishing: try ChildProcess(
                URL(fileURLWithPath: try #require(Self.fuser)), arguments: Array(command.dropFirst()),
                errors: .discard))
        #expect(fuser.status == 0, "\(fuser.output)")
        let named = Set(
            fuser.output.split(whereSeparator: \.isWhitespace).compactMap { Int32($0.prefix(while: \.isNumber)) })
        try #require(named.contains(holder.processID), "fuser named \(named)")
        kill(holder.processID, SIGKILL)
        #expect(await holder.wait() == .signalled(SIGKILL))

        try cache.put(key: "k2", data: Data("v2".utf8))
        #expect(try cache.get(key: "k2")?.data == Data("v2".utf8))
        try cache.checkpoint()
        #expect(try SharedCache(directory: directory("cache")).get(key: "k")?.data == Data("v".utf8))
    }
}
