#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's arguments after its name, exactly as the kernel passed them.
///
/// `CommandLine.arguments` repairs invalid UTF-8 to U+FFFD, which would make `put $'\xff'` and
/// `get $'\xfe'` reach the same key. Keys are bytes the user chose, so an argument that is not
/// UTF-8 is refused rather than changed.
///
/// - Throws: ``UsageError`` naming the first argument that is not valid UTF-8.
package func commandLineArguments() throws(UsageError) -> [String] {
    var arguments: [String] = []
    for index in 1..<Int(CommandLine.argc) {
        guard let raw = CommandLine.unsafeArgv[index] else { break }
        guard let argument = String(validatingCString: raw) else {
            let bytes = UnsafeRawBufferPointer(start: raw, count: strlen(raw))
            let shown = bytes.map { $0 < 0x80 && $0 >= 0x20 ? String(UnicodeScalar($0)) : "\\x" + hex($0) }.joined()
            throw UsageError(
                "argument \(index) ('\(shown)') is not valid UTF-8, and keys and paths are taken as UTF-8 text; "
                    + "convert it from the encoding it is in (e.g. Latin-1: `iconv -f LATIN1 -t UTF-8`) or "
                    + "percent-encode the bytes")
        }
        arguments.append(argument)
    }
    return arguments
}

private func hex(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16)
    return digits.count == 1 ? "0" + digits : digits
}
