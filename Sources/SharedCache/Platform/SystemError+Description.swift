#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension SystemError: CustomStringConvertible {
    /// `pread: Illegal seek`, for a person: messages interpolate this, never the fields.
    var description: String {
        "\(call): \(String(cString: strerror(errno)))" + (path.map { " on \($0)" } ?? "")
    }
}
