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
/// sends field lines without end, and one that ends in a mode (``endlessBody``, …) goes on as
/// the mode says.
final class RawOrigin: Sendable {
    /// After what comes before it, 64 KiB pieces of body without end.
    static let endlessBody = "{endless-body}"
    /// After what comes before it, chunks of 64 KiB without end (chunked transfer coding).
    static let endlessChunks = "{endless-chunks}"
    /// After what comes before it, `100 Continue` heads without end.
    static let endlessInterimHeads = "{endless-interim}"
    /// After what comes before it, one byte every 50 ms for 15 s, then `\r\n\r\n` and the
    /// close: a head or a body that trickles in, and ends if the client waits long enough.
    static let trickle = "{trickle}"
    /// After what comes before it, the line `held` on the origin's output, and nothing more
    /// until the client hangs up (or 10 minutes).
    static let hold = "{hold}"

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
            import base64, socket, sys, time
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
                mode = b""
                for name in (b"{endless-body}", b"{endless-chunks}", b"{endless-interim}", b"{trickle}", b"{hold}"):
                    if response.endswith(name):
                        response, mode = response[:-len(name)], name
                sent = 0
                try:
                    connection.sendall(response)
                    sent = len(response)
                    # A response ending in an unfinished field line goes on with field lines
                    # until the client hangs up (or 128 MiB, a client that never would); so do
                    # endless bodies.
                    while response.endswith(b"X-Endless: ") and sent < 128 << 20:
                        connection.sendall(b"more" * 1000 + b"\\r\\nX-Endless: ")
                        sent += 4014
                    while mode == b"{endless-body}" and sent < 128 << 20:
                        connection.sendall(b"x" * 65536)
                        sent += 65536
                    while mode == b"{endless-chunks}" and sent < 128 << 20:
                        connection.sendall(b"10000\\r\\n" + b"x" * 65536 + b"\\r\\n")
                        sent += 65545
                    while mode == b"{endless-interim}" and sent < 128 << 20:
                        connection.sendall(b"HTTP/1.1 100 Continue\\r\\n\\r\\n" * 1000)
                        sent += 25000
                    if mode == b"{trickle}":
                        end = time.monotonic() + 15
                        while time.monotonic() < end:
                            connection.sendall(b"t")
                            sent += 1
                            time.sleep(0.05)
                        connection.sendall(b"\\r\\n\\r\\n")
                        sent += 4
                    if mode == b"{hold}":
                        print("held", flush=True)
                        connection.settimeout(600)
                        while connection.recv(65536):
                            pass
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

    /// How long a wait for the server bounds only a hang: in a run of every suite under the
    /// thread sanitizer, a fetch started in a task got its first request out after more than
    /// two minutes (waiting for the cooperative pool), where alone it takes a tenth of a second.
    static let hangBound: Duration = .seconds(600)

    /// How many bytes the next connection served was sent before it ended.
    func bytesSent() -> Int? { server.nextLine(within: Self.hangBound).flatMap { Int($0) } }

    /// Waits until the connection served a response in ``hold`` mode has been sent it all;
    /// returns whether it was (``hangBound``).
    func held() -> Bool { server.nextLine(within: Self.hangBound) == "held" }
}
