import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func keyName(_ index: Int) -> String { "https://example.com/assets/\(index)/image.png" }

/// The per-operation rows: put and get at 1 KB and at 100 KB, each SharedCache operation taking
/// turns with the floors' (with `floors`, the C program's path) and diskcache's (with `peer`, a
/// python with diskcache installed) on the same key; and 1 KB gets with the memory tier on.
func operationRows(in runRoot: String, quick: Bool, floors: String?, peer: String?) throws -> (
    rows: [Row], defaultGet: Measurement
) {
    let scale = quick ? 10 : 1
    var rows: [Row] = []
    var defaultGet: Measurement?
    for (size, keys) in [(1024, 20_000 / scale), (100 * 1024, 2_000 / scale)] {
        let root = "\(runRoot)/\(size)"
        rows += try storeWorkloads(in: root, size: size, keys: keys, floors: floors, peer: peer)
        if size == 1024 { defaultGet = try defaultGets(cacheDirectory: "\(root)/cache", keys: keys, reads: keys * 5) }
        try? FileManager.default.removeItem(atPath: root)
    }
    return (rows, defaultGet!)
}

/// `keys` puts of new keys of `size` bytes, then `keys` × 5 gets of them in random order, in
/// `root`, taking turns in batches of ``steadyBatch``; at 1 KB, then `keys` more gets taking
/// turns one by one. The servers end when this returns, before `root` goes.
private func storeWorkloads(in root: String, size: Int, keys: Int, floors: String?, peer: String?) throws -> [Row] {
    let label = size >= 100 * 1024 ? "100 KB" : "1 KB"
    // The memory tier off: these rows measure the disk path against the disk floors.
    let cache = try SharedCache(
        directory: "\(root)/cache", configuration: Configuration(sizeLimit: 0, memoryCostLimit: 0))
    let floors = try floors.map { try OperationServer.floors(executable: $0, directory: "\(root)/floor", size: size) }
    let peer = try peer.map { try OperationServer.diskcache(python: $0, directory: "\(root)/diskcache", size: size) }
    let names = (0..<keys).map(keyName)

    // Puts in key order: the floors' appends lay key N's value at N × size in one file, where
    // their preads find it.
    let body = Data(repeating: 0x5A, count: size)
    let put = try measureRow(
        "put \(label), no fsync", count: keys, batch: steadyBatch,
        cache: .local("SharedCache put", preparing: { (names[$0], EntryMetadata(etag: "\"v\($0)\"")) }) {
            try cache.put(key: $0, data: body, metadata: $1)
        },
        packedFloor: floors.map { .server("floor: write with O_APPEND", $0, "append") },
        filePerKeyFloor: floors.map { .server("floor: create + write + rename", $0, "create") },
        systemCalls: floors.map { .server("floor: a put's system calls", $0, "commit") },
        peer: peer.map { .server("diskcache put", $0, "put") })

    let order = (0..<keys * 5).map { _ in Int.random(in: 0..<keys) }
    func gets(_ workload: String, count: Int, batch: Int) throws -> Row {
        try measureRow(
            workload, count: count, batch: batch,
            cache: .local("SharedCache get", preparing: { names[order[$0]] }) { name in
                guard try cache.get(key: name) != nil else { fatalError("benchmark key missing") }
            },
            packedFloor: floors.map { .server("floor: pread", $0, "pread") { order[$0] } },
            filePerKeyFloor: floors.map { .server("floor: open + pread + close", $0, "open") { order[$0] } },
            peer: peer.map { .server("diskcache get", $0, "get") { order[$0] } })
    }
    let get = try gets("get \(label)", count: order.count, batch: steadyBatch)
    guard size == 1024 else { return [put, get] }
    return [put, get, try gets(oneByOneGet, count: keys, batch: 1)]
}

/// How many operations each contender does in a turn for the main rows: enough that each runs
/// in its steady state (its code and data in the processor's caches), few enough that the
/// drift of a shared machine's disk hits all alike.
let steadyBatch = 500

/// The row of 1 KB gets taking turns one operation at a time: each starts right after a switch
/// from the other contenders' processes, its caches cold.
let oneByOneGet = "get 1 KB, turns of one operation"

/// One row: SharedCache and whichever of the floors and the peer run, in turns.
private func measureRow(
    _ workload: String, count: Int, batch: Int, cache: Contender, packedFloor: Contender?, filePerKeyFloor: Contender?,
    systemCalls: Contender? = nil, peer: Contender?
) throws -> Row {
    var measured = try measureInTurns(
        count: count, batch: batch, [cache, packedFloor, filePerKeyFloor, systemCalls, peer].compactMap { $0 })[...]
    func next(_ contender: Contender?) -> Measurement? { contender.flatMap { _ in measured.popFirst() } }
    let cache = measured.popFirst()!
    return Row(
        workload: workload, packedFloor: next(packedFloor), filePerKeyFloor: next(filePerKeyFloor),
        systemCalls: next(systemCalls), cache: cache, peer: next(peer))
}

/// Fills a cache with `count` tiny entries, then times opening it from the journal alone and
/// from a checkpointed manifest.
func openTimes(in root: String, count: Int) throws -> (journal: Double, manifest: Double, manifestBytes: Int) {
    let cache = try SharedCache(directory: root, configuration: Configuration(sizeLimit: 0))
    let body = Data(repeating: 1, count: 16)
    for index in 0..<count { try cache.put(key: keyName(index), data: body) }
    func timeOpen() throws -> Double {
        let start = now()
        let opened = try SharedCache(directory: root)
        let entries = try opened.statistics().entryCount
        precondition(entries == count)
        return Double(now() - start) / 1e6
    }
    let fromJournal = try (0..<3).map { _ in try timeOpen() }.sorted()[1]
    let summary = try cache.checkpoint()
    let fromManifest = try (0..<3).map { _ in try timeOpen() }.sorted()[1]
    return (fromJournal, fromManifest, summary.manifestBytes)
}

/// CRC32C throughput over a 100 KB buffer: what checking a body costs per byte.
func crcGigabytesPerSecond() -> Double {
    let buffer = [UInt8](repeating: 0xA5, count: 100 * 1024)
    var sink: UInt32 = 0
    let start = now()
    for _ in 0..<2000 { sink &+= buffer.withUnsafeBytes { SharedCacheDiagnostics.crc32c($0) } }
    let seconds = Double(now() - start) / 1e9
    precondition(sink != 1)
    return Double(buffer.count * 2000) / seconds / 1e9
}
