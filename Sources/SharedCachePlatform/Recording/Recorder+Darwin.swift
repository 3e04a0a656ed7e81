#if DEBUG && canImport(Darwin)
import Darwin

extension Recorder {
    /// The path an open descriptor refers to. The C function is `fcntl` with `F_GETPATH`.
    static func path(of descriptor: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(MAXPATHLEN) + 1)
        guard fcntl(descriptor, F_GETPATH, &buffer) != -1 else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
#endif
