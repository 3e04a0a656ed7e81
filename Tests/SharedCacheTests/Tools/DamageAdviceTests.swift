import Foundation
import SharedCacheCLI
import SharedCacheFormat
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 18: damage that was reported as "an I/O error; check the disk and the kernel log", or
/// with Swift debug text, or with advice that does not work. Each case plants the damage, checks
/// the exit status and that the error is one plain line, then does what the message says to
/// do, taking the path and the command out of the message (``Advice``), and uses the cache.
@Suite("sharedcache, damage reported with the right status and advice that works")
struct DamageAdviceTests: AdminToolSuite {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// Stores two entries, checkpoints them into the manifest, and stores a third after it.
    func populate() async throws {
        #expect(try await run("put", "k1", input: "v1").status == 0)
        #expect(try await run("put", "k2", input: "v2").status == 0)
        #expect(try await run("compact").status == 0)
        #expect(try await run("put", "k3", input: "v3").status == 0)
    }

    /// The cache answers again: what the manifest held is there, and a new entry round-trips.
    func expectUsable(_ comment: Comment? = nil) async throws {
        #expect(try await run("get", "k1").output == "v1", comment)
        #expect(try await run("put", "new", input: "n").status == 0, comment)
        #expect(try await run("get", "new").output == "n", comment)
        #expect(try await run("verify").status == 0, comment)
    }

    func newestSegment() throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/journal").sorted()
        return "\(cache)/journal/\(try #require(names.last))"
    }

    @Test(arguments: ["fifo", "garbage"])
    func somethingElseWhereAJournalSegmentBelongs(damage: String) async throws {
        try await populate()
        let segment = try newestSegment()
        try FileManager.default.removeItem(atPath: segment)
        if damage == "fifo" {
            #expect(mkfifo(segment, 0o600) == 0)
        } else {
            try Data("not a journal segment at all".utf8).write(to: URL(fileURLWithPath: segment))
        }
        let result = try await run("ls")
        #expect(result.status == (damage == "fifo" ? 69 : 65))
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        // Remove it and run the command.
        let advice = Advice(result.errors)
        #expect(try advice.path() == segment)
        try FileManager.default.removeItem(atPath: try advice.path())
        #expect(try await runAdvised(try advice.command()).status == 0)
        try await expectUsable()
    }

    /// The segment puts append to says an older format version (only an upgrade leaves one, and
    /// sealed): the put is refused with the command that starts a segment of this version, and
    /// run, puts work and nothing stored is lost. (It said to close every process and open the
    /// cache again, which changed nothing.)
    @Test func aJournalSegmentOfAnOlderVersion() async throws {
        try await populate()
        #expect(try await run("compact").status == 0)  // the newest segment is a header alone
        let segment = try newestSegment()
        let generation = try #require(UInt64((segment as NSString).lastPathComponent, radix: 16))
        let current = try Data(contentsOf: URL(fileURLWithPath: segment)).withUnsafeBytes {
            try SegmentHeader.decode($0)
        }
        let older = SegmentHeader(
            generation: generation, firstSequence: current.firstSequence, major: FormatVersion.current.major - 1)
        try Data(older.encoded()).write(to: URL(fileURLWithPath: segment))
        let refused = try await run("put", "k4", input: "v4")
        #expect(refused.status == 65)
        #expect(isOneHumanLine(refused.errors), "\(refused.errors)")
        #expect(try await runAdvised(try Advice(refused.errors).command()).status == 0)
        #expect(try await run("put", "k4", input: "v4").status == 0)
        #expect(try await run("get", "k4").output == "v4")
        #expect(try await run("get", "k3").output == "v3")
        try await expectUsable()
    }

    @Test func aDirectoryWhereTheManifestBelongs() async throws {
        try await populate()
        try FileManager.default.removeItem(atPath: "\(cache)/manifest")
        try FileManager.default.createDirectory(atPath: "\(cache)/manifest", withIntermediateDirectories: false)
        let result = try await run("ls")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        // Remove it and open the cache again: the manifest is rebuilt from the blobs.
        try FileManager.default.removeItem(atPath: try Advice(result.errors).path())
        #expect(try await run("ls").status == 0)
        try await expectUsable()
    }

    /// Something other than a file where the full-disk reserve belongs: `verify` reports it and
    /// `verify --repair` puts the reserve in its place. (It went unreported, and the reserve was
    /// never made: a full disk then stopped the compactor that frees it.)
    @Test(arguments: ["folder", "fifo"])
    func somethingElseWhereTheReserveBelongs(planted: String) async throws {
        try await populate()
        let reserve = "\(cache)/reserve"
        try FileManager.default.removeItem(atPath: reserve)
        if planted == "fifo" {
            #expect(mkfifo(reserve, 0o600) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: reserve, withIntermediateDirectories: false)
        }
        #expect(try await run("compact").status == 0)
        #expect(try await run("verify").status == 65)
        #expect(try await run("verify", "--repair").status == 0)
        let made = try FileManager.default.attributesOfItem(atPath: reserve)
        #expect(made[.type] as? FileAttributeType == .typeRegular)
        #expect((made[.size] as? NSNumber)?.intValue == 1 << 20)
        try await expectUsable()
    }

    @Test func aFIFOWhereTheCompactorLockBelongs() async throws {
        try await populate()
        try? FileManager.default.removeItem(atPath: "\(cache)/daemon")
        #expect(mkfifo("\(cache)/daemon", 0o600) == 0)
        let result = try await run("compact")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        let daemon = try await Tool.daemon.run(["--dir", cache, "--once"])
        #expect(daemon.status == 69)
        // Remove it and start the compactor again: it makes a new one.
        try FileManager.default.removeItem(atPath: try Advice(result.errors).path())
        #expect(try await run("compact").status == 0)
        #expect(try await Tool.daemon.run(["--dir", cache, "--once"]).status == 0)
        try await expectUsable()
    }

    @Test func anEmptyDirectoryIsAUsageError() async throws {
        for arguments in [["--dir", "", "stat"], ["--dir=", "stat"], ["stat", "--dir", ""]] {
            let result = try await Tool.admin.run(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(isOneHumanLine(result.errors), "\(result.errors)")
        }
        #expect(try await Tool.daemon.run(["--dir", "", "--once"]).status == 64)
    }

    /// A symbolic link where a file of the cache belongs names that file and the command that
    /// deals with it: a copy of what it points to in its place, or, for a file the cache makes
    /// anew, its removal (the message used to say to replace it "with the folder it points to",
    /// then to "remove the link", which lost the limits, the manifest or the format line).
    @Test(arguments: ["config", "manifest", "format", "lock", "daemon", "stats"])
    func aSymbolicLinkWhereACacheFileBelongs(name: String) async throws {
        try await populate()
        #expect(try await run("config", "size-limit", "7M").status == 0)
        let file = "\(cache)/\(name)", aside = directory("\(name).aside")
        if !FileManager.default.fileExists(atPath: file) {
            _ = FileManager.default.createFile(atPath: file, contents: nil)
        }
        try FileManager.default.moveItem(atPath: file, toPath: aside)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: aside)
        let result = try await run("compact")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        #expect(try Advice(result.errors).path() == file)
        #expect(try await shell(Advice(result.errors).enclosed(by: "`")).status == 0)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: file)) == nil, "still a link")
        #expect(try await run("compact").status == 0)
        #expect(try await run("config", "size-limit").output == "7000000\n", "the limit set before is kept")
        try await expectUsable()
    }

    /// A symbolic link to nothing where a file or folder of the cache belongs: nothing is left to
    /// put in its place, and the error names the command that removes it, and for `config` the
    /// one that sets the limits again. Run, the cache opens and what the link did not take is
    /// there. (For a folder it said to replace the link with the folder it points to, which is
    /// gone; for `config`, that the limits set before went back to the defaults, not a word.)
    @Test(arguments: ["config", "manifest", "newest segment", "journal", "blobs/00"])
    func aSymbolicLinkToNothingWhereACacheFileBelongs(name: String) async throws {
        _ = try SharedCache(directory: cache, configuration: .blobFiles)  // bodies in blobs/, k3's too
        try await populate()
        #expect(try await run("config", "size-limit", "7M").status == 0)
        let file = name == "newest segment" ? try newestSegment() : "\(cache)/\(name)"
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: directory("gone"))
        let result = try await run("compact")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        let advice = Advice(result.errors)
        #expect(try advice.path() == file)
        let commands = advice.allEnclosed(by: "`")
        #expect(try await shell(try #require(commands.first)).status == 0)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: file)) == nil, "still a link")
        if name == "config" {
            let setTheLimits = try #require(commands.dropFirst().first).split(separator: " ").map(String.init)
            #expect(try await runAdvised(setTheLimits, "size-limit", "7M").status == 0)
        }
        #expect(try await run("compact").status == 0)
        #expect(try await run("config", "size-limit").output == "7000000\n")
        #expect(try await run("get", "k2").output == "v2")
        if !["newest segment", "journal"].contains(name) {  // k3 was journaled there: the link took it
            #expect(try await run("get", "k3").output == "v3")
        }
        if name == "journal" {
            // k3's body file, whose record went with the journal, is an orphan, which `verify`
            // reports once it is a minute old (a loaded run got there) and --repair removes: made
            // that old here, so that both are seen whatever the pace.
            let minutesAgo = Date(timeIntervalSinceNow: -120)
            for blob in try blobFiles(in: cache).map({ "\(cache)/blobs/\($0)" }) {
                try FileManager.default.setAttributes([.modificationDate: minutesAgo], ofItemAtPath: blob)
            }
            #expect(try await run("verify").status == 65)
            #expect(try await run("verify", "--repair").status == 0)
        }
        try await expectUsable()
    }

    /// A path in a command a message gives is one word to sh(1), whatever it holds.
    @Test(arguments: ["/plain/cache-1.2", "/with space/it's here", "/tab\there/$HOME/`x`", "/a;b|c&d"])
    func aPathInACommandIsOneWordToTheShell(path: String) async throws {
        let printed = try await shell("printf %s \(SharedCacheError.shellWord(path))")
        #expect(printed.status == 0 && printed.output == path)
    }

    /// A symbolic link where a journal segment belongs: the error names the command that puts a
    /// copy of the segment in its place, and run, every entry is there, the ones journaled in
    /// that segment too. (It said to remove the link, which lost them.)
    @Test func aSymbolicLinkWhereAJournalSegmentBelongs() async throws {
        try await populate()
        let segment = try newestSegment(), aside = directory("segment.aside")
        try FileManager.default.moveItem(atPath: segment, toPath: aside)
        try FileManager.default.createSymbolicLink(atPath: segment, withDestinationPath: aside)
        let result = try await run("get", "k3")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        #expect(try Advice(result.errors).path() == segment)
        #expect(try await shell(Advice(result.errors).enclosed(by: "`")).status == 0)
        #expect(try await run("get", "k3").output == "v3")
        #expect(try await run("get", "k2").output == "v2")
        try await expectUsable()
    }

    /// A symbolic link where a blob belongs: `verify` says so, and `verify --repair` removes it.
    @Test func aSymbolicLinkWhereABlobBelongs() async throws {
        _ = try SharedCache(directory: cache, configuration: .blobFiles)  // every body in a blob file
        try await populate()
        let path = try #require(try SharedCache(directory: cache).listEntries().first { $0.key == "k2" }).path
        try FileManager.default.moveItem(atPath: path, toPath: directory("blob.aside"))
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory("blob.aside"))
        let found = try await run("verify", "--json")
        #expect(found.status == 65)
        let problems = try #require(
            (try JSONSerialization.jsonObject(with: Data(found.output.utf8)) as? [String: Any])?["problems"]
                as? [[String: Any]])
        #expect(problems.count == 1)
        #expect(try await run("verify", "--repair").status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try await run("get", "k2").status == 1)
        try await expectUsable()
    }

    /// A symbolic link where a pack segment belongs: the entries in it are misses, `verify`
    /// reports them and the link, and `verify --repair` removes both.
    @Test func aSymbolicLinkWhereAPackSegmentBelongs() async throws {
        try await populate()
        let segments = try packSegments(in: cache)
        #expect(!segments.isEmpty)
        for segment in segments {
            let path = "\(cache)/packs/\(segment)"
            try FileManager.default.moveItem(atPath: path, toPath: directory("\(segment).aside"))
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory("\(segment).aside"))
        }
        let found = try await run("verify")
        #expect(found.status == 65)
        #expect(try await run("verify", "--repair").status == 0)
        #expect(try packSegments(in: cache).isEmpty)
        #expect(try await run("get", "k2").status == 1)
        #expect(try await run("verify").status == 0)
        #expect(try await run("put", "new", input: "n").status == 0)
        #expect(try await run("get", "new").output == "n")
    }

    /// A config file with a bad line: the message says which line, without Swift's debug text,
    /// and its advice works (`sharedcache config` itself cannot open a cache whose config is bad).
    @Test func aDamagedConfigFile() async throws {
        try await populate()
        try Data("size-limit = lots\n".utf8).write(to: URL(fileURLWithPath: "\(cache)/config"))
        let result = try await run("stat")
        #expect(result.status == 65)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        // Remove the file and set the limits again with the command.
        let advice = Advice(result.errors)
        try FileManager.default.removeItem(atPath: try advice.path())
        #expect(try await runAdvised(try advice.command(), "size-limit", "5M").status == 0)
        #expect(try await run("config", "size-limit").output == "5000000\n")
        try await expectUsable()
    }

    /// A damaged format file: no debug text, and advice that works (verify cannot open it).
    @Test func aDamagedFormatFile() async throws {
        try await populate()
        try Data("sharedcache 1.x\n".utf8).write(to: URL(fileURLWithPath: "\(cache)/format"))
        let result = try await run("stat")
        #expect(result.status == 65)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        // Write exactly the line the message names into the file it names. (A line of an older
        // version would pass whatever the message said: the cache would upgrade from it.)
        let advice = Advice(result.errors)
        try Data("\(try advice.quoted())\n".utf8).write(to: URL(fileURLWithPath: try advice.path()))
        try await expectUsable()
        #expect(try await run("stat").status == 0)
    }

    /// The `format` file removed from a cache in use: refused with the line to write back (it
    /// was taken for a creation that died half-way, and its `config` reset to the defaults: an
    /// audience of `shared` back to `private`). Written, everything is as it was.
    @Test func aMissingFormatFile() async throws {
        try await populate()
        #expect(try await run("config", "size-limit", "7M").status == 0)
        #expect(try await run("config", "http-audience", "shared").status == 0)
        try FileManager.default.removeItem(atPath: "\(cache)/format")
        let result = try await run("ls")
        #expect(result.status == 65)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        let advice = Advice(result.errors)
        try Data("\(try advice.quoted())\n".utf8).write(to: URL(fileURLWithPath: try advice.path()))
        try await expectUsable()
        #expect(try await run("config", "size-limit").output == "7000000\n")
        #expect(try await run("config", "http-audience").output == "shared\n")
    }

    /// The other way out of a symbolic link where a pack segment belongs, which `verify`'s
    /// report offers: replaced with a copy of the file it points to before any read discarded
    /// its entries, every entry is there again.
    @Test func aSymbolicLinkWhereAPackSegmentBelongsReplacedByACopy() async throws {
        try await populate()
        let segments = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/packs")
        try #require(segments.count == 1)
        let segment = "\(cache)/packs/\(segments[0])", aside = directory("segment.aside")
        try FileManager.default.moveItem(atPath: segment, toPath: aside)
        try FileManager.default.createSymbolicLink(atPath: segment, withDestinationPath: aside)
        let verify = try await run("verify", "--json")
        #expect(verify.status == 65)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(verify.output.utf8)) as? [String: Any])
        let problems = try #require(report["problems"] as? [[String: Any]])
        let named = problems.filter { $0["kind"] as? String == "foreignFile" }.compactMap { $0["path"] as? String }
        #expect(named == ["packs/\(segments[0])"], "\(problems)")
        // Replace the link with a copy of the file it points to.
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: segment)
        try FileManager.default.removeItem(atPath: segment)
        try FileManager.default.copyItem(atPath: target, toPath: segment)
        try await expectUsable()
        #expect(try await run("get", "k2").output == "v2")
    }

    /// Something else where the cache keeps its limits (`config`): the error names it, says to
    /// remove it, and, as the limits then return to the defaults, how to set them again (it said
    /// only to remove it, and a limit set before was lost without a word).
    @Test(arguments: ["folder", "fifo"])
    func somethingElseWhereTheConfigBelongs(planted: String) async throws {
        try await populate()
        #expect(try await run("config", "size-limit", "7M").status == 0)
        let config = "\(cache)/config"
        try FileManager.default.removeItem(atPath: config)
        if planted == "fifo" {
            #expect(mkfifo(config, 0o600) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: false)
        }
        let result = try await run("put", "k4", input: "v4")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        let advice = Advice(result.errors)
        #expect(try advice.path() == config)
        try FileManager.default.removeItem(atPath: try advice.path())
        #expect(try await runAdvised(try advice.command(), "size-limit", "7M").status == 0)
        #expect(try await run("config", "size-limit").output == "7000000\n")
        try await expectUsable()
    }

    /// Something else where the cache keeps a file: a folder where it opens to write (`lock`), a
    /// FIFO where it takes its directory lock (flock works on one, and every command went on as
    /// if it were the cache's). The error names it and says to remove it.
    @Test(arguments: [("lock", "folder"), ("lock", "fifo")])
    func somethingElseWhereACacheFileBelongs(name: String, planted: String) async throws {
        try await populate()
        try FileManager.default.removeItem(atPath: "\(cache)/\(name)")
        if planted == "fifo" {
            #expect(mkfifo("\(cache)/\(name)", 0o600) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: "\(cache)/\(name)", withIntermediateDirectories: false)
        }
        let result = try await run("put", "k4", input: "v4")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        let path = try Advice(result.errors).path()
        #expect(path == "\(cache)/\(name)")
        try FileManager.default.removeItem(atPath: path)
        try await expectUsable()
    }

    /// A file where one of the cache's folders belongs: the error says a component of a path in
    /// it is not a folder, and to remove the stray file. Removed, the folder is made again (the
    /// next open makes every missing one; a write, the temporary folder); what it held is gone
    /// with it. For `packs`, the packed bodies: `verify --repair` drops what the journal still
    /// names. For `journal`, what came after the checkpoint: the manifest's entries stay (they
    /// were rebuilt from the bodies, which lost every packed one). (It was never made again,
    /// and every command failed.)
    @Test(arguments: ["tmp", "blobs", "packs", "journal"])
    func aFileWhereACacheFolderBelongs(folder: String) async throws {
        try await populate()
        try FileManager.default.removeItem(atPath: "\(cache)/\(folder)")
        _ = FileManager.default.createFile(atPath: "\(cache)/\(folder)", contents: Data("stray".utf8))
        let result = try await run("compact")
        #expect(result.status == 69)
        #expect(isOneHumanLine(result.errors), "\(result.errors)")
        // The stray file: the first component of the named path that is not a folder.
        var component = try Advice(result.errors).path()
        var isFolder: ObjCBool = false
        while !(FileManager.default.fileExists(atPath: component, isDirectory: &isFolder) && !isFolder.boolValue) {
            try #require(component.hasPrefix(cache + "/"), "no stray file on the path: \(result.errors)")
            component = (component as NSString).deletingLastPathComponent
        }
        #expect(component == "\(cache)/\(folder)")
        try FileManager.default.removeItem(atPath: component)
        if folder == "journal" {
            try await expectUsable()
            #expect(try await run("get", "k2").output == "v2")
        } else if folder == "packs" {
            #expect(try await run("verify", "--repair").status == 0)
            #expect(try await run("put", "new", input: "n").status == 0)
            #expect(try await run("get", "new").output == "n")
            #expect(try await run("verify").status == 0)
        } else {
            try await expectUsable()
        }
        #expect(try await run("compact").status == 0)
    }

    /// The manifest and every journal segment deleted under a process that has the cache open:
    /// it lost its journal position and finds no manifest and segment that agree, and says to
    /// run `sharedcache verify --repair`; until then every call says so (a put appended to the
    /// deleted segment, where no other process reads). Run, the repair rebuilds what the bodies
    /// and journal still hold, and the process that lost its place goes on from there.
    @Test func aJournalPositionLostUnderAnOpenCache() async throws {
        try await populate()
        let open = try SharedCache(directory: cache)
        #expect(try open.get(key: "k1")?.data == Data("v1".utf8))
        try FileManager.default.removeItem(atPath: "\(cache)/manifest")
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(cache)/journal") {
            try FileManager.default.removeItem(atPath: "\(cache)/journal/\(name)")
        }
        // Noticed at its next look at the journal itself (within the check interval, 50 ms).
        let lost = try await Self.errorOnceNoticed { _ = try open.get(key: "k1") }
        #expect(lost?.code == .corruptData, "\(String(describing: lost))")
        #expect(throws: SharedCacheError.self) { try open.put(key: "k4", data: Data("v4".utf8)) }
        #expect(try await runAdvised(try Advice(try #require(lost?.message)).command()).status == 0)
        try open.put(key: "k4", data: Data("v4".utf8))
        #expect(try await run("get", "k4").output == "v4", "stored where every process reads")
        #expect(try await run("put", "new", input: "n").status == 0)
        #expect(try await run("get", "new").output == "n")
        #expect(try await run("verify").status == 0)
    }

    /// The error `call` throws once the process noticed what was done to its directory (it
    /// looks at the journal itself within the check interval); `nil` if it never threw.
    static func errorOnceNoticed(_ call: () throws -> Void) async throws -> SharedCacheError? {
        var thrown: SharedCacheError?
        #expect(
            try await eventually {
                do {
                    try call()
                    return false
                } catch let error as SharedCacheError {
                    thrown = error
                    return true
                }
            })
        return thrown
    }

    /// "Remove the directory to start over", which damage nothing repairs is reported with, done
    /// with `rm -rf` while a process has the cache open: the next process to open it makes it
    /// anew, and the open one says the directory was removed or replaced, and to open the cache
    /// again (it said its journal position was lost and to run `sharedcache verify --repair`,
    /// which changed nothing for it; or that a file vanished, and to try again). Opened again,
    /// it uses the new cache, what the other process stored there included.
    @Test(arguments: ["packed", "blob files"])
    func theDirectoryRemovedToStartOverUnderAnOpenCache(bodies: String) async throws {
        try await populate()
        let configuration = bodies == "packed" ? Configuration() : .blobFiles
        let open = try SharedCache(directory: cache, configuration: configuration)
        #expect(try open.get(key: "k1")?.data == Data("v1".utf8))
        #expect(try await shell("rm -rf \(SharedCacheError.shellWord(cache))").status == 0)
        if bodies == "blob files" {
            // The process's first put stages its body in tmp/, gone with the directory: the same
            // error, where it said that a file vanished, and to try again.
            let refused = #expect(throws: SharedCacheError.self) { try open.put(key: "k4", data: Data("v4".utf8)) }
            #expect(refused?.code == .notFound && refused?.path == cache, "\(String(describing: refused))")
        }
        #expect(try await run("put", "after", input: "a").status == 0, "made anew")
        // Noticed at its next look at the journal itself (within the check interval, 50 ms).
        let removed = try await Self.errorOnceNoticed { _ = try open.get(key: "k1") }
        #expect(removed?.code == .notFound, "\(String(describing: removed))")
        #expect(removed?.path == cache)
        #expect(throws: SharedCacheError.self) { try open.put(key: "k4", data: Data("v4".utf8)) }
        // Open the cache again.
        let again = try SharedCache(directory: cache, configuration: configuration)
        #expect(try again.get(key: "after")?.data == Data("a".utf8))
        #expect(try again.get(key: "k1") == nil, "started over")
        try again.put(key: "k4", data: Data("v4".utf8))
        #expect(try await run("get", "k4").output == "v4", "stored where every process reads")
        #expect(try await run("verify").status == 0)
    }

    /// A file of the cache vanishing as a put opens it (`openat` failing with ENOENT, by a
    /// failpoint, at each of the put's opens in turn, as another program deleting it would
    /// make it): the error says to stop that program and try again, or, for the format file,
    /// to try again. Tried again, the put works, and nothing stored before is lost.
    @Test(.enabled(if: FaultInjectionTests.hasFailpoints, "release builds have no failpoints"))
    func aFileThatVanishesAsThePutOpensIt() async throws {
        try await populate()
        var vanished = 0
        for occurrence in 1...40 {
            let vanishing = ["SHAREDCACHE_FAILPOINT": "openat:\(occurrence):2"]
            let put = try await Worker.run(["put", cache, "k4", "v\(occurrence)"], environment: vanishing)
            if put.status != 0 {
                vanished += 1
                #expect(["notFound", "corruptData"].contains(put.errorCode), "\(occurrence): \(put.errors)")
                // Try again.
                #expect(try await Worker.run(["put", cache, "k4", "v\(occurrence)"]).status == 0, "\(occurrence)")
            }
            #expect(try await run("get", "k4").output == "v\(occurrence)", "\(occurrence)")
            #expect(try await run("get", "k1").output == "v1", "\(occurrence)")
        }
        #expect(vanished > 0, "no open of the put's failed")
        #expect(try await run("get", "k2").output == "v2")
        #expect(try await run("get", "k3").output == "v3")
        try await expectUsable()
    }

    /// Too few file descriptors: the error says to raise the limit with the command it names in
    /// parentheses; under a raised limit the same put works. (The worker, to see the code.)
    @Test func tooFewFileDescriptors() async throws {
        try await populate()
        func put(after limit: String) async throws -> Worker.Result {
            await Worker.Result(
                finishing: try ChildProcess(
                    URL(fileURLWithPath: "/bin/sh"),
                    arguments: [
                        "-c", "\(limit); exec \"$0\" \"$@\"", Worker.executable.path, "put", cache, "k4", "v4",
                    ],
                    errors: .captured))
        }
        // The smallest limits fail before the cache opens a file, the larger ones not at all.
        var failure: (limit: String, result: Worker.Result)?
        for descriptors in 3...64 where failure == nil {
            let limit = "ulimit -S -n \(descriptors)"
            let result = try await put(after: limit)
            if result.errorCode == "tooManyOpenFiles" { failure = (limit, result) }
            if result.status == 0 { break }
        }
        let message = try #require(failure, "no limit made the put run out of descriptors").result.errors
        let command = try #require(message.split(separator: "(").dropFirst().first?.split(separator: ")").first)
        // The same low limit, then the command with a higher number.
        let lowered = try #require(failure?.limit)
        let raised = try await put(after: "\(lowered); \(command) 256")
        #expect(raised.status == 0, "\(command): \(raised.errors)")
        #expect(try await run("get", "k4").output == "v4")
        try await expectUsable()
    }

    /// A demo client that fails (a put the disk refuses): the demo stops, says so and to run it
    /// again with `--keep`. Run so, it fails the same way, keeps the directory and names the
    /// command that shows it, which shows every entry the clients stored, and the directory is a
    /// cache that works. (The demo waited for the failed client for ever, and the advice, run,
    /// kept a directory it did not name.)
    @Test(.hangLimit) func aDemoProcessThatFails() async throws {
        // The demo makes its directory in TMPDIR: here, so that what it keeps is found.
        let temporary = directory("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        // Each process's fourth pwrite(2) fails: a client's, appending a body to its pack after
        // a few puts; the demo itself and its compactor make none while the clients work.
        let environment = ["TMPDIR": temporary, "SHAREDCACHE_FAILPOINT": "pwrite:4:EIO"]
        let failed = try await Tool.admin.run(["demo", "--clients", "2", "--seconds", "1"], environment: environment)
        #expect(failed.status == 70)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "removed without --keep")
        // Its own line is the last: the clients' errors come before it, on the same stderr.
        let again = try Advice(lastLine(of: failed.errors)).command()
        try #require(again.first == "sharedcache", "not a sharedcache command: \(again)")
        let kept = try await Tool.admin.run(Array(again.dropFirst()), environment: environment)
        #expect(kept.status == 70)
        let look = Advice(lastLine(of: kept.errors))
        let demoDirectory = try look.path()
        let keptThere = try FileManager.default.contentsOfDirectory(atPath: temporary).map { "\(temporary)/\($0)" }
        #expect(keptThere == [demoDirectory])
        let command = try look.command()
        try #require(command.first == "sharedcache", "not a sharedcache command: \(command)")
        let shown = try await Tool.admin.run(Array(command.dropFirst()))
        #expect(shown.status == 0, "\(shown.errors)")
        // Every entry stored is there, whole, and the journal the command showed names it.
        let listed = try await Tool.admin.run(["--dir", demoDirectory, "ls", "--json"])
        let keys = try listed.output.split(separator: "\n").map {
            try #require((try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["key"] as? String)
        }
        #expect(!keys.isEmpty)
        for key in keys {
            #expect(shown.output.contains(key), "\(key) is not in what the command showed")
            let body = try await Tool.admin.run(["--dir", demoDirectory, "get", key])
            let client = try #require(key.split(separator: "/").first?.split(separator: "-").last.flatMap { UInt8($0) })
            #expect(body.status == 0 && !body.output.isEmpty && body.output.utf8.allSatisfy { $0 == client }, "\(key)")
        }
        #expect(try await Tool.admin.run(["--dir", demoDirectory, "put", "new"], input: Data("n".utf8)).status == 0)
        #expect(try await Tool.admin.run(["--dir", demoDirectory, "get", "new"]).output == "n")
        #expect(try await Tool.admin.run(["--dir", demoDirectory, "verify"]).status == 0)
    }

    /// The last line of a tool's standard error.
    func lastLine(of errors: String) -> String {
        String(errors.split(separator: "\n").last ?? "")
    }

    /// Runs the `sharedcache` command an error message advised, with `arguments` after it, on
    /// ``cache`` (the user's cache, as `SHAREDCACHE_DIR` names it).
    func runAdvised(_ command: [String], _ arguments: String...) async throws -> Worker.Result {
        try #require(command.first == "sharedcache", "not a sharedcache command: \(command)")
        return try await Tool.admin.run(Array(command.dropFirst()) + arguments, environment: ["SHAREDCACHE_DIR": cache])
    }
}

/// What an error message tells a person to do, taken out of its text, so that a test does
/// exactly that: a test that kept its own copy of the advice would pass whatever the message
/// said. Each part fails the test (`#require`) when the message holds nothing of its shape.
struct Advice {
    /// The message: the tool's line on standard error, or a ``SharedCacheError``'s message.
    let message: String

    init(_ message: String) { self.message = message }

    /// The longest absolute path the message names: the file or folder it is about (a message
    /// may name the cache's root first, as what was being opened).
    func path(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let paths = message.split(whereSeparator: \.isWhitespace).filter { $0.hasPrefix("/") }.map {
            String($0.reversed().drop { ",;:)]'`".contains($0) }.reversed())
        }
        return try #require(paths.max { $0.count < $1.count }, "no path in: \(message)", sourceLocation: sourceLocation)
    }

    /// The command the message puts in backquotes, as its words.
    func command(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        try enclosed(by: "`", sourceLocation: sourceLocation).split(separator: " ").map(String.init)
    }

    /// The text the message puts in single quotes (a line to write into a file).
    func quoted(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try enclosed(by: "'", sourceLocation: sourceLocation)
    }

    /// Every text the message puts between two `mark`s, in order.
    func allEnclosed(by mark: Character) -> [String] {
        let parts = message.split(separator: mark, omittingEmptySubsequences: false)
        return stride(from: 1, to: parts.count - 1, by: 2).map { String(parts[$0]) }
    }

    /// The text the message puts between two `mark`s: the first such.
    func enclosed(by mark: Character, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let parts = message.split(separator: mark, omittingEmptySubsequences: false)
        try #require(
            parts.count >= 3 && !parts[1].isEmpty, "nothing in \(mark)…\(mark) in: \(message)",
            sourceLocation: sourceLocation)
        return String(parts[1])
    }
}
