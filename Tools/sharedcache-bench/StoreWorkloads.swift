import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func keyName(_ index: Int) -> String { "https://example.com/assets/\(index)/image.png" }

/// Puts of new keys, next to the floor: create + write + close + rename to a fresh name in a
/// fan-out folder, then one 120-byte O_APPEND record.
func putWorkload(in root: String, cache: SharedCache, size: Int, count: Int, peer: OperationServer?) throws -> (
    Measurement, Measurement, Measurement?
) {
    let bytes = [UInt8](repeating: 0x5A, count: size)
    let body = Data(bytes)
    let record = [UInt8](repeating: 0x11, count: 120)
    try FileManager.default.createDirectory(atPath: "\(root)/tmp", withIntermediateDirectories: true)
    for index in 0..<256 { mkdir("\(root)/\(String(format: "%02x", index))", 0o700) }
    let journal = open("\(root)/journal", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    check(journal, "journal")
    defer { close(journal) }
    let names = (0..<count).map { index in
        ("\(root)/tmp/\(index)", "\(root)/\(String(format: "%02x", index % 256))/\(String(format: "%064x", index))")
    }
    let keys = (0..<count).map(keyName)
    return try measureInterleaved(
        "put", count: count,
        floor: { index in
            let (temporary, final) = names[index]
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, size) }
            close(fd)
            rename(temporary, final)
            _ = record.withUnsafeBytes { write(journal, $0.baseAddress, 120) }
        },
        cache: { index in
            try cache.put(key: keys[index], data: body, metadata: EntryMetadata(etag: "\"v\(index)\""))
        },
        peer: peer.map { peer in { index in try peer.time("put", index) } })
}

/// Gets in random order over the keys the put workload stored, next to the floor: open +
/// pread + close of the files the floor put wrote.
func getWorkload(in root: String, cache: SharedCache, size: Int, count: Int, reads: Int, peer: OperationServer?) throws
    -> (Measurement, Measurement, Measurement?)
{
    let order = (0..<reads).map { _ in Int.random(in: 0..<count) }
    let paths = (0..<count).map { "\(root)/\(String(format: "%02x", $0 % 256))/\(String(format: "%064x", $0))" }
    let keys = (0..<count).map(keyName)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size + 4096, alignment: 16)
    defer { buffer.deallocate() }
    return try measureInterleaved(
        "get", count: reads,
        floor: { index in
            let fd = open(paths[order[index]], O_RDONLY | O_CLOEXEC)
            _ = pread(fd, buffer, size + 4096, 0)
            close(fd)
        },
        cache: { index in
            guard try cache.get(key: keys[order[index]]) != nil else { fatalError("benchmark key missing") }
        },
        peer: peer.map { peer in { index in try peer.time("get", order[index]) } })
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
