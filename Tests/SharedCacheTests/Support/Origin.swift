import Foundation
import SharedCacheTestSupport

/// A real nginx on loopback, serving files a test writes and logging what each request carried
/// (`If-None-Match`, `If-Modified-Since`, `Accept-Language`, `Cookie`), its status, and when (`$msec`).
///
/// Started through ``LoopbackOrigin`` (as the benchmark's and the stress run's origins are),
/// with a log format of its own. Locations: `/plain/` adds `Cache-Control: max-age=0` (stale at
/// once, revalidated on every use; no heuristic freshness); `/refreshed/` is stale at once too,
/// but answers a conditional request with an hour of freshness; `/heuristic/` adds nothing (its
/// Last-Modified gives heuristic freshness); `/fresh/` adds `expires 1h` (long, so that a slow
/// machine cannot outlast it); `/nostore/` adds `Cache-Control: no-store`;
/// `/vary/page` serves `/vary/<language>.txt` by `Accept-Language` with `Vary` and an hour of
/// freshness; `/slow/` sends at 1 MB/s, `/stall/` at 100 KB/s, `/rated/` at 10 MB/s (a fast
/// network, not loopback's several GB/s) with an hour of freshness;
/// `/updated/` is stale at once and answers any `If-None-Match` with a 304 that adds a field; `/things/` answers POST with 201.
/// `/h/NAME/` send the headers the conformance tests need (see ``ruleLocations``), and
/// `/status/NAME` fixed statuses with fixed headers.
final class Origin {
    struct LoggedRequest: Equatable, CustomStringConvertible {
        var method: String
        var path: String
        var status: Int
        var ifNoneMatch: String?
        var ifModifiedSince: String?
        var acceptLanguage: String?
        var cookie: String?
        /// When nginx logged it, just after answering: seconds since the epoch, to the millisecond.
        var time: Double

        var hasValidators: Bool { ifNoneMatch != nil || ifModifiedSince != nil }
        var description: String {
            "\(method) \(path) \(status) inm=\(ifNoneMatch ?? "-") ims=\(ifModifiedSince ?? "-")"
        }
    }

    let directory: TemporaryDirectory
    private let server: LoopbackOrigin

    /// Whether nginx is installed: suites that need it are `.enabled(if: Origin.isAvailable)`,
    /// so they show as skipped rather than fail or pass without it.
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: LoopbackOrigin.executable) }

    init() throws {
        directory = try TemporaryDirectory()
        // nginx workers may run as an unprivileged user: every folder above the files is readable.
        for path in [directory.path, (directory.path as NSString).deletingLastPathComponent] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        let logs = directory("access.log")
        let http = """
            log_format probe escape=none '$request_method|$uri|$status|$http_if_none_match|$http_if_modified_since|$http_accept_language|$msec|$http_cookie';
            access_log \(logs) probe;
            default_type text/plain;
            map $http_accept_language $language { default en; ~^fr fr; }
            map $http_if_none_match $refreshed { "" max-age=0; default max-age=3600; }
            """
        let locations = """
            location /plain/ { add_header Cache-Control max-age=0; }
            location /refreshed/ { add_header Cache-Control $refreshed; }
            location /fresh/ { expires 1h; }
            location /nostore/ { add_header Cache-Control no-store; }
            location = /vary/page { add_header Vary Accept-Language; expires 1h; try_files /vary/$language.txt =404; }
            location /slow/ { limit_rate 1m; }
            location /stall/ { limit_rate 100k; send_timeout 10s; }
            location /updated/ {
                add_header Cache-Control max-age=0;
                if ($http_if_none_match) { add_header Cache-Control max-age=0; add_header X-Revalidated yes; return 304; }
            }
            location /rated/ { sendfile off; output_buffers 1 256k; limit_rate 10m; expires 1h; }
            location /things/ { if ($request_method = POST) { return 201; } }
            \(Self.ruleLocations)
            """
        guard
            let server = try LoopbackOrigin(root: directory.path, http: http, locations: locations, populate: { www in
                for folder in ["fresh", "nostore", "vary", "slow", "stall", "rated", "updated", "things", "plain", "refreshed", "heuristic", "h"] + Self.ruleFolders {
                    try FileManager.default.createDirectory(atPath: "\(www)/\(folder)", withIntermediateDirectories: true)
                }
            })
        else {
            throw CocoaError(
                .fileNoSuchFile,
                userInfo: [NSLocalizedDescriptionKey: "\(LoopbackOrigin.executable) is missing: apt-get install nginx-light"])
        }
        self.server = server
    }

    /// Locations for the RFC rules' tests, each a folder under `/h/` with static files the test
    /// writes, plus `/status/…` answered by nginx itself.
    static let ruleLocations = """
        location /h/gmt/ { add_header Expires "Thu, 01 Jan 2099 00:00:00 GMT"; }
        location /h/utc/ { add_header Expires "Thu, 01 Jan 2099 00:00:00 UTC"; }
        location /h/nocomma/ { add_header Expires "Thu 01 Jan 2099 00:00:00 GMT"; }
        location /h/dashes/ { add_header Expires "Thu, 01-Jan-2099 00:00:00 GMT"; }
        location /h/onedigit/ { add_header Expires "Thu, 01 Jan 2099 0:00:00 GMT"; }
        location /h/spaces/ { add_header Expires "Thu,  01 Jan 2099 00:00:00 GMT"; }
        location /h/rfc850past/ { add_header Expires "Thursday, 01-Jan-99 00:00:00 GMT"; }
        location /h/rfc850future/ { add_header Expires "Saturday, 01-Jan-60 00:00:00 GMT"; }
        location /h/asctime/ { add_header Expires "Thu Jan  1 00:00:00 2099"; }
        location /h/agelist/ { add_header Cache-Control max-age=3600; add_header Age "7200, 10"; }
        location /h/ageinvalid/ { add_header Cache-Control max-age=3600; add_header Age "-7200"; }
        location /h/hop/ {
            expires 1h; add_header Connection "X-Hop"; add_header X-Hop nominated; add_header Keep-Alive "timeout=5";
            add_header X-Kept kept;
        }
        location /h/nocachefield/ { add_header Cache-Control 'max-age=3600, no-cache="X-Secret"'; add_header X-Secret s; }
        location /h/setcookie/ {
            expires 1h; add_header Set-Cookie "a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/"; add_header Set-Cookie "b=2";
        }
        location /h/private/ { add_header Cache-Control 'private, max-age=3600'; }
        location /h/privatefield/ { add_header Cache-Control 'private="X-Mine", max-age=3600'; add_header X-Mine m; }
        location /h/smaxage/ { add_header Cache-Control 'max-age=0, s-maxage=3600'; }
        location /h/coding/ { add_header Content-Encoding x-unknown; expires 1h; }
        location /h/swr/ { add_header Cache-Control 'max-age=0, stale-while-revalidate=3600'; }
        location /h/sie/ {
            if (-f $document_root/h/down) { add_header Cache-Control max-age=0 always; return 503 "down"; }
            add_header Cache-Control 'max-age=0, stale-if-error=3600';
        }
        location /h/mustrevalidate/ {
            if (-f $document_root/h/down) { return 503 "down"; }
            add_header Cache-Control 'max-age=0, must-revalidate, stale-if-error=3600';
        }
        location /h/immutable/ { add_header Cache-Control 'max-age=3600, immutable'; }
        location /h/weak/ { etag off; add_header ETag 'W/"weak"'; expires 1h; }
        location /h/noetag/ { etag off; expires 1h; }
        location /h/head/ {
            add_header Cache-Control max-age=0;
            if ($request_method = HEAD) { add_header Cache-Control max-age=3600; add_header X-From-Head yes; }
        }
        location = /h/newtag {
            if ($http_if_none_match = '"v1"') {
                add_header ETag '"v1"'; add_header Last-Modified "Thu, 01 Jan 2015 00:00:00 GMT";
                add_header Cache-Control max-age=0; add_header X-Updated yes; return 304;
            }
            add_header ETag '"v1"'; add_header Cache-Control max-age=0; return 200 "tagged body";
        }
        location = /h/othertag {
            if ($http_if_none_match = '"v1"') { add_header ETag '"v9"'; return 304; }
            add_header ETag '"v1"'; add_header Cache-Control max-age=0; return 200 "tagged body";
        }
        location /h/proxyauth/ {
            expires 1h; add_header X-Kept kept; add_header Proxy-Authenticate 'Basic realm="proxy"';
            add_header Proxy-Authentication-Info 'nextnonce="n"'; add_header Proxy-Authorization 'Basic cHJveHk=';
        }
        location /h/gmtcase/ { add_header Expires "THU, 01 JAN 2099 00:00:00 gmt"; }
        location = /h/redirect { return 302 /h/redirected/r.txt; }
        location /h/redirected/ { expires 1h; }
        location = /h/aged304 {
            if ($http_if_none_match = '"a1"') {
                add_header ETag '"a1"'; add_header Age 7; add_header Cache-Control max-age=0; return 304;
            }
            add_header ETag '"a1"'; add_header Cache-Control max-age=0; return 200 "aged body";
        }
        location = /h/caller304 {
            if ($http_if_none_match = '"c1"') {
                add_header ETag '"c1"'; add_header Cache-Control max-age=3600; return 304;
            }
            add_header ETag '"c1"'; add_header Cache-Control max-age=0; return 200 "caller body";
        }
        location = /h/expires304 {
            if ($http_if_none_match = '"x1"') {
                add_header ETag '"x1"'; add_header Expires "Fri, 02 Jan 2015 00:00:00 GMT"; return 304;
            }
            add_header ETag '"x1"'; add_header Expires "Thu, 01 Jan 2015 00:00:00 GMT"; return 200 "expires body";
        }
        location = /status/500-maxage { add_header Cache-Control max-age=3600 always; return 500 "server error"; }
        location = /status/503-expires { add_header Expires "Thu, 01 Jan 2099 00:00:00 GMT" always; return 503 "busy"; }
        location = /status/500-plain { add_header Last-Modified "Thu, 01 Jan 2015 00:00:00 GMT" always; return 500 "e"; }
        location = /status/500-public { add_header Cache-Control public always; add_header Last-Modified "Thu, 01 Jan 2015 00:00:00 GMT" always; return 500 "p"; }
        location = /status/404-nostore { add_header Cache-Control 'max-age=3600, no-store' always; return 404 "gone"; }
        location = /status/301-maxage { add_header Cache-Control max-age=3600; return 301 /h/redirected/r.txt; }
        location = /status/308-lastmodified {
            add_header Last-Modified "Thu, 01 Jan 2015 00:00:00 GMT"; return 308 /h/redirected/r.txt;
        }
        location = /status/302-lastmodified {
            add_header Last-Modified "Thu, 01 Jan 2015 00:00:00 GMT"; return 302 /h/redirected/r.txt;
        }
        location = /status/302-maxage { add_header Cache-Control max-age=3600; return 302 /h/redirected/r.txt; }
        location = /status/307-maxage { add_header Cache-Control max-age=3600; return 307 /h/redirected/r.txt; }
        """

    static let ruleFolders = [
        "gmt", "utc", "nocomma", "dashes", "onedigit", "spaces", "rfc850past", "rfc850future", "asctime", "agelist",
        "ageinvalid", "hop", "nocachefield", "private", "privatefield", "smaxage", "coding", "swr", "sie",
        "mustrevalidate", "immutable", "head", "weak", "noetag", "proxyauth", "gmtcase", "redirected", "setcookie",
    ].map { "h/\($0)" }

    func url(_ path: String) -> URL { URL(string: server.url + path)! }

    /// Writes a file under the document root, world-readable, with the given modification time.
    func write(_ path: String, _ contents: Data, modified: Date = Date(timeIntervalSinceNow: -3600)) throws {
        let file = directory("www\(path)")
        try contents.write(to: URL(fileURLWithPath: file))
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644, .modificationDate: modified], ofItemAtPath: file)
    }

    func write(_ path: String, _ text: String, modified: Date = Date(timeIntervalSinceNow: -3600)) throws {
        try write(path, Data(text.utf8), modified: modified)
    }

    /// Every request logged so far.
    var requests: [LoggedRequest] {
        let text = (try? String(contentsOfFile: directory("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 8, let status = Int(fields[2]), let time = Double(fields[6]) else { return nil }
            func value(_ field: String) -> String? { field == "-" || field.isEmpty ? nil : field }
            return LoggedRequest(
                method: fields[0], path: fields[1], status: status, ifNoneMatch: value(fields[3]),
                ifModifiedSince: value(fields[4]), acceptLanguage: value(fields[5]), cookie: value(fields[7]),
                time: time)
        }
    }

    /// The requests for `path` logged so far, once at least `count` are there (or after `timeout`,
    /// which bounds only a failure: a loaded run can keep nginx from logging for seconds).
    func requests(to path: String, atLeast count: Int, timeout: TimeInterval = 60) -> [LoggedRequest] {
        let deadline = Date().addingTimeInterval(timeout)
        var logged = requests.filter { $0.path == path }
        while logged.count < count && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
            logged = requests.filter { $0.path == path }
        }
        return logged
    }

    /// The requests logged so far, once at least `count` are there (nginx logs a request just
    /// after it answers it, so the client can be a moment ahead).
    func requests(atLeast count: Int, timeout: TimeInterval = 60) -> [LoggedRequest] {
        let deadline = Date().addingTimeInterval(timeout)
        var logged = requests
        while logged.count < count && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
            logged = requests
        }
        return logged
    }
}
