import Dispatch
import Foundation
import SharedCache
import SharedCacheTestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The processes a run starts: clients doing cache work and subscribers hearing removals.

/// `--role client CACHE HISTORY WRITER END_AT SEED ORIGIN|-`
func runClient(_ arguments: [String]) async throws {
    let (cacheDirectory, history, writer) = (arguments[0], arguments[1], Int(arguments[2])!)
    let endAt = UInt64(arguments[3])!
    var random = SplitMix64(seed: UInt64(arguments[4])!)
    let origin = arguments[5] == "-" ? nil : arguments[5]
    let cache = try SharedCache(directory: cacheDirectory, configuration: Configuration(lockTimeout: .seconds(30)))
    let log = History("\(history)/client-\(writer).log")
    var version = 0
    while monotonic() < endAt {
        let key = keys[Int.random(in: 0..<keys.count, using: &random)]
        let choice = Int.random(in: 0..<100, using: &random)
        if choice < 30 {
            version += 1
            let size = [100, 3000, 40_000].randomElement(using: &random)!
            log.log("P \(key) \(writer) \(version)")  // before the put: a get may see it at once
            try cache.put(key: key, data: VerifiableBody.make(key: key, writer: writer, version: version, size: size))
        } else if choice < 80 {
            if let hit = try cache.get(key: key) {
                if let made = VerifiableBody.origin(of: hit.data, key: key) {
                    log.log("G \(key) \(made.writer) \(made.version)")
                } else {
                    log.log("X wrong bytes for \(key): \(hit.data.count) bytes")
                }
            }
        } else if choice < 90 {
            if try cache.remove(key: key) { log.log("R \(KeyHash(key: key).hex)") }
        } else if let origin {
            let number = Int.random(in: 0..<originFiles, using: &random)
            let result = try await cache.fetch(URLRequest(url: URL(string: "\(origin)/f/\(number).txt")!))
            if result.data != originBody(number) {
                log.log("X fetch of file \(number) (\(result.source)) served \(result.data.count) wrong bytes")
            } else {
                log.log("F \(number) \(result.source)")
            }
        }
    }
}

/// `--role subscriber CACHE HISTORY ID`: logs every removal as "SEQUENCE HASH REASON" ("-" for
/// one learned by resynchronising) until its standard input closes.
func runSubscriber(_ arguments: [String]) throws -> Never {
    let cache = try SharedCache(directory: arguments[0])
    let log = History("\(arguments[1])/subscriber-\(arguments[2]).log")
    let subscription = cache.onRemovals { batch in
        for removal in batch {
            log.log("\(removal.sequence.map(String.init) ?? "-") \(removal.hash.hex) \(removal.reason)")
        }
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    _ = FileHandle.standardInput.readDataToEndOfFile()
    subscription.cancel()
    exit(0)
}
