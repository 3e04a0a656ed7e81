import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheTestSupport
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

    @Test func everyOptionOfEveryAdminCommandIsInTheManPage() async throws {
        let page = try Self.page("sharedcache.1")
        // Every command the overview lists.
        let commands = try await Tool.admin.run(["--help"]).output.split(separator: "\n")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.contains("fetch") && commands.contains("demo") && commands.count >= 13)
        for command in commands where command != "help" {
            let help = try await Tool.admin.run(["help", command]).output
            #expect(page.contains("Cm \(command)"), "\(command)")
            for option in Self.options(inHelp: help) {
                #expect(page.contains(Self.mdoc(option)), "sharedcache \(command) \(option) is not in sharedcache(1)")
            }
        }
    }

    @Test func everyOptionOfTheDaemonIsInItsManPage() async throws {
        let page = try Self.page("sharedcached.8")
        let options = Self.options(inHelp: try await Tool.daemon.run(["--help"]).output)
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

    /// Examples that run until stopped, each with the start of the first line it prints once it
    /// is up (on standard output or standard error). Such an example passes when that line comes
    /// within 10 s and a SIGTERM then ends it with status 0 within 5 s. Every other example must
    /// finish by itself with status 0: one that does not is a failure, never stopped and passed.
    static let runUntilStopped = [
        "sharedcached --dir /var/cache/app -d --interval 1m": "sharedcached: compacting ",
    ]

    /// Runs each example in order with the built tools first on PATH and the cache directory
    /// pointed at a fresh one (`path`, where given, replaced by it).
    ///
    /// `http://localhost:8080/` in an example is a real nginx serving `index.html`.
    func runExamples(
        of pageName: String, replacing path: String? = nil, preparing prepare: (String) throws -> Void = { _ in }
    ) async throws {
        let directory = try TemporaryDirectory()
        try prepare(directory("cache"))
        let examples = Self.examples(try Self.page(pageName))
        #expect(!examples.isEmpty)
        let origin = try examples.contains { $0.contains("http://localhost:8080/") } ? Origin() : nil
        try origin?.write("/index.html", "<p>hello</p>")
        let bin = Tool.admin.executable.deletingLastPathComponent().path
        for example in examples {
            var command = path.map { example.replacingOccurrences(of: $0, with: directory("cache")) } ?? example
            if let origin {
                command = command.replacingOccurrences(of: "http://localhost:8080/", with: origin.url("/").absoluteString)
            }
            // A lone command replaces the shell, so a SIGTERM reaches the tool itself.
            if !command.contains("|") { command = "exec " + command }
            command = "cd '\(directory.path)' && " + command
            let shell = try ChildProcess(
                URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", command],
                environment: [
                    "PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                    "SHAREDCACHE_DIR": directory("cache"),
                ], errors: .standardOutput)
            defer { if shell.isRunning { shell.signal(SIGKILL) } }
            if let readyLine = Self.runUntilStopped[example] {
                let first = await shell.nextLine(within: .seconds(120))
                #expect(first?.hasPrefix(readyLine) == true, "\(pageName): \(command) printed \(first ?? "nothing") first")
                shell.signal(SIGTERM)
                #expect(
                    try await eventually(within: .seconds(60)) { !shell.isRunning },
                    "\(pageName): \(command) ignored SIGTERM")
            } else {
                // Bounds on a hang only: under the sanitizers, with every suite running, a 3-second
                // demo has taken a minute.
                let bound: Duration = example.contains("demo") ? .seconds(300) : .seconds(120)
                #expect(
                    try await eventually(within: bound) { !shell.isRunning },
                    "\(pageName): \(command) did not finish within \(bound): a hang is a failure")
            }
            guard !shell.isRunning else { continue }
            let printed = (await shell.output?.rest(within: .seconds(1)) ?? []).joined(separator: "\n")
            #expect(await shell.wait() == .exited(0), "\(pageName) example failed: \(command)\n\(printed)")
        }
    }

    @Test(.enabled(if: Requirements.isInstalled(LoopbackOrigin.executable), "the fetch examples need nginx"))
    func theAdminToolExamplesRun() async throws {
        try await runExamples(of: "sharedcache.1")
    }

    @Test func theDaemonExamplesRun() async throws {
        try await runExamples(of: "sharedcached.8", replacing: "/var/cache/app")
    }

    /// `cat` the format file and `xxd` the first journal segment of a cache with an entry.
    @Test(.enabled(if: Requirements.isInstalled("/usr/bin/xxd"), "the examples use xxd"))
    func theFormatExamplesRun() async throws {
        try await runExamples(of: "sharedcache.5", replacing: "/var/cache/app") { cache in
            try SharedCache(directory: cache).put(key: "k", data: Data("v".utf8))
        }
    }
}
