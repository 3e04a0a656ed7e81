import Foundation

/// A real nginx on loopback, serving files a test writes and logging what each request carried
/// (`If-None-Match`, `If-Modified-Since`, `Accept-Language`) and its status.
///
/// Runs as one process in the foreground (`master_process off`), stopped when the value goes.
/// Locations: `/fresh/` adds `expires 60s`; `/nostore/` adds `Cache-Control: no-store`;
/// `/vary/page` serves `/vary/<language>.txt` by `Accept-Language` with `Vary` and 60 s of
/// freshness; `/slow/` sends at 1 MB/s, `/stall/` at 100 KB/s; `/things/` answers POST with 201.
final class Origin {
    struct LoggedRequest: Equatable, CustomStringConvertible {
        var method: String
        var path: String
        var status: Int
        var ifNoneMatch: String?
        var ifModifiedSince: String?
        var acceptLanguage: String?

        var hasValidators: Bool { ifNoneMatch != nil || ifModifiedSince != nil }
        var description: String {
            "\(method) \(path) \(status) inm=\(ifNoneMatch ?? "-") ims=\(ifModifiedSince ?? "-")"
        }
    }

    let directory: TemporaryDirectory
    let port: Int
    private let process: Process

    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable) }
    static let executable = "/usr/sbin/nginx"

    init() throws {
        directory = try TemporaryDirectory()
        // nginx workers may run as an unprivileged user: every folder above the files is readable.
        for path in [directory.path, (directory.path as NSString).deletingLastPathComponent] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        for folder in ["www/fresh", "www/nostore", "www/vary", "www/slow", "www/stall", "www/things", "www/plain", "temp"] {
            try FileManager.default.createDirectory(
                atPath: directory(folder), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        var attempt = 0
        while true {
            attempt += 1
            let port = Int.random(in: 20_000..<60_000)
            try Self.configuration(directory: directory.path, port: port)
                .write(toFile: directory("nginx.conf"), atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.executable)
            process.arguments = ["-p", directory.path, "-c", directory("nginx.conf"), "-e", directory("error.log")]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The pid file appears once the listening socket is open; an exit means the port was taken.
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && !FileManager.default.fileExists(atPath: directory("nginx.pid"))
                && Date() < deadline
            {
                Thread.sleep(forTimeInterval: 0.01)
            }
            if process.isRunning && FileManager.default.fileExists(atPath: directory("nginx.pid")) {
                self.port = port
                self.process = process
                return
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            guard attempt < 5 else {
                let log = (try? String(contentsOfFile: directory("error.log"), encoding: .utf8)) ?? ""
                throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "nginx did not start: \(log)"])
            }
        }
    }

    deinit {
        // SIGKILL: test runners start children with SIGTERM blocked, and nginx inherits that.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    private static func configuration(directory: String, port: Int) -> String {
        """
        daemon off;
        master_process off;
        pid \(directory)/nginx.pid;
        events { worker_connections 256; }
        http {
            log_format probe escape=none '$request_method|$uri|$status|$http_if_none_match|$http_if_modified_since|$http_accept_language';
            access_log \(directory)/access.log probe;
            client_body_temp_path \(directory)/temp/body;
            proxy_temp_path \(directory)/temp/proxy;
            fastcgi_temp_path \(directory)/temp/fastcgi;
            uwsgi_temp_path \(directory)/temp/uwsgi;
            scgi_temp_path \(directory)/temp/scgi;
            default_type text/plain;
            map $http_accept_language $language { default en; ~^fr fr; }
            server {
                listen 127.0.0.1:\(port);
                root \(directory)/www;
                location /fresh/ { expires 60s; }
                location /nostore/ { add_header Cache-Control no-store; }
                location = /vary/page {
                    add_header Vary Accept-Language;
                    expires 60s;
                    try_files /vary/$language.txt =404;
                }
                location /slow/ { limit_rate 1m; }
                location /stall/ { limit_rate 100k; }
                location /things/ {
                    if ($request_method = POST) { return 201; }
                }
            }
        }
        """
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

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
            guard fields.count == 6, let status = Int(fields[2]) else { return nil }
            func value(_ field: String) -> String? { field == "-" || field.isEmpty ? nil : field }
            return LoggedRequest(
                method: fields[0], path: fields[1], status: status, ifNoneMatch: value(fields[3]),
                ifModifiedSince: value(fields[4]), acceptLanguage: value(fields[5]))
        }
    }

    /// The requests logged so far, once at least `count` are there (nginx logs a request just
    /// after it answers it, so the client can be a moment ahead).
    func requests(atLeast count: Int, timeout: TimeInterval = 5) -> [LoggedRequest] {
        let deadline = Date().addingTimeInterval(timeout)
        var logged = requests
        while logged.count < count && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
            logged = requests
        }
        return logged
    }
}
