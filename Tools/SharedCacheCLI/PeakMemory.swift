#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// With `SHAREDCACHE_REPORT_PEAK_MEMORY` set, prints `TOOL: peak-resident-kilobytes=N` on
/// stderr as the process exits, for the tests that hold `put` and `get` of large bodies to a
/// memory budget. Call first thing in `main`.
package func reportPeakMemoryAtExitIfAsked() {
    guard getenv("SHAREDCACHE_REPORT_PEAK_MEMORY") != nil else { return }
    atexit {
        guard let kilobytes = peakResidentKilobytes() else { return }
        let name = CommandLine.unsafeArgv[0].map { String(cString: $0) }?.split(separator: "/").last ?? "tool"
        let line = Array("\(name): peak-resident-kilobytes=\(kilobytes)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

/// The process's peak resident set. On Linux this is `VmHWM` from /proc/self/status:
/// getrusage's `ru_maxrss` survives execve, so a child of a large parent would report the
/// parent's peak.
package func peakResidentKilobytes() -> Int? {
    #if os(Linux)
    guard let file = fopen("/proc/self/status", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("VmHWM:") else { continue }
        return Int(text.dropFirst(6).filter(\.isNumber))
    }
    return nil
    #else
    var usage = rusage()
    guard getrusage(RUSAGE_SELF, &usage) == 0 else { return nil }
    return Int(usage.ru_maxrss / 1024)  // bytes on Darwin
    #endif
}
