import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// fetch: an HTTP request through the cache, with curl's way of naming headers, method and body.

extension Command {
    static let fetch = Command(
        name: "fetch",
        synopsis: "URL [-o FILE] [-H 'Name: value']... [-X METHOD] [--data-binary @FILE] [--force-refresh] [--offline]",
        summary: """
            Request URL through the cache: no request while the stored response is fresh, a
            conditional GET when it needs revalidating, a plain request otherwise (RFC 9111, as a
            private cache; as a shared one in a directory a group shares, or set so with config
            http-audience shared). The body goes to standard output or FILE; standard error says
            whether it was fresh, revalidated, downloaded, offline or stale. With --json,
            standard output gets that, the status, the RFC 9211 Cache-Status and the headers as
            served instead, and the body goes only to -o FILE.
            """,
        options: [
            (.value("-o", "--output"), "write the body to FILE instead of standard output"),
            (.repeated("-H", "--header"), "send this request header, as 'Name: value' (repeatable)"),
            (.value("-X", "--request"), "the method (default GET; POST when a body is given)"),
            (.value("--data-binary"), "the request body: @FILE, @- for standard input, or the text itself"),
            (.flag("--force-refresh"), "send an unconditional request, whatever is stored (still stores)"),
            (.flag("--offline"), "never use the network; exit 1 if nothing is stored"),
        ]
    ) { invocation in
        let target = try invocation.positional(1...1, "URL")[0]
        guard let url = URL(string: target), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { throw UsageError("\(target) is not an http:// or https:// URL") }
        // Refused before the request, not after its answer came.
        guard invocation.arguments.value("-o") != "" else { throw UsageError("-o needs the name of a file to write") }
        let request = try fetchRequest(url, invocation.arguments, invocation.terminal)
        let options = FetchOptions(
            forceRefresh: invocation.arguments.has("--force-refresh"),
            onlyFromCache: invocation.arguments.has("--offline"))
        let cache = try invocation.cache()
        let terminal = invocation.terminal
        let transport: any HTTPTransport =
            terminal.stderrIsTerminal ? ProgressTransport(progress: ProgressLine(terminal: terminal)) : URLSessionTransport()
        let result = try runBlocking {
            let result = try await cache.fetch(request, options: options, transport: transport)
            // A stale-while-revalidate answer left a revalidation running: let it finish.
            await cache.waitForBackgroundRevalidations()
            return result
        }

        if let output = invocation.arguments.value("-o") {
            do {
                try result.data.write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                terminal.fail("cannot write \(output): \(error.localizedDescription)", .cannotCreate)
            }
        } else if !invocation.json {
            terminal.write(result.data)
        }
        if invocation.json {
            terminal.printJSON(FetchJSON(result))
        } else {
            terminal.warn("\(result.source), \(result.status), \(formatBytes(UInt64(result.data.count)))")
        }
        return .success
    }

    /// The request the command line describes, curl-style.
    private static func fetchRequest(_ url: URL, _ arguments: Arguments, _ terminal: Terminal) throws -> URLRequest {
        var request = URLRequest(url: url)
        for header in arguments.values("-H") {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw UsageError("-H \(header) is not a header; write it as 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            request.addValue(value, forHTTPHeaderField: name)
        }
        if let data = arguments.value("--data-binary") {
            if data == "@-" {
                request.httpBody = FileHandle.standardInput.readDataToEndOfFile()
            } else if data.hasPrefix("@") {
                let path = String(data.dropFirst())
                guard let body = FileManager.default.contents(atPath: path) else {
                    terminal.fail("cannot read \(path); check that it exists and is readable", .noInput)
                }
                request.httpBody = body
            } else {
                request.httpBody = Data(data.utf8)
            }
            request.httpMethod = "POST"
        }
        if let method = arguments.value("-X") { request.httpMethod = method.uppercased() }
        return request
    }
}

/// `fetch --json`: what was served and from where.
struct FetchJSON: Encodable {
    var url: String
    var source: String
    var status: Int
    var bytes: Int
    /// What the cache did, as its RFC 9211 `Cache-Status` member (`SharedCache; hit; ttl=N`, …).
    var cacheStatus: String?
    /// Header fields in order, as served: `[name, value]` pairs (a name may repeat).
    var headers: [[String]]

    init(_ result: FetchResult) {
        url = result.url.absoluteString
        source = result.source.rawValue
        status = result.status
        bytes = result.data.count
        cacheStatus = result.cacheStatus
        headers = result.headers.map { [$0.name, $0.value] }
    }
}
