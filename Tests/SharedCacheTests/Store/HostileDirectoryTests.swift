import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Hostile directories: exposed roots, other users', links, network filesystems")
struct HostileDirectoryTests {
    @Test func aNewCacheIsPrivateToItsOwner() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        try cache.put(key: "k", data: Data("v".utf8))
        for path in ["cache", "cache/blobs", "cache/journal", "cache/tmp"] {
            let mode = try #require(FileManager.default.attributesOfItem(atPath: directory(path))[.posixPermissions] as? Int)
            #expect(mode == 0o700, "\(path) has mode \(String(mode, radix: 8))")
        }
        for path in ["cache/manifest", "cache/config", "cache/lock"] + (try blobFiles(in: directory("cache")).map { "cache/blobs/\($0)" }) {
            let mode = try #require(FileManager.default.attributesOfItem(atPath: directory(path))[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(path) has mode \(String(mode, radix: 8))")
        }
    }

    /// The refusal's advice, run as it names it (`chmod o-w`, not back to 0700: the group keeps
    /// its bits), then the cache stores and reads.
    @Test func aRootEveryUserMayWriteIsRefused() throws {
        let directory = try TemporaryDirectory()
        try SharedCache(directory: directory("cache")).put(key: "before", data: Data("kept".utf8))
        chmod(directory("cache"), 0o777)
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("cache")) }
        #expect(error?.code == .unsafePath && error?.path == directory("cache"), "\(String(describing: error))")
        // "run chmod o-w on it": the command the refusal names, on the path it names.
        let message = try #require(error?.message)
        let start = try #require(message.range(of: "run "), "\(message)")
        let end = try #require(message[start.upperBound...].range(of: " on it"), "\(message)")
        let named = message[start.upperBound..<end.lowerBound].split(separator: " ").map(String.init)
        try #require(named.first == "chmod", "\(message)")
        let step = try ChildProcess.run(
            URL(fileURLWithPath: "/bin/chmod"), arguments: named.dropFirst() + [try #require(error?.path)])
        #expect(step.termination == .exited(0), "\(named): \(step.output)")
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try cache.get(key: "before")?.data == Data("kept".utf8))
        try cache.put(key: "after", data: Data("new".utf8))
        #expect(try cache.get(key: "after")?.data == Data("new".utf8))
    }

    @Test func aRootThatIsASymbolicLinkIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("real"))
        try FileManager.default.createSymbolicLink(atPath: directory("link"), withDestinationPath: directory("real"))
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("link")) }
        #expect(error?.code == .unsafePath && error?.path == directory("link"), "\(String(describing: error))")
    }

    /// `O_NOFOLLOW` guards only a path's last component, so linked folders are refused at open.
    @Test(arguments: ["journal", "blobs/7f"])
    func aLinkedFolderInsideIsRefused(folder: String) throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        try FileManager.default.moveItem(atPath: directory("cache/\(folder)"), toPath: directory("elsewhere"))
        try FileManager.default.createSymbolicLink(atPath: directory("cache/\(folder)"), withDestinationPath: directory("elsewhere"))
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("cache")) }
        #expect(error?.code == .unsafePath && error?.path == directory("cache/\(folder)"), "\(String(describing: error))")
        // Replace the link the error names with the folder it points to: the cache opens
        // again, stores and reads.
        let link = try #require(error?.path)
        let folderPointedTo = try FileManager.default.destinationOfSymbolicLink(atPath: link)
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.moveItem(atPath: folderPointedTo, toPath: link)
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "k", data: Data("v".utf8))
        #expect(try cache.get(key: "k")?.data == Data("v".utf8))
    }

    /// Hands the directory to another user, then opens it as root: not root's cache. (Needs
    /// root to give a directory away, as CI runs.)
    @Test(.enabled(if: Requirements.isRoot, "chown needs root"))
    func anotherUsersCacheIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        #expect(chown(directory("cache"), 65534, 65534) == 0)
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("cache")) }
        #expect(error?.code == .permissionDenied && error?.path == directory("cache"), "\(String(describing: error))")
        #expect(chown(directory("cache"), 0, 0) == 0)
        _ = try SharedCache(directory: directory("cache"))
    }

    /// Under a umask that would take every group bit away, a group-shared cache still gives its
    /// group read and write on every file and directory, and keeps the group on directories.
    @Test func aGroupSharedCacheHasGroupModesWhateverTheUmask() throws {
        let directory = try TemporaryDirectory()
        let result = try Worker.run(
            ["put", directory("cache"), "k", "v"],
            environment: ["SHAREDCACHE_TEST_SHARING": "group", "SHAREDCACHE_TEST_UMASK": "077"])
        #expect(result.status == 0, "\(result.errors)")
        let modes = try modesOfTree(directory("cache"))
        #expect(modes.count > 260)  // the root, 259 directories, the files, a blob
        for (path, mode) in modes {
            let isDirectory = mode & UInt32(S_IFMT) == UInt32(S_IFDIR)
            #expect(mode & 0o7777 == (isDirectory ? 0o2770 : 0o660), "\(path) has mode \(String(mode & 0o7777, radix: 8))")
        }
        // The directory now says who shares it: a default configuration opens it as group-shared.
        #expect(try SharedCache(directory: directory("cache")).configuration.sharing == .group)
    }

    @Test func askingToShareAPrivateCacheIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        let error = #expect(throws: SharedCacheError.self) {
            try SharedCache(directory: directory("cache"), configuration: Configuration(sharing: .group))
        }
        #expect(error?.code == .permissionDenied && error?.path == directory("cache"), "\(String(describing: error))")
        #expect(try SharedCache(directory: directory("cache")).configuration.sharing == .owner)
    }

    /// The refusal's way out, run step by step as it names them (sharedcache(5), Sharing): the
    /// clear, then the group's bits. The cache then opens as group-shared, empty of what one
    /// user stored, and works.
    @Test func aPrivateCacheSharedAsTheRefusalSaysOpensForTheGroup() async throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        try SharedCache(directory: path).put(key: "one user's", data: Data("mine".utf8))
        let refusal = #expect(throws: SharedCacheError.self) {
            try SharedCache(directory: path, configuration: Configuration(sharing: .group))
        }
        // The command the refusal names, as it names it.
        let message = try #require(refusal?.message)
        let start = try #require(message.range(of: "sharedcache --dir "), "\(message)")
        let end = try #require(message[start.upperBound...].range(of: " clear"), "\(message)")
        let named = message[start.upperBound..<end.upperBound].split(separator: " ").map(String.init)
        #expect(named == [path, "clear"])
        #expect(try await Tool.admin.run(["--dir"] + named).status == 0)
        for (tool, arguments) in [
            ("/bin/chgrp", ["-R", "\(getgid())", path]), ("/bin/chmod", ["-R", "g+rwX", path]),
            ("/usr/bin/find", [path, "-type", "d", "-exec", "chmod", "g+s", "{}", "+"]),
        ] {
            let step = try ChildProcess.run(URL(fileURLWithPath: tool), arguments: arguments)
            #expect(step.termination == .exited(0), "\(tool) \(arguments): \(step.output)")
        }
        let shared = try SharedCache(directory: path, configuration: Configuration(sharing: .group))
        #expect(shared.configuration.sharing == .group)
        #expect(try shared.get(key: "one user's") == nil)
        try shared.put(key: "the group's", data: Data("ours".utf8))
        #expect(try shared.get(key: "the group's")?.data == Data("ours".utf8))
    }

    /// Three users: root makes a group-shared cache and hands it to a group, as an administrator
    /// would; two members put, read each other's entries, remove and compact; a user outside the
    /// group is refused with a message that names the group. (Runs as root, as CI does.)
    @Test(.enabled(if: Requirements.canRunAsOtherUsers, "needs root and setpriv(1)"))
    func membersOfTheGroupShareACacheAndOthersAreRefused() async throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        let cachePath = directory("cache"), group: UInt32 = 4242
        let cache = try SharedCache(directory: cachePath, configuration: Configuration(sharing: .group))
        try cache.put(key: "from-root", data: Data("root".utf8))
        let chgrp = try ChildProcess.run(URL(fileURLWithPath: "/bin/chgrp"), arguments: ["-R", "\(group)", cachePath])
        #expect(chgrp.termination == .exited(0), "\(chgrp.output)")

        let strictUmask = ["SHAREDCACHE_TEST_UMASK": "077"]
        let put = try await Worker.run(
            ["put", cachePath, "from-member", "hello"], asUser: 65534, groups: [group], environment: strictUmask)
        #expect(put.status == 0, "\(put.errors)")
        let get = try await Worker.run(["get", cachePath, "from-member"], asUser: 65533, groups: [group])
        #expect(get.status == 0 && get.output == "hello", "\(get.errors)")
        let getRoots = try await Worker.run(["get", cachePath, "from-root"], asUser: 65533, groups: [group])
        #expect(getRoots.output == "root", "\(getRoots.errors)")
        let remove = try await Worker.run(
            ["remove", cachePath, "from-root"], asUser: 65533, groups: [group], environment: strictUmask)
        #expect(remove.status == 0, "\(remove.errors)")
        let compact = try await Worker.run(
            ["compact", cachePath], asUser: 65534, groups: [group], environment: strictUmask)
        #expect(compact.status == 0, "\(compact.errors)")

        let outsider = try await Worker.run(["get", cachePath, "from-member"], asUser: 65532)
        #expect(outsider.errorCode == "permissionDenied", "\(outsider.errors)")

        let reopened = try SharedCache(directory: cachePath)
        #expect(try reopened.get(key: "from-member")?.data == Data("hello".utf8))
        #expect(try reopened.get(key: "from-root") == nil)
        let report = try reopened.verify()
        #expect(report.isClean, "\(report.problems)")
        for (path, mode) in try modesOfTree(cachePath) {
            #expect(mode & 0o060 == 0o060, "\(path) has mode \(String(mode & 0o7777, radix: 8)): the group lost access")
        }
    }

    @Test func networkFilesystemsAreRecognised() {
        #expect(FilesystemKind(linuxMagic: 0x6969) == .network("nfs"))
        #expect(FilesystemKind(linuxMagic: 0xFF53_4D42) == .network("cifs"))
        #expect(FilesystemKind(linuxMagic: 0x0102_1997) == .network("9p"))
        #expect(FilesystemKind(linuxMagic: 0xEF53) == .local)  // ext4
        #expect(FilesystemKind(linuxMagic: 0x0102_1994) == .local)  // tmpfs
        #expect(FilesystemKind(darwinTypeName: "smbfs") == .network("smbfs"))
        #expect(FilesystemKind(darwinTypeName: "apfs") == .local)
        #expect(FilesystemKind(darwinTypeName: "someonesfs", isLocal: false) == .network("someonesfs"))
    }

    @Test func aLocalDirectoryKeepsFileEventsAndHasNoWarnings() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try cache.engine.directory.descriptor.filesystemKind() == .local)
        #expect(cache.warnings.isEmpty)
        #expect(cache.configuration.journalWatching == .default)
    }
}

/// Every path under `root` (and `root` itself) with its `st_mode`, not following links.
func modesOfTree(_ root: String) throws -> [(String, UInt32)] {
    var result: [(String, UInt32)] = []
    var pending = [root]
    while let path = pending.popLast() {
        var status = stat()
        guard lstat(path, &status) == 0 else { continue }  // a file a compaction just removed
        result.append((path, UInt32(status.st_mode)))
        if status.st_mode & S_IFMT == S_IFDIR {
            pending += try FileManager.default.contentsOfDirectory(atPath: path).map { "\(path)/\($0)" }
        }
    }
    return result
}

@Suite("Fuzzing the decoders and the argument parser")
struct FuzzTests {
    /// CI's share: 100,000 mutated inputs across every decoder and the parser.
    @Test func oneHundredThousandInputsBreakNothing() async throws {
        let fuzz = Tool(name: "sharedcache-fuzz")
        var random = TestSeed.generator("fuzz")
        let seed = UInt64.random(in: 1...1_000_000, using: &random)
        let result = try await fuzz.run(["--inputs", "100000", "--seed", "\(seed)"])
        #expect(result.status == 0, "--seed \(seed) (\(TestSeed.replay)): \(result.output)\(result.errors)")
        let counters = Worker.counters(String(result.output.split(separator: "\n").last ?? ""))
        #expect(counters["violations"] == 0 && counters["crashes"] == 0, "\(result.output)")
        let summary = result.output.split(separator: "\n").last ?? ""
        let executed = summary.split(separator: " ").first.flatMap { Int($0.dropFirst("inputs=".count)) } ?? 0
        #expect(executed >= 99_990, "\(result.output)")
    }

    @Test func everySeedIsAcceptedAsIs() {
        for target in FuzzTarget.allCases {
            for seed in target.seeds { #expect(target.check(seed) == nil, "\(target)") }
        }
    }
}
