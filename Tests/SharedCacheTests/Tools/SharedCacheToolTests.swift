import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("sharedcache, the admin tool")
struct SharedCacheToolTests: AdminToolSuite {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    func json(_ result: Worker.Result) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
    }

    @Test func putGetShowListRemove() async throws {
        #expect(try await run("put", "greeting", "--etag", "\"v1\"", "--expires=1h", input: "hello\n").status == 0)
        let get = try await run("get", "greeting")
        #expect(get.status == 0 && get.output == "hello\n")

        let show = try json(try await run("show", "greeting", "--json"))
        #expect(show["key"] as? String == "greeting")
        #expect(show["size"] as? Int == 6)
        #expect(show["etag"] as? String == "\"v1\"")
        #expect(show["hash"] as? String == KeyHash(key: "greeting").hex)
        #expect(show["expiresAt"] != nil)

        #expect(try await run("put", "--", "-dashed key", input: "x").status == 0)
        let list = try await run("ls", "--json").output.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(Set(list.compactMap { $0["key"] as? String }) == ["greeting", "-dashed key"])
        #expect(try await run("ls").output.contains("greeting"))

        let removed = try await run("rm", "greeting", "no-such-key-17")
        #expect(removed.status == 1)
        #expect(removed.errors.contains("no-such-key-17"))  // which key was not there
        #expect(try await run("get", "greeting").status == 1)
        #expect(try await run("put", "again", input: "a").status == 0)
        // One JSON line per key, its outcome a boolean (it was the string "true" or "false").
        let lines = try await run("rm", "again", "no-such-key-17", "--json").output.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(lines.map { $0["target"] as? String } == ["again", "no-such-key-17"])
        #expect(lines.map { $0["removed"] as? Bool } == [true, false])
        #expect(try await run("rm", "--hash", KeyHash(key: "-dashed key").hex).status == 0)
        #expect(try await run("ls").output.isEmpty)
    }

    @Test func putReadsAFileAndGetWritesOne() async throws {
        let source = directory("source.bin")
        let bytes = Data((0..<70_000).map { UInt8($0 % 256) })
        try bytes.write(to: URL(fileURLWithPath: source))
        #expect(try await run("put", "blob", source).status == 0)
        #expect(try await run("get", "blob", "-o", directory("copy.bin")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("copy.bin"))) == bytes)
        #expect(try await run("put", "blob", directory("does-not-exist")).status == 66)
    }

    @Test func clearAndStatCountWhatEveryProcessDid() async throws {
        for index in 0..<3 { #expect(try await run("put", "k\(index)", input: "v").status == 0) }
        #expect(try await run("get", "k0").status == 0)
        #expect(try await Worker.run(["get", cache, "k1"]).status == 0)  // another process's hit
        #expect(try await Worker.run(["get", cache, "nope"]).status == 1)  // and its miss
        #expect(try await run("rm", "k2").status == 0)

        var stat = try json(try await run("stat", "--json"))
        #expect(stat["entries"] as? Int == 2)
        let activity = try #require(stat["activity"] as? [String: Any])
        #expect(activity["stores"] as? Int == 3)
        #expect(activity["hits"] as? Int == 2)
        #expect(activity["misses"] as? Int == 1)
        #expect((activity["removals"] as? [String: Int])?["manual"] == 1)
        #expect(stat["compactorProcessID"] == nil)

        let cleared = try await run("clear", "--json")
        #expect(try json(cleared)["removed"] as? Int == 2)
        stat = try json(try await run("stat", "--json"))
        #expect(stat["entries"] as? Int == 0)
        #expect(((stat["activity"] as? [String: Any])?["removals"] as? [String: Int])?["cleared"] == 2)
        // The human rendering of the same numbers still runs; the numbers are the JSON's to check.
        #expect(try await run("stat").status == 0)
    }

    @Test func exitStatusesForMissesUsageAndBadDirectories() async throws {
        #expect(try await run("get", "nothing").status == 1)
        #expect(try await run("show", "nothing").status == 1)
        #expect(try await run("frobnicate").status == 64)
        #expect(try await run("get").status == 64)
        #expect(try await run("get", "a", "b").status == 64)
        #expect(try await run("ls", "--no-such-flag").status == 64)
        #expect(try await run("put", "k", "--expires", "soonish", input: "").status == 64)
        #expect(try await run("rm", "--hash", "xyz").status == 64)
        let usage = try await run("get", "--output")
        #expect(usage.status == 64 && usage.errors.contains("--output"))
        // The help it points to is there, and tells of the option.
        let pointer = try #require(usage.errors.firstMatch(of: /'sharedcache ([^']+)'/))
        let help = try await Tool.admin.run(pointer.1.split(separator: " ").map(String.init))
        #expect(help.status == 0 && help.output.contains("--output"))

        #expect(try await run("stat").status == 0)
        try Data("sharedcache 4.0\n".utf8).write(to: URL(fileURLWithPath: "\(cache)/format"))
        let newer = try await run("stat")
        #expect(newer.status == 65)
        // 65 is also corrupt data: the library says which it is.
        #expect {
            try SharedCache(directory: cache)
        } throws: {
            ($0 as? SharedCacheError)?.code == .unsupportedFormat
        }

        _ = FileManager.default.createFile(atPath: directory("file"), contents: Data())
        #expect(try await Tool.admin.run(["--dir", directory("file"), "stat"]).status == 69)
    }

    /// A usage error names, in quotes, the help to read: run as it is given, it is the usage of
    /// the command that was misused (the overview, where no command was known), and exits 0.
    @Test(arguments: [
        ["get", "--no-such-option"], ["put"], ["rm"], ["clear", "extra"], ["ls", "--no-such-option"],
        ["show"], ["stat", "extra"], ["journal", "extra"], ["verify", "extra"], ["compact", "extra"],
        ["config", "no-such-limit", "1"], ["demo", "--clients", "9"], ["fetch"], ["init", "--no-such-option"],
        ["no-such-command"], ["--dir"],
    ])
    func aUsageErrorNamesTheHelpToRead(arguments: [String]) async throws {
        let refused = try await Tool.admin.run(arguments, environment: ["SHAREDCACHE_DIR": cache])
        #expect(refused.status == 64)
        #expect(isOneHumanLine(refused.errors), "\(refused.errors)")
        let help = try Advice(refused.errors).quoted().split(separator: " ").map(String.init)
        try #require(help.first == "sharedcache", "not a sharedcache command: \(help)")
        let shown = try await Tool.admin.run(Array(help.dropFirst()))
        #expect(shown.status == 0)
        let commands = [
            "get", "put", "rm", "clear", "ls", "show", "stat", "journal", "verify", "compact", "config", "demo",
            "fetch", "init",
        ]
        let known = commands.contains(arguments[0])
        #expect(shown.output == (try await Tool.admin.run(known ? [arguments[0], "--help"] : ["help"])).output)
    }

    /// The compactor's usage errors name its help the same way.
    @Test(arguments: [["--no-such-option"], ["extra"], ["--interval", "soon"]])
    func aUsageErrorOfTheCompactorNamesTheHelpToRead(arguments: [String]) async throws {
        let refused = try await Tool.daemon.run(["--dir", cache] + arguments)
        #expect(refused.status == 64)
        #expect(isOneHumanLine(refused.errors), "\(refused.errors)")
        let help = try Advice(refused.errors).quoted().split(separator: " ").map(String.init)
        try #require(help.first == "sharedcached", "not a sharedcached command: \(help)")
        let shown = try await Tool.daemon.run(Array(help.dropFirst()))
        #expect(shown.status == 0 && !shown.output.isEmpty)
    }

    @Test func helpAndVersion() async throws {
        #expect(try await run("--version").output.hasPrefix("sharedcache "))
        let overview = try await run("help")
        #expect(overview.status == 0)
        for command in [
            "get", "put", "rm", "clear", "ls", "show", "stat", "journal", "verify", "compact", "config", "demo",
        ] {
            #expect(overview.output.contains("  \(command) "))
            let help = try await run("help", command)
            #expect(help.status == 0 && help.output.hasPrefix("usage: sharedcache"))
            #expect(try await run(command, "--help").output == help.output)
        }
        #expect(!overview.output.contains("demo-client"))
        // `help [command]` of itself is the overview (it was an unknown command).
        let helpOfHelp = try await run("help", "help")
        #expect(helpOfHelp.status == 0 && helpOfHelp.output == overview.output)
        // The demo makes a directory of its own: no `--dir` in its help, and one given is wrong
        // usage (it was listed, and ignored).
        #expect(!(try await run("help", "demo")).output.contains("--dir"))
        #expect(try await Tool.admin.run(["--dir", cache, "demo", "--seconds", "1"]).status == 64)
        #expect(try await Tool.admin.run(["--dir", cache, "demo", "--help"]).status == 0, "help comes first")
        #expect(!FileManager.default.fileExists(atPath: cache))
    }

    @Test func configShowsAndSetsTheSharedLimits() async throws {
        #expect(try await run("config", "size-limit", "500M").output == "size-limit = 500000000\n")
        #expect(try await run("config", "entry-limit", "1000").status == 0)
        #expect(try await run("config", "default-expiry", "2d").status == 0)
        #expect(try await run("config", "size-limit").output == "500000000\n")
        let all = try json(try await run("config", "--json"))
        #expect(all["size-limit"] as? String == "500000000")
        #expect(all["entry-limit"] as? String == "1000")
        #expect(all["default-expiry"] as? String == "172800")
        #expect(try await run("config", "size-limit", "2Gi").output == "size-limit = 2147483648\n")
        #expect(try await run("config", "colour", "blue").status == 64)
        #expect(try await run("config", "size-limit", "huge").status == 64)
        #expect(try SharedCache(directory: cache).configuration.sizeLimit == 2_147_483_648)
        #expect(try await run("config", "http-audience").output == "private\n")
        #expect(try await run("config", "http-audience", "shared").output == "http-audience = shared\n")
        #expect(try await run("config", "http-audience", "everyone").status == 64)
        #expect(try SharedCache(directory: cache).configuration.httpAudience == .shared)
        // A directory a group shares is a shared cache, and cannot be made private.
        let group = directory("group")
        _ = try SharedCache(directory: group, configuration: Configuration(sharing: .group))
        #expect(try await Tool.admin.run(["--dir", group, "config", "http-audience"]).output == "shared\n")
        #expect(try await Tool.admin.run(["--dir", group, "config", "http-audience", "private"]).status == 64)
    }

    /// Issue 18: `config default-expiry 0` wrote 1, so every entry expired after a second. 0 means
    /// no default expiry, as 0 means no limit for size-limit and entry-limit.
    @Test func defaultExpiryZeroMeansNever() async throws {
        #expect(try await run("config", "default-expiry", "2d").status == 0)
        #expect(try await run("config", "default-expiry", "0").output == "default-expiry = never\n")
        #expect(try await run("config", "default-expiry").output == "never\n")
        #expect(try SharedCache(directory: cache).configuration.defaultExpiry == nil)
        #expect(try await run("put", "k", input: "v").status == 0)
        #expect(try json(try await run("show", "k", "--json"))["expiresAt"] == nil)
    }

    @Test func configTellsARunningCompactorToRereadIt() async throws {
        _ = try SharedCache(directory: cache)
        let daemon = try Tool.daemon.start(["--dir", cache])
        let log = try #require(daemon.errors)
        #expect(await log.nextLine()?.contains("compacting") == true)
        #expect(await log.nextLine() != nil)  // its first pass
        let set = try await run("config", "size-limit", "5M")
        #expect(set.errors.contains("\(daemon.processID)"))  // which compactor it told
        // The next thing it logs is the re-read, naming the file it read.
        #expect(await log.nextLine()?.contains("\(cache)/config") == true)
        let stat = try json(try await run("stat", "--json"))
        #expect(stat["compactorProcessID"] as? Int32 == daemon.processID)
        #expect(try await run("compact").status == 75)
        daemon.signal(SIGTERM)
        await daemon.wait()
    }

    @Test func compactAndItsDryRun() async throws {
        #expect(try await run("config", "size-limit", "10K").status == 0)
        for index in 0..<20 {
            #expect(try await run("put", "k\(index)", input: String(repeating: "x", count: 1000)).status == 0)
        }
        let dry = try await run("compact", "--dry-run")
        #expect(
            dry.output.split(separator: "\n").filter { $0.hasPrefix("would evict ") && $0.contains("reason size") }
                .count == 11)
        #expect(try json(try await run("stat", "--json"))["entries"] as? Int == 20)
        let done = try json(try await run("compact", "--json"))
        #expect((done["evictions"] as? [Any])?.count == 11)
        #expect(try json(try await run("stat", "--json"))["entries"] as? Int == 9)
    }

    /// `verify` reports planted damage and exits 65; `--repair` fixes it; the next verify is clean.
    @Test func verifyFindsAndRepairsPlantedDamage() async throws {
        _ = try SharedCache(directory: cache, configuration: .blobFiles)  // damage is planted in blob files
        for index in 0..<5 {
            #expect(try await run("put", "k\(index)", input: String(repeating: "\(index)", count: 300)).status == 0)
        }
        #expect(try await run("verify").status == 0)
        let blobs = try blobFiles(in: cache).sorted()
        try FileManager.default.removeItem(atPath: "\(cache)/blobs/\(blobs[0])")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: "\(cache)/blobs/\(blobs[1])"))
        bytes[bytes.count - 1] ^= 1
        try bytes.write(to: URL(fileURLWithPath: "\(cache)/blobs/\(blobs[1])"))
        let stray = "\(cache)/blobs/cd/\(String(repeating: "cd", count: 32)).00000000000000aa"
        try Data("stray".utf8).write(to: URL(fileURLWithPath: stray))
        try backdate(stray)

        let found = try await run("verify", "--json")
        #expect(found.status == 65)
        let problems = try #require(try json(found)["problems"] as? [[String: Any]])
        #expect(Set(problems.compactMap { $0["kind"] as? String }) == ["missingBlob", "damagedBlob", "orphanBlob"])
        #expect(try await run("verify", "--repair").status == 0)
        let clean = try await run("verify")
        #expect(clean.status == 0)
        #expect(clean.output == "3 entries checked (900 B), 0 problem(s), 0 remaining\n")
    }

    /// `journal --follow` shows another process's put and removal as they happen. (How soon is
    /// the benchmark's to measure: a bound here only flaked on a loaded machine.)
    @Test func journalFollowSeesOtherProcessesPutsAndRemovals() async throws {
        #expect(try await run("put", "before", input: "x").status == 0)
        let follower = try Tool.admin.start(["journal", "--follow", "--json"], environment: ["SHAREDCACHE_DIR": cache])
        defer {
            follower.signal(SIGTERM)
            follower.wait()
        }
        #expect(await follower.nextLine()?.contains("\"key\":\"before\"") == true)

        #expect(try await Worker.run(["put", cache, "during", "body"]).status == 0)
        let stored = try #require(await follower.nextLine())
        let record = try #require(JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        #expect(record["type"] as? String == "stored" && record["key"] as? String == "during")

        #expect(try await Worker.run(["remove", cache, "during"]).status == 0)
        let removed = try #require(await follower.nextLine())
        #expect(removed.contains("\"type\":\"removed\"") && removed.contains("\"reason\":\"manual\""))
    }

    /// A follower of a directory that was removed waited in silence for ever; it now says so and
    /// exits 69.
    @Test func journalFollowEndsWhenItsDirectoryIsRemoved() async throws {
        #expect(try await run("put", "before", input: "x").status == 0)
        let follower = try Tool.admin.start(["journal", "--follow"], environment: ["SHAREDCACHE_DIR": cache])
        #expect(await follower.nextLine()?.contains("before") == true)
        try FileManager.default.removeItem(atPath: cache)
        #expect(await follower.wait() == .exited(69))
    }

    @Test func theDemoFinishesWithConsistentCounts() async throws {
        // How fast is the benchmark's business; under the sanitizers, sharing 2 cores with the
        // suite, a 3-second demo took a minute. It must finish, and agree with itself.
        let result = try await Tool.admin.run(["demo", "--seconds", "3", "--json"])
        #expect(result.status == 0, "\(result.errors)")
        let summary = try json(result)
        #expect(summary["consistent"] as? Bool == true)
        let clients = try #require(summary["clients"] as? [[String: Int]])
        #expect(clients.count == 3)
        // sharedcache(1): each client stores at least 20 entries, however long that takes.
        #expect(clients.allSatisfy { ($0["stored"] ?? 0) >= 20 && $0["heard"] == summary["journaledRemovals"] as? Int })
        #expect((summary["compactorEvictions"] as? Int ?? 0) > 0)

        // Without --json it shows the clients live, and still exits 70 if its counts disagree.
        let live = try await Tool.admin.run(["demo", "--seconds", "1", "--clients", "2"])
        #expect(live.status == 0, "\(live.output)\(live.errors)")
        #expect(!live.output.isEmpty)
    }
}
