import Foundation
import SharedCache
import SharedCacheCLI

// SharedCache next to python-diskcache on the same work, the peer's side: its driver, run to
// completion or kept running as a server of single operations. The 8-process run is in
// MixedWorkload.swift.

/// The peer driver next to this benchmark's sources, found from the working directory.
let peerScript = "Tools/bench/diskcache_peer.py"

func runPeer(_ python: String, _ arguments: [String]) throws -> String {
    let peer = try ChildProcess(URL(fileURLWithPath: python), arguments: [peerScript] + arguments, input: .inherit)
    let output = peer.output?.remainingText() ?? ""
    guard peer.wait() == .exited(0) else { fatalError("\(python) \(peerScript) \(arguments) failed") }
    return output
}

/// diskcache in a process of its own, doing one operation per request, so its operations
/// interleave with SharedCache's and the floor's (see ``measureInterleaved``).
final class PeerServer {
    private let peer: ChildProcess

    init(python: String, directory: String, size: Int) throws {
        peer = try ChildProcess(
            URL(fileURLWithPath: python), arguments: [peerScript, "serve", directory, "\(size)"], input: .pipe)
    }

    /// Has diskcache do `operation` on key `index`; the nanoseconds it took there.
    func time(_ operation: String, _ index: Int) throws -> UInt64 {
        peer.send("\(operation) \(index)")
        guard let line = peer.nextLine(), let nanoseconds = UInt64(line) else {
            fatalError("the diskcache peer stopped")
        }
        return nanoseconds
    }

    deinit {
        peer.finish()
    }
}

/// Gets over the same keys as the get rows, with the default configuration: the memory tier
/// (16 MB) in front of the disk.
func defaultGets(cacheDirectory: String, keys: Int, reads: Int) throws -> Measurement {
    let cache = try SharedCache(directory: cacheDirectory)
    let names = (0..<keys).map(keyName)
    var samples = [UInt64](repeating: 0, count: reads)
    for index in 0..<reads {
        let name = names[Int.random(in: 0..<keys)]
        let before = now()
        guard try cache.get(key: name) != nil else { fatalError("benchmark key missing") }
        samples[index] = now() - before
    }
    return summarize("SharedCache get, default configuration", samples)
}
