package import Foundation

/// How a tool talks: results on stdout, diagnostics on stderr as `tool: what happened; what to do`.
package struct Terminal: Sendable {
    package let tool: String

    package init(tool: String) {
        self.tool = tool
    }

    package func print(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    package func write(_ data: Data) {
        FileHandle.standardOutput.write(data)
    }

    /// A diagnostic on stderr, prefixed with the tool's name.
    package func warn(_ message: String) {
        FileHandle.standardError.write(Data("\(tool): \(message)\n".utf8))
    }

    /// Reports `message` and exits with `status`.
    package func fail(_ message: String, _ status: ExitStatus) -> Never {
        warn(message)
        exit(status.rawValue)
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
