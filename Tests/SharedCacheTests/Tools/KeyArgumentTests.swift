import Foundation
import SharedCacheCLI
import Testing

/// Keys typed on the command line are bytes: two different byte strings must never reach one
/// entry. Foundation's `Process` takes arguments as `String`, so a shell puts the raw bytes in.
@Suite("sharedcache, arguments that are not UTF-8")
struct KeyArgumentTests {
    let directory: TemporaryDirectory
    var cache: String { directory("cache") }

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// Runs `sharedcache` through sh(1) with `script`'s `printf` escapes expanded into raw bytes.
    func shell(_ script: String, input: String? = nil) async throws -> Worker.Result {
        let shell = try ChildProcess(
            URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script, Tool.admin.executable.path],
            environment: ["SHAREDCACHE_DIR": cache], input: .bytes(Data((input ?? "").utf8)), errors: .captured)
        return await Worker.Result(finishing: shell)
    }

    @Test func keysThatAreNotUTF8AreRefusedNotMerged() async throws {
        let putFF = try await shell(#"exec "$0" put "$(printf 'k\377')""#, input: "first")
        #expect(putFF.status == 64)
        #expect(putFF.errors.hasPrefix("sharedcache: ") && putFF.errors.split(separator: "\n").count == 1)
        let getFE = try await shell(#"exec "$0" get "$(printf 'k\376')""#)
        #expect(getFE.status == 64)
        #expect(getFE.output.isEmpty)
        // Nothing was stored under the repaired key U+FFFD either.
        let list = try await Tool.admin.run(["ls", "--json"], environment: ["SHAREDCACHE_DIR": cache])
        #expect(list.status == 0 && list.output.isEmpty)
        // Converted as the error says (from Latin-1, where 0xFF is ÿ), the key is stored.
        let convert = try Advice(putFF.errors).enclosed(by: "`")
        #expect(try await shell(#"exec "$0" put "$(printf 'k\377' | "# + convert + ")\"", input: "first").status == 0)
        let converted = try await Tool.admin.run(["get", "k\u{ff}"], environment: ["SHAREDCACHE_DIR": cache])
        #expect(converted.status == 0 && converted.output == "first")
        // A UTF-8 key beyond ASCII is a key like any other.
        #expect(try await shell(#"exec "$0" put "$(printf 'k\303\251')""#, input: "é").status == 0)
        let get = try await Tool.admin.run(["get", "k\u{e9}"], environment: ["SHAREDCACHE_DIR": cache])
        #expect(get.status == 0 && get.output == "é")
    }

    @Test func theCompactorRefusesArgumentsThatAreNotUTF8() async throws {
        let result = try await shell(#"exec "${0%/*}/sharedcached" --once --dir "$SHAREDCACHE_DIR$(printf '\377')""#)
        #expect(result.status == 64)
    }
}
