import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

/// `sharedcache fetch` against a real nginx.
@Suite("sharedcache fetch, against nginx", .enabled(if: Origin.isAvailable, "needs nginx (apt-get install nginx-light)"))
struct FetchCommandTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    func fetch(_ arguments: String..., input: String? = nil) throws -> Worker.Result {
        try Tool.admin.run(
            ["fetch"] + arguments, input: input.map { Data($0.utf8) }, environment: ["SHAREDCACHE_DIR": directory("cache")])
    }

    /// `fetch --json`'s `source` and `status`: where the body came from and the HTTP status.
    func served(_ arguments: String...) throws -> (status: Int32, source: String?, http: Int?) {
        let result = try Tool.admin.run(
            ["fetch", "--json"] + arguments, environment: ["SHAREDCACHE_DIR": directory("cache")])
        let object = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        return (result.status, object?["source"] as? String, object?["status"] as? Int)
    }

    @Test func saysWhereTheBodyCameFromAndPrintsJSON() throws {
        try origin.write("/plain/page.txt", "page body\n")
        let url = origin.url("/plain/page.txt").absoluteString
        let first = try fetch(url)
        #expect(first.status == 0 && first.output == "page body\n")
        // Without --json it names the source (as --json spells it) on one line of its own.
        #expect(first.errors.hasSuffix("\n") && first.errors.dropLast().split(separator: "\n").count == 1)
        #expect(first.errors.contains("downloaded"), "\(first.errors)")
        let second = try fetch(url)
        #expect(second.output == "page body\n" && second.errors.contains("revalidated"), "\(second.errors)")

        let json = try fetch(url, "--json", "-o", directory("copy.txt"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect(object["source"] as? String == "revalidated" && object["status"] as? Int == 200)
        #expect(object["bytes"] as? Int == 10 && object["url"] as? String == url)
        // RFC 9211: what the cache did, as the Cache-Status member it added. Its ttl is the
        // freshness lifetime (max-age=0 under /plain/) less the age, in whole seconds: 0, or
        // less on a run slow enough for a second to pass after the 304's birth.
        let status = try #require(object["cacheStatus"] as? String)
        let prefix = "SharedCache; fwd=stale; fwd-status=304; ttl="
        #expect(status.hasPrefix(prefix), "\(status)")
        #expect(Int(status.dropFirst(prefix.count)).map { $0 <= 0 } == true, "\(status)")
        let headers = try #require(object["headers"] as? [[String]])
        #expect(headers.contains { $0[0].lowercased() == "etag" })
        #expect(try String(contentsOfFile: directory("copy.txt"), encoding: .utf8) == "page body\n")

        let forced = try served(url, "--force-refresh")
        #expect(forced.status == 0 && forced.source == "downloaded" && forced.http == 200)
        let offline = try served(url, "--offline")
        #expect(offline.status == 0 && offline.source == "offline")
        let logged = origin.requests(atLeast: 4)
        #expect(logged.map(\.status) == [200, 304, 304, 200])
        #expect(!logged[3].hasValidators)
    }

    @Test func headersMethodAndBodyAsCurlTakesThem() throws {
        try origin.write("/vary/en.txt", "hello")
        try origin.write("/vary/fr.txt", "bonjour")
        let page = origin.url("/vary/page").absoluteString
        #expect(try fetch(page, "-H", "Accept-Language: fr").output == "bonjour")
        #expect(try fetch(page, "--header=Accept-Language: en").output == "hello")
        #expect(try served(page, "-H", "Accept-Language: fr").source == "fresh")
        #expect(origin.requests(atLeast: 2).map(\.acceptLanguage) == ["fr", "en"])

        try origin.write("/things/item.txt", "item")
        let item = origin.url("/things/item.txt").absoluteString
        _ = try fetch(item)
        try Data("posted".utf8).write(to: URL(fileURLWithPath: directory("body.txt")))
        let posted = try served(item, "--data-binary", "@\(directory("body.txt"))")
        #expect(posted.status == 0 && posted.source == "downloaded" && posted.http == 201)
        #expect(origin.requests(atLeast: 4).last?.method == "POST")
        // The POST invalidated the stored GET.
        #expect(try fetch(item, "--offline").status == 1)
        #expect(try fetch(item, "-X", "DELETE").status == 0)
        #expect(origin.requests(atLeast: 5).last?.method == "DELETE")
    }

    @Test func badUsageAndMissesHaveTheirExitStatuses() throws {
        #expect(try fetch("not a url").status == 64)
        #expect(try fetch("ftp://example.com/x").status == 64)
        #expect(try fetch(origin.url("/x").absoluteString, "-H", "no colon").status == 64)
        #expect(try fetch(origin.url("/x").absoluteString, "--data-binary", "@/nonexistent").status == 66)
        // Each says which URL (not how: the wording is the tool's to change).
        let missing = try fetch(origin.url("/plain/none").absoluteString, "--offline")
        #expect(missing.status == 1 && missing.errors.contains(origin.url("/plain/none").absoluteString))
        let refused = try fetch("http://127.0.0.1:1/nothing-listens")
        #expect(refused.status == 69 && refused.errors.contains("http://127.0.0.1:1/nothing-listens"))
    }

    /// On a terminal (a pty from script(1)), a large body shows a progress line that is erased.
    @Test func aProgressLineOnATerminal() async throws {
        try origin.write("/slow/large.bin", Data(count: 1_500_000))
        let command = [Tool.admin.executable.path, "--dir", directory("cache"), "fetch", "-o", directory("large.bin"),
            origin.url("/slow/large.bin").absoluteString].joined(separator: " ")
        let (termination, text) = try await offThePool {
            try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/script"), arguments: ["-qec", command, "/dev/null"])
        }
        #expect(termination == .exited(0), "\(text)")
        #expect(text.contains("\rreceived ") && text.contains(" of 1.5 MB ("), "\(text.debugDescription)")
        #expect(text.contains("downloaded, 200, 1.5 MB"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("large.bin"))).count == 1_500_000)
    }
}
