import Foundation
import SharedCacheCLI
import Testing

/// Every Swift snippet in README.md and in the DocC articles that uses only SharedCache and
/// Foundation compiles against the library as built.
///
/// Each ```swift block becomes the body of a function of its own in one file, after a prelude
/// that declares the names snippets use without defining (`url`, `body`, `use(_:)`, …; a
/// snippet's own declarations shadow them), and the file is type-checked by `swiftc` against the
/// built modules. Blocks whose first line is `// Third-party: …` (Kingfisher, Alamofire, Nuke)
/// or `// Package.swift` (manifest fragments) are skipped.
@Suite("Documentation: snippets compile")
struct DocumentationSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let swiftc = ["/opt/swift/usr/bin/swiftc", "/usr/bin/swiftc"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    struct Snippet {
        var file: String
        var line: Int
        var code: String
    }

    static let prelude = """
        import Foundation
        #if canImport(FoundationNetworking)
        import FoundationNetworking
        #endif
        import SharedCache

        let cache = try! SharedCache(directory: "/tmp/snippets")
        let url = URL(string: "https://example.com/")!
        let request = URLRequest(url: url)
        let key = "https://example.com/"
        let body = Data()
        let etag: String? = nil
        let lastModified: String? = nil
        let myTransport: any HTTPTransport = URLSessionTransport()
        nonisolated(unsafe) var etags: [KeyHash: String] = [:]
        func use(_ values: Any?...) {}
        func forget(_ hashes: [KeyHash]) {}

        """

    /// The Swift blocks of a Markdown file, with the line each starts on.
    static func snippets(in path: String) throws -> [Snippet] {
        let lines = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            .components(separatedBy: "\n")
        var result: [Snippet] = []
        var index = 0
        while index < lines.count {
            guard lines[index].trimmingCharacters(in: .whitespaces) == "```swift" else {
                index += 1
                continue
            }
            let start = index + 1
            var end = start
            while end < lines.count && lines[end].trimmingCharacters(in: .whitespaces) != "```" { end += 1 }
            result.append(Snippet(file: path, line: start + 1, code: lines[start..<end].joined(separator: "\n")))
            index = end + 1
        }
        return result
    }

    static var documents: [String] {
        let catalog = "Sources/SharedCache/SharedCache.docc"
        let articles = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(catalog).path))
            ?? []
        return ["README.md"] + articles.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
    }

    @Test(.enabled(if: swiftc != nil, "needs swiftc"))
    func everySnippetUsingOnlySharedCacheAndFoundationCompiles() async throws {
        let all = try Self.documents.flatMap(Self.snippets)
        let compiled = all.filter { snippet in
            let first = snippet.code.split(separator: "\n").first.map(String.init) ?? ""
            return !first.hasPrefix("// Third-party") && !first.hasPrefix("// Package.swift")
        }
        #expect(compiled.count >= 15, "found only \(compiled.count) snippets")
        #expect(all.count > compiled.count, "no third-party or manifest snippet was recognised")

        var source = Self.prelude
        for (number, snippet) in compiled.enumerated() {
            source += "\n// \(snippet.file):\(snippet.line)\nfunc snippet\(number)() async throws {\n"
            source += "#sourceLocation(file: \"\(snippet.file)\", line: \(snippet.line))\n"
            // Imports are the prelude's; a line of its own keeps the line numbers.
            let body = snippet.code.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.hasPrefix("import ") ? "" : $0 }.joined(separator: "\n")
            source += body + "\n#sourceLocation()\n}\n"
        }
        let directory = try TemporaryDirectory()
        let file = directory("Snippets.swift")
        try source.write(toFile: file, atomically: true, encoding: .utf8)

        let products = Worker.executable.deletingLastPathComponent()
        let (termination, output) = try await offThePool {
            try ChildProcess.run(
                URL(fileURLWithPath: Self.swiftc!),
                arguments: [
                    "-typecheck", "-swift-version", "6", "-I", products.appendingPathComponent("Modules").path,
                    "-Xcc",
                    "-fmodule-map-file="
                        + products.appendingPathComponent("CSharedCacheSupport.build/module.modulemap").path,
                    file,
                ])
        }
        let problems = output.split(separator: "\n").filter { $0.contains("error:") }
        #expect(termination == .exited(0) && problems.isEmpty, "\(problems.joined(separator: "\n"))\n\(output)")
    }

    @Test func theReadmeShowsBothFormsOfTheDependency() throws {
        let manifests = try Self.snippets(in: "README.md").filter { $0.code.hasPrefix("// Package.swift") }
        #expect(manifests.contains { $0.code.contains(".package(url:") })
        #expect(manifests.contains { $0.code.contains(".package(path:") })
    }
}
