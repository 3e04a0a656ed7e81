import Foundation
import SharedCacheCLI
import SharedCacheFormat
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ways of starting the tools that once crashed them or made them write into the cache: closed
/// standard descriptors, an output that cannot be written, durations too large to represent,
/// and something other than a file planted under a pack segment's name.
@Suite("sharedcache, hostile invocations")
struct HostileInvocationTests: AdminToolSuite {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    func contents(_ name: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: "\(cache)/\(name)")) }

    /// With standard input, output and error closed, the first files the cache opened took
    /// descriptors 0, 1 and 2: `get` of a miss wrote its diagnostic into the journal segment,
    /// `stat` its report into the lock file, and `ls` trapped.
    @Test func closedStandardDescriptorsAreNotTheCachesFiles() async throws {
        #expect(try await run("put", "k", input: "v").status == 0)
        #expect(try await run("compact").status == 0)
        let segments = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/journal").sorted()
        let segment = "journal/\(try #require(segments.last))"
        let (journalBefore, lockBefore) = (try contents(segment), try contents("lock"))
        for command in ["get nope", "get k", "ls", "stat", "verify"] {
            for closing in ["<&- >&- 2>&-", ">&- 2>&-", "2>&-", ">&-"] {
                let result = try await shell(#"exec "$0" \#(command) \#(closing)"#)
                #expect([0, 1].contains(result.status), "\(command) \(closing): \(result.status)")
                #expect(try contents(segment) == journalBefore, "\(command) \(closing)")
                #expect(try contents("lock") == lockBefore, "\(command) \(closing)")
            }
        }
        #expect(try await run("get", "k").output == "v")
        #expect(try await run("verify").status == 0)
    }

    /// `FileHandle.write` traps on a failed write; a full output is an I/O error (74).
    @Test func anOutputThatCannotBeWrittenIsAnIOError() async throws {
        #expect(try await run("put", "k", input: "v").status == 0)
        for command in ["ls", "stat", "verify", "get k", "config"] {
            let result = try await shell(#"exec "$0" \#(command) >/dev/full"#)
            #expect(result.status == 74, "\(command): \(result.status) \(result.errors)")
            #expect(result.errors.hasPrefix("sharedcache: "), "\(command): \(result.errors)")
        }
    }

    /// `99999999999999999d` overflowed seconds and trapped; it is no duration.
    @Test func aDurationTooLargeIsAUsageError() async throws {
        let huge = "999999999999999999d"
        #expect(try await run("put", "k", "--expires", huge, input: "v").status == 64)
        #expect(try await run("config", "default-expiry", huge).status == 64)
        let daemon = try await Tool.daemon.run(["--once", "--interval", huge], environment: ["SHAREDCACHE_DIR": cache])
        #expect(daemon.status == 64)
        #expect(try await run("put", "k", "--expires", "7d", input: "v").status == 0)
    }

    /// `-o ''` said "writing  failed: no such file or folder"; `fetch` asked the network first.
    @Test func anEmptyOutputNameIsAUsageError() async throws {
        #expect(try await run("put", "k", input: "v").status == 0)
        #expect(try await run("get", "k", "-o", "").status == 64)
        // Nothing listens on port 1: a request sent would fail as the network's (69).
        #expect(try await run("fetch", "http://127.0.0.1:1/", "-o", "").status == 64)
        #expect(try await run("get", "k").output == "v")
    }

    /// A key with a newline broke `ls` and `journal` into two lines for one entry: control
    /// characters and backslashes are written as in C; `--json` gives the key exactly.
    @Test func keysWithControlCharactersStayOnOneLine() async throws {
        let key = "one\ntwo\tthree\\four\u{7}"
        #expect(try await run("put", key, input: "v").status == 0)
        let listed = try await run("ls").output.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(listed.count == 2 && listed[1].isEmpty, "\(listed)")
        #expect(listed[0].hasSuffix(#"one\ntwo\tthree\\four\x07"#), "\(listed)")
        let journal = try await run("journal").output.split(separator: "\n").filter { $0.contains("stored") }
        #expect(journal.count == 1 && journal[0].hasSuffix(#"one\ntwo\tthree\\four\x07"#), "\(journal)")
        let json =
            try JSONSerialization.jsonObject(with: Data(try await run("ls", "--json").output.utf8)) as? [String: Any]
        #expect(json?["key"] as? String == key)
        #expect(try await run("get", key).output == "v")
    }

    /// `help COMMAND` after `--dir PATH` took PATH for the command.
    @Test func helpAfterTheDirectoryOption() async throws {
        let result = try await Tool.admin.run(["--dir", cache, "help", "put"])
        #expect(result.status == 0)
        #expect(result.output.hasPrefix("usage: sharedcache [--dir PATH] put"))
    }

    /// A FIFO or a folder under a pack segment's name failed every read of its entries with
    /// "an I/O error" (74), or with "a directory stands at <the cache directory> ...; remove
    /// it", and `verify --repair` failed the same way. It is damage, as a symbolic link there is.
    @Test(arguments: ["fifo", "folder"])
    func somethingElseWhereAPackSegmentBelongs(damage: String) async throws {
        #expect(try await run("put", "small", input: "packed").status == 0)
        #expect(try await run("put", "big", input: String(repeating: "b", count: 200_000)).status == 0)
        let packs = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/packs")
        let pack = "\(cache)/packs/\(try #require(packs.first))"
        try FileManager.default.removeItem(atPath: pack)
        if damage == "fifo" {
            #expect(mkfifo(pack, 0o600) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: pack, withIntermediateDirectories: false)
        }
        let get = try await run("get", "small")
        #expect(get.status == 1, "\(get.errors)")
        #expect(try await run("ls").status == 0)
        #expect(try await run("verify").status == 65)
        #expect(try await run("verify", "--repair").status == 0)
        #expect(try await run("verify").status == 0)
        #expect(try await run("get", "big").output.count == 200_000)
        #expect(try await run("put", "small", input: "again").status == 0)
        #expect(try await run("get", "small").output == "again")
    }

    /// A folder where a blob belongs made `verify --repair` fail with 69 ("remove it"): repair
    /// removes an empty one itself.
    @Test func aFolderWhereABlobBelongs() async throws {
        #expect(try await run("put", "big", input: String(repeating: "b", count: 200_000)).status == 0)
        #expect(try await run("put", "small", input: "packed").status == 0)
        let files = FileManager.default.subpaths(atPath: "\(cache)/blobs")?.filter { $0.contains("/") } ?? []
        #expect(files.count == 1)
        let blob = "\(cache)/blobs/\(try #require(files.first))"
        try FileManager.default.removeItem(atPath: blob)
        try FileManager.default.createDirectory(atPath: blob, withIntermediateDirectories: false)
        #expect(try await run("verify", "--repair").status == 0)
        #expect(try await run("verify").status == 0)
        #expect(!FileManager.default.fileExists(atPath: blob))
        #expect(try await run("get", "big").status == 1)
        #expect(try await run("get", "small").output == "packed")
        #expect(try await run("put", "big", input: "again").status == 0)
        #expect(try await run("get", "big").output == "again")
    }

    /// A folder with contents where a pack segment belongs is someone's: `verify --repair`
    /// leaves it and says to remove the folder; doing so leaves a cache that verifies.
    @Test func aFolderWithContentsWhereAPackSegmentBelongs() async throws {
        #expect(try await run("put", "small", input: "packed").status == 0)
        let packs = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/packs")
        let pack = "\(cache)/packs/\(try #require(packs.first))"
        try FileManager.default.removeItem(atPath: pack)
        try FileManager.default.createDirectory(atPath: pack, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: "\(pack)/theirs", contents: Data("x".utf8))
        #expect(try await run("verify", "--repair").status == 65)
        #expect(FileManager.default.fileExists(atPath: "\(pack)/theirs"))
        // The advice: remove the folder.
        try FileManager.default.removeItem(atPath: pack)
        #expect(try await run("verify").status == 0)
        #expect(try await run("put", "small", input: "again").status == 0)
        #expect(try await run("get", "small").output == "again")
    }

    /// On a full disk the error says "free space or lower the cache's size-limit", and
    /// `config size-limit` failed on that same full disk. The reserve pays for the file.
    @Test func aFullDiskStillTakesALowerSizeLimit() async throws {
        #expect(try await run("put", "k", input: "v").status == 0)
        // The config file's write is the command's first write(2): it fails with ENOSPC.
        let full = ["SHAREDCACHE_DIR": cache, "SHAREDCACHE_FAILPOINT": "write:1:ENOSPC"]
        let lowered = try await Tool.admin.run(["config", "size-limit", "1M"], environment: full)
        #expect(lowered.status == 0, "\(lowered.errors)")
        #expect(try await run("config", "size-limit").output == "1000000\n")
        #expect(!FileManager.default.fileExists(atPath: "\(cache)/reserve"))
        // With no reserve left to give, the full disk is reported as before.
        let again = try await Tool.admin.run(["config", "size-limit", "2M"], environment: full)
        #expect(again.status == 74)
        #expect(try await run("config", "size-limit").output == "1000000\n")
        #expect(try await run("get", "k").output == "v")
    }

    /// An emptied or overwritten format file beside the cache's own journal said "this
    /// directory belongs to something else, so choose another one", abandoning every entry.
    @Test(arguments: ["", "garbage\n"])
    func aDamagedFormatFileInACacheSaysToRewriteIt(content: String) async throws {
        #expect(try await run("put", "k", input: "v").status == 0)
        try Data(content.utf8).write(to: URL(fileURLWithPath: "\(cache)/format"))
        let result = try await run("get", "k")
        #expect(result.status == 65, "\(result.errors)")
        try Data(FormatVersion.current.encoded()).write(to: URL(fileURLWithPath: "\(cache)/format"))
        #expect(try await run("get", "k").output == "v")
    }
}
