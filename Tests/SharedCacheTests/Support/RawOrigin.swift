import Foundation
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An origin that sends bytes nginx never would: the Nth connection gets the Nth response
/// given, byte for byte, and the last one every connection after (a python3 process on
/// loopback). For responses a broken or hostile server sends; one that ends in `X-Endless: `
/// sends field lines without end.
final class RawOrigin {
    static var isAvailable: Bool { Requirements.isInstalled("/usr/bin/python3") }

    private let server: ChildProcess
    private let responsesFile: String
    let port: Int

    init(_ responses: [String]) throws {
        // In a file: one response may be larger than an argument can be (128 KiB).
        responsesFile = NSTemporaryDirectory() + "sharedcache-raw-origin-\(UUID().uuidString)"
        try responses.map { Data($0.utf8).base64EncodedString() }.joined(separator: "\n")
            .write(toFile: responsesFile, atomically: false, encoding: .utf8)
        let script = """
            import base64, socket, sys
            responses = [base64.b64decode(line) for line in open(sys.argv[1]).read().split("\\n")]
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            print(listener.getsockname()[1], flush=True)
            served = 0
            while True:
                connection, _ = listener.accept()
                request = b""
                while b"\\r\\n\\r\\n" not in request:
                    piece = connection.recv(65536)
                    if not piece:
                        break
                    request += piece
                response = responses[min(served, len(responses) - 1)]
                sent = 0
                try:
                    connection.sendall(response)
                    sent = len(response)
                    # A response ending in an unfinished field line goes on with field lines
                    # until the client hangs up (or 128 MiB, a client that never would).
                    while response.endswith(b"X-Endless: ") and sent < 128 << 20:
                        connection.sendall(b"more" * 1000 + b"\\r\\nX-Endless: ")
                        sent += 4014
                except OSError:
                    pass
                served += 1
                print(sent, flush=True)
                connection.close()
            """
        server = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/python3"),
            arguments: ["-c", script, responsesFile])
        guard let line = server.nextLine(within: .seconds(30)), let port = Int(line) else {
            server.signal(SIGKILL)
            throw CocoaError(.fileReadUnknown)
        }
        self.port = port
    }

    deinit {
        server.signal(SIGKILL)
        _ = server.wait()
        try? FileManager.default.removeItem(atPath: responsesFile)
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// How many bytes the next connection served was sent before it ended.
    func bytesSent() -> Int? { server.nextLine(within: .seconds(60)).flatMap { Int($0) } }
}
