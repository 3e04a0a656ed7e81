import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one client did, as it reports at the end.
struct ClientSummary: Codable {
    var client: Int
    var stored = 0
    var hits = 0
    var misses = 0
    var removed = 0
    /// Every removal it was told of, its own included.
    var heard = 0
    /// Of those, removals made by another process.
    var heardFromOthers = 0
}

/// One client process: subscribe, then store, read and remove at random for a while, printing
/// each step as a tab-separated line for the parent to show.
struct DemoClient {
    let directory: String
    let id: Int
    let seconds: Double
    /// How many clients the demo runs: the ones whose items this one reads.
    let clients: Int

    /// The fewest puts a client makes, past its time if need be.
    static let minimumPuts = 20

    func run() throws -> ExitStatus {
        let cache = try SharedCache(directory: directory, configuration: Configuration(recencyInterval: .seconds(1)))
        let out = FileHandle.standardOutput
        let summary = Locked(ClientSummary(client: id))
        let names = Locked([KeyHash: String]())
        let ended = DispatchSemaphore(value: 0)
        let me = getpid()
        let subscription = cache.onRemovals { batch in
            for removal in batch {
                if removal.key == endKey { ended.signal(); continue }
                let fromOther = removal.remover?.processID != UInt32(me)
                summary.withLock {
                    $0.heard += 1
                    if fromOther { $0.heardFromOthers += 1 }
                }
                guard fromOther else { continue }
                let name = removal.key ?? names.withLock { $0[removal.hash] } ?? "an entry it never saw"
                out.write(Data("heard\t\(name)\t\(removal.reason)\t\(removal.remover?.processID ?? 0)\n".utf8))
            }
        }
        out.write(Data("ready\n".utf8))
        _ = readLine()  // "go": every client has subscribed, so every removal reaches all of them

        var random = SystemRandomNumberGenerator()
        var mine: [Int] = []
        let deadline = Date().addingTimeInterval(seconds)
        var item = 0
        var puts = 0
        // However slow the machine, enough puts that the clients together outgrow the limit.
        while Date() < deadline || puts < Self.minimumPuts {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                item += 1
                let key = itemKey(client: id, item: item)
                let size = Int.random(in: 6_000...24_000, using: &random)
                try cache.put(key: key, data: Data(repeating: UInt8(id), count: size))
                names.withLock { $0[KeyHash(key: key)] = key }
                mine.append(item)
                puts += 1
                summary.withLock { $0.stored += 1 }
                out.write(Data("stored\t\(key)\t\(size)\n".utf8))
            case 4..<9:
                let other = Int.random(in: 1...clients, using: &random)
                let key = itemKey(client: other, item: Int.random(in: max(1, item - 12)...max(1, item), using: &random))
                names.withLock { $0[KeyHash(key: key)] = key }
                if let hit = try cache.get(key: key) {
                    summary.withLock { $0.hits += 1 }
                    out.write(Data("hit\t\(key)\t\(hit.data.count)\n".utf8))
                } else {
                    summary.withLock { $0.misses += 1 }
                    out.write(Data("miss\t\(key)\n".utf8))
                }
            default:
                guard let victim = mine.randomElement(using: &random) else { continue }
                mine.removeAll { $0 == victim }
                let key = itemKey(client: id, item: victim)
                if try cache.remove(key: key) {
                    summary.withLock { $0.removed += 1 }
                    out.write(Data("removed\t\(key)\n".utf8))
                }
            }
            Thread.sleep(forTimeInterval: Double.random(in: 0.02...0.08, using: &random))
        }
        out.write(Data("done\n".utf8))
        // Keep listening until the parent's end marker: removals by others may still be coming.
        ended.wait()
        subscription.cancel()
        let encoded = try JSONEncoder().encode(summary.withLock { $0 })
        out.write(Data("summary\t".utf8) + encoded + Data("\n".utf8))
        return .success
    }
}
