import Foundation
import SharedCache
import SharedCacheCLI

// SharedCache next to python-diskcache on the same work, the peer's side: its driver, run to
// completion (the 8-process run, in MixedWorkload.swift) or kept running as a server of single
// operations (``OperationServer/diskcache(python:directory:size:)``).

/// The peer driver next to this benchmark's sources, found from the working directory.
let peerScript = "Tools/bench/diskcache_peer.py"

func runPeer(_ python: String, _ arguments: [String]) throws -> String {
    let peer = try ChildProcess(URL(fileURLWithPath: python), arguments: [peerScript] + arguments, input: .inherit)
    let output = peer.output?.remainingText() ?? ""
    guard peer.wait() == .exited(0) else { fatalError("\(python) \(peerScript) \(arguments) failed") }
    return output
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
