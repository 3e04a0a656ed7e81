import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Man pages match the tools")
struct ManPageContentTests {
    static func page(_ name: String) throws -> String {
        try String(contentsOf: ManPageTests.manDirectory.appendingPathComponent(name), encoding: .utf8)
    }

    /// The options a tool's help lists, like "--dir" or "-o".
    static func options(inHelp help: String) -> Set<String> {
        var found = Set<String>()
        for line in help.split(separator: "\n") where line.hasPrefix("  -") {
            for token in line.split(separator: " ") where token.hasPrefix("-") {
                found.insert(String(token.trimmingCharacters(in: CharacterSet(charactersIn: ","))))
            }
        }
        return found
    }

    /// How mdoc writes an option: `--dir` is `Fl -dir`, `-o` is `Fl o`.
    static func mdoc(_ option: String) -> String { "Fl \(option.dropFirst())" }

    @Test func everyOptionOfEveryAdminCommandIsInTheManPage() throws {
        let page = try Self.page("sharedcache.1")
        // Every command the overview lists.
        let commands = try Tool.admin.run(["--help"]).output.split(separator: "\n")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.contains("fetch") && commands.contains("demo") && commands.count >= 13)
        for command in commands where command != "help" {
            let help = try Tool.admin.run(["help", command]).output
            #expect(page.contains("Cm \(command)"), "\(command)")
            for option in Self.options(inHelp: help) {
                #expect(page.contains(Self.mdoc(option)), "sharedcache \(command) \(option) is not in sharedcache(1)")
            }
        }
    }

    @Test func everyOptionOfTheDaemonIsInItsManPage() throws {
        let page = try Self.page("sharedcached.8")
        let options = Self.options(inHelp: try Tool.daemon.run(["--help"]).output)
        #expect(options.count >= 7)
        for option in options { #expect(page.contains(Self.mdoc(option)), "\(option) is not in sharedcached(8)") }
    }

    /// The `.Dl $ command` lines of a page's EXAMPLES, with mdoc escapes undone.
    static func examples(_ page: String) -> [String] {
        guard let section = page.components(separatedBy: ".Sh EXAMPLES").last?.components(separatedBy: ".Sh ").first
        else { return [] }
        return section.split(separator: "\n").filter { $0.hasPrefix(".Dl $ ") }.map {
            String($0.dropFirst(".Dl $ ".count)).replacingOccurrences(of: "\\(dq", with: "\"")
        }
    }

    /// Runs each example in order with the built tools first on PATH and the cache directory
    /// pointed at a fresh one; a command still running after 3 s is stopped with SIGTERM, which
    /// must also end it with status 0.
    ///
    /// `http://localhost:8080/` in an example is a real nginx serving `index.html`.
    func runExamples(of pageName: String, replacing path: String? = nil) throws {
        let directory = try TemporaryDirectory()
        let origin = try Origin()
        try origin.write("/index.html", "<p>hello</p>")
        let examples = Self.examples(try Self.page(pageName))
        #expect(!examples.isEmpty)
        let bin = Tool.admin.executable.deletingLastPathComponent().path
        for example in examples {
            var command = path.map { example.replacingOccurrences(of: $0, with: directory("cache")) } ?? example
            command = command.replacingOccurrences(of: "http://localhost:8080/", with: origin.url("/").absoluteString)
            // A lone command replaces the shell, so a SIGTERM reaches the tool itself.
            if !command.contains("|") { command = "exec " + command }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command]
            process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
            var environment = ProcessInfo.processInfo.environment
            environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
            environment["SHAREDCACHE_DIR"] = directory("cache")
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(example.contains("demo") ? 50 : 3)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(pageName) example failed: \(command)")
        }
    }

    @Test func theAdminToolExamplesRun() throws {
        try runExamples(of: "sharedcache.1")
    }

    @Test func theDaemonExamplesRun() throws {
        try runExamples(of: "sharedcached.8", replacing: "/var/cache/app")
    }
}
