import Foundation
import Testing

@Suite("Man pages")
struct ManPageTests {
    static let manDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("man")

    static var pages: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: manDirectory.path)) ?? [])
            .filter { $0.range(of: #"\.[1-8]$"#, options: .regularExpression) != nil }.sorted()
    }

    @Test func theFormatPageExists() {
        #expect(Self.pages.contains("sharedcache.5"))
    }

    /// mandoc's linter where it is installed (.ci/run installs it), groff's warnings otherwise.
    @Test(arguments: pages)
    func lintsClean(page: String) throws {
        let path = Self.manDirectory.appendingPathComponent(page).path
        let mandoc = FileManager.default.isExecutableFile(atPath: "/usr/bin/mandoc")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: mandoc ? "/usr/bin/mandoc" : "/usr/bin/groff")
        process.arguments = mandoc ? ["-T", "lint", "-W", "warning", path] : ["-mdoc", "-ww", "-z", path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(text.isEmpty, "\(text)")
        #expect(process.terminationStatus == 0)
    }
}
