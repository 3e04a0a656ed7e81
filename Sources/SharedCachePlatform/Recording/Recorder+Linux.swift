#if DEBUG && os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Recorder {
    /// The path an open descriptor refers to, as `/proc/self/fd` links it ("… (deleted)" once
    /// unlinked). The C function is `readlink`.
    static func path(of descriptor: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
        guard count > 0 else { return "?" }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
#endif
