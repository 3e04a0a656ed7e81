import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What every role of the stress run shares: the keys, the origin's bodies, the history log.

func monotonic() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("sharedcache-stress: \(message)\n".utf8))
    exit(2)
}

let keys = (0..<48).map { "https://stress.example/key/\($0)" }
let originFiles = 16

/// The origin's bytes for file `n`: what every fetch of it must return.
func originBody(_ number: Int) -> Data {
    Data(String(repeating: "origin file \(number) ", count: 40 + number * 30).utf8)
}

/// One line per event, written with one write(2) each so a killed process leaves whole lines.
final class History: @unchecked Sendable {
    private let descriptor: Int32

    init(_ path: String) {
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if descriptor < 0 { fail("cannot write \(path)") }
    }

    func log(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}
