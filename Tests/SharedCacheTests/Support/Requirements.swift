import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a test needs of the machine, for `.enabled(if:)`: a test that cannot run here shows as
/// skipped, never as passed.
enum Requirements {
    static let isRoot = geteuid() == 0
    /// Root, and setpriv(1) to run a worker as another user.
    static let canRunAsOtherUsers = isRoot && isInstalled("/usr/bin/setpriv")
    /// Linux's view of a process's open descriptors.
    static let hasProcFileDescriptors = FileManager.default.fileExists(atPath: "/proc/self/fd")

    /// Whether the tests run under the thread or address sanitizer (`Tools/tests/run` sets
    /// their options), whose shadow memory and slowdown make memory and timing figures not the
    /// program's own.
    static let underSanitizer = ["TSAN_OPTIONS", "ASAN_OPTIONS"].contains {
        ProcessInfo.processInfo.environment[$0] != nil
    }

    static func isInstalled(_ path: String) -> Bool { FileManager.default.isExecutableFile(atPath: path) }
}

extension Worker.Result {
    /// The code of the ``SharedCacheError`` a worker failed with: it prints
    /// "sharedcache-test-worker: CODE: what happened" and exits 2.
    var errorCode: String? {
        guard status == 2, let line = errors.split(separator: "\n").last,
            line.hasPrefix("sharedcache-test-worker: ")
        else { return nil }
        return line.dropFirst("sharedcache-test-worker: ".count).split(separator: ":").first.map(String.init)
    }
}
