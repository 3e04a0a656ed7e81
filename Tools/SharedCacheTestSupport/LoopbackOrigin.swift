import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// nginx on loopback, serving files a tool writes, as the origin for the benchmark's and the
/// stress run's fetches. One process in the foreground (`master_process off`); killed when the
/// value goes. `nil` when nginx is not installed.
package final class LoopbackOrigin {
    package static let executable = "/usr/sbin/nginx"
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    package let url: String
    private let process: ChildProcess

    /// - Parameters:
    ///   - http: directives for nginx's `http` block (logging, maps, types).
    ///   - locations: extra nginx `location` blocks.
    ///   - populate: writes the files to serve into the document root it is given.
    package init?(
        root: String, http: String = "access_log off;", locations: String = "", populate: (String) throws -> Void
    ) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else { return nil }
        let www = "\(root)/www"
        for folder in [www, "\(root)/temp"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        try populate(www)
        // nginx workers may run unprivileged: everything they serve must be readable to all.
        _ = chmod(root, 0o755)
        if let enumerator = FileManager.default.enumerator(atPath: root) {
            for case let path as String in enumerator { _ = chmod("\(root)/\(path)", 0o755) }
        }
        for _ in 0..<5 {
            let port = Int.random(in: 20_000..<60_000)
            let configuration = """
                daemon off; master_process off; pid \(root)/nginx.pid; error_log \(root)/error.log;
                events { worker_connections 256; }
                http {
                    \(http)
                    client_body_temp_path \(root)/temp/body; proxy_temp_path \(root)/temp/proxy;
                    fastcgi_temp_path \(root)/temp/fastcgi; uwsgi_temp_path \(root)/temp/uwsgi;
                    scgi_temp_path \(root)/temp/scgi;
                    keepalive_requests 1000000;
                    server { listen 127.0.0.1:\(port); root \(www); \(locations) }
                }
                """
            let file = try BodyOutput(path: "\(root)/nginx.conf")
            try Array(configuration.utf8).withUnsafeBytes { bytes in try file.write(bytes, at: 0) }
            try file.publish()
            try? FileManager.default.removeItem(atPath: "\(root)/nginx.pid")
            let process = try ChildProcess(
                URL(fileURLWithPath: Self.executable),
                arguments: ["-p", root, "-c", "\(root)/nginx.conf", "-e", "\(root)/error.log"],
                output: .discard, errors: .discard)
            // The pid file appears once the socket is listening; an exit means the port was taken.
            // (The bound is for an nginx that never gets there: a loaded machine can take seconds.)
            let deadline = Date().addingTimeInterval(120)
            while process.isRunning && !FileManager.default.fileExists(atPath: "\(root)/nginx.pid") && Date() < deadline {
                usleep(10_000)
            }
            if process.isRunning {
                self.url = "http://127.0.0.1:\(port)"
                self.process = process
                return
            }
        }
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "nginx did not start; see \(root)/error.log"])
    }

    deinit {
        process.signal(SIGKILL)
        process.wait()
    }
}
