package import Foundation
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a tool talks: results on stdout, diagnostics on stderr as `tool: what happened; what to do`.
package struct Terminal: Sendable {
    package let tool: String

    package init(tool: String) {
        self.tool = tool
    }

    package func print(_ text: String) {
        write(Data((text + "\n").utf8))
    }

    /// Writes to standard output. A failure (a full disk, `/dev/full`), where `FileHandle.write`
    /// would trap, is reported once; later writes are skipped, and ``exit(_:)`` exits 74. (Not
    /// an exit here: the tool finishes what it does with the cache, and leaves no allocations
    /// behind on the stack for a leak checker to report.)
    package func write(_ data: Data) {
        guard !outputFailed.withLock({ $0 }) else { return }
        guard let error = writeFully(STDOUT_FILENO, data) else { return }
        outputFailed.withLock { $0 = true }
        warn("writing standard output failed: \(String(cString: strerror(error)))")
    }

    /// Exits with `status`, or with 74 if standard output could not be written.
    package func exit(_ status: ExitStatus) -> Never {
        Foundation.exit(outputFailed.withLock { $0 } ? ExitStatus.ioError.rawValue : status.rawValue)
    }

    /// A diagnostic on stderr, prefixed with the tool's name. A stderr that cannot be written
    /// loses the diagnostic, not the process.
    package func warn(_ message: String) {
        _ = writeFully(STDERR_FILENO, Data("\(tool): \(message)\n".utf8))
    }

    /// Reports `message` and exits with `status`.
    package func fail(_ message: String, _ status: ExitStatus) -> Never {
        warn(message)
        Foundation.exit(status.rawValue)
    }

    /// Reports a usage error with a pointer to the help, and exits 64.
    package func usage(_ error: UsageError, help: String) -> Never {
        fail("\(error.message); see '\(help)'", .usage)
    }

    /// Whether stderr is a terminal (progress lines are drawn only then).
    package var stderrIsTerminal: Bool { isatty(2) == 1 }

    /// One JSON value per line, keys sorted, as scripts expect.
    package func printJSON(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value) else { fail("could not encode JSON output", .software) }
        write(data + Data("\n".utf8))
    }
}

/// Whether a write to standard output failed (see ``Terminal/write(_:)``).
private let outputFailed = Locked(false)

/// Writes all of `data` to `descriptor`; the `errno` of a failure. Not through the platform
/// layer's `System.write`: its failpoints count the cache's own writes (a test fails "the first
/// write(2)"), and the terminal is not the cache.
private func writeFully(_ descriptor: Int32, _ data: Data) -> Int32? {
    data.withUnsafeBytes { buffer -> Int32? in
        guard var next = buffer.baseAddress else { return nil }
        var remaining = buffer.count
        while remaining > 0 {
            #if canImport(Glibc)
            let written = Glibc.write(descriptor, next, remaining)
            #else
            let written = Darwin.write(descriptor, next, remaining)
            #endif
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            next += written
            remaining -= written
        }
        return nil
    }
}

/// Opens `/dev/null` on each of standard input, output and error that the process was started
/// without (`sharedcache get KEY >&-`). Otherwise the first files the cache opens would get
/// those numbers, and a body, a listing or a diagnostic written to "standard output" or
/// "standard error" would land in the cache's own lock file or journal segment. Call first
/// thing in `main`, before anything opens a file.
package func reserveStandardDescriptors() {
    for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
        let opened = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
        guard opened >= 0 else { _exit(ExitStatus.unavailable.rawValue) }
        if opened != descriptor {
            dup2(opened, descriptor)
            close(opened)
        }
    }
}

extension String {
    /// The text on one line, as line-oriented output needs it: a backslash, a control character
    /// or DEL written as in C (`\\`, `\n`, `\t`, `\r`, `\xNN`); everything else as it is. Keys may
    /// hold any of them (`--json` gives them exactly).
    package var escapingControlCharacters: String {
        guard utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\\") }) else { return self }
        var escaped = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\t": escaped += "\\t"
            case "\r": escaped += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let digits = String(scalar.value, radix: 16)
                escaped += "\\x" + (digits.count < 2 ? "0" : "") + digits
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
