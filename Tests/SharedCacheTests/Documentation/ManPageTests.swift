import Foundation
import SharedCacheCLI
import Testing

@Suite("Man pages")
struct ManPageTests {
    static let manDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("man")

    /// The pages there are: every one of them is linted, and none may go missing.
    static let expectedPages = ["sharedcache.1", "sharedcache.5", "sharedcached.8"]

    static var pages: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: manDirectory.path)) ?? [])
            .filter { $0.range(of: #"\.[1-8]$"#, options: .regularExpression) != nil }.sorted()
    }

    /// A missing `man/` or page fails here, instead of leaving the lint below with fewer cases,
    /// and a new page must be added to ``expectedPages`` to be linted.
    @Test func theManDirectoryHoldsExactlyThePages() {
        #expect(Self.pages == Self.expectedPages, "in \(Self.manDirectory.path)")
    }

    static let mandoc = "/usr/bin/mandoc", groff = "/usr/bin/groff"

    /// mandoc's linter where it is installed (.ci/run installs it), groff's warnings otherwise.
    /// The cases are the expected pages, not whatever is found: a missing page fails its case.
    @Test(
        .enabled(if: Requirements.isInstalled(mandoc) || Requirements.isInstalled(groff), "needs mandoc or groff"),
        arguments: expectedPages)
    func lintsClean(page: String) async throws {
        let path = Self.manDirectory.appendingPathComponent(page).path
        #expect(FileManager.default.fileExists(atPath: path), "\(path) is missing")
        let mandoc = Requirements.isInstalled(Self.mandoc)
        let (termination, text) = try await offThePool {
            try ChildProcess.run(
                URL(fileURLWithPath: mandoc ? Self.mandoc : Self.groff),
                arguments: mandoc ? ["-T", "lint", "-W", "warning", path] : ["-mdoc", "-ww", "-z", path])
        }
        #expect(text.isEmpty, "\(text)")
        #expect(termination == .exited(0))
    }
}
