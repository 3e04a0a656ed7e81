import Foundation
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Hostile directories: exposed roots, other users', links, network filesystems")
struct HostileDirectoryTests {
    @Test func aNewCacheIsPrivateToItsOwner() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
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

    @Test func aRootEveryUserMayWriteIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        chmod(directory("cache"), 0o777)
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("cache")) }
        #expect(error?.code == .unsafePath && error?.message.contains("chmod o-w") == true)
        chmod(directory("cache"), 0o700)
        _ = try SharedCache(directory: directory("cache"))
    }

    @Test func aRootThatIsASymbolicLinkIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("real"))
        try FileManager.default.createSymbolicLink(atPath: directory("link"), withDestinationPath: directory("real"))
        let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("link")) }
        #expect(error?.code == .unsafePath && error?.message.contains("symbolic link") == true)
    }

    @Test func anotherUsersCacheIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        if geteuid() == 0 {
            // Hand the directory to another user, then open it as root: not root's cache.
            chown(directory("cache"), 65534, 65534)
            let error = #expect(throws: SharedCacheError.self) { try SharedCache(directory: directory("cache")) }
            #expect(error?.code == .permissionDenied && error?.message.contains("belongs to user 65534") == true)
            chown(directory("cache"), 0, 0)
        }
        _ = try SharedCache(directory: directory("cache"))
    }

    @Test func networkFilesystemsAreRecognised() {
        #expect(FilesystemKind(linuxMagic: 0x6969) == .network("nfs"))
        #expect(FilesystemKind(linuxMagic: 0xFF53_4D42) == .network("cifs"))
        #expect(FilesystemKind(linuxMagic: 0x0102_1997) == .network("9p"))
        #expect(FilesystemKind(linuxMagic: 0xEF53) == .local)  // ext4
        #expect(FilesystemKind(linuxMagic: 0x0102_1994) == .local)  // tmpfs
        #expect(FilesystemKind(darwinTypeName: "smbfs") == .network("smbfs"))
        #expect(FilesystemKind(darwinTypeName: "apfs") == .local)
    }

    @Test func aLocalDirectoryKeepsFileEventsAndHasNoWarnings() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try System.filesystemKind(cache.directory.descriptor.rawValue) == .local)
        #expect(cache.warnings.isEmpty)
        #expect(cache.configuration.journalWatching == .default)
    }
}

@Suite("Fuzzing the decoders and the argument parser")
struct FuzzTests {
    /// CI's share: 100,000 mutated inputs across every decoder and the parser.
    @Test func oneHundredThousandInputsBreakNothing() throws {
        let fuzz = Tool(name: "sharedcache-fuzz")
        let result = try fuzz.run(["--inputs", "100000", "--seed", "\(UInt64.random(in: 1...1_000_000))"])
        #expect(result.status == 0, "\(result.output)\(result.errors)")
        #expect(result.output.contains("violations=0 crashes=0"), "\(result.output)")
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
