import SharedCacheTestSupport
import Testing

@testable import SharedCache

@Suite("The in-memory index, against a Dictionary model")
struct IndexTests {
    static func entry(_ blobID: UInt64, size: UInt64 = 10) -> IndexEntry {
        IndexEntry(location: BodyLocation(blobID: blobID), bodySize: size, storedAt: 1, expiresAt: .max, lastAccess: Int64(blobID))
    }

    /// Runs random inserts, replacements and removals on both, checking they agree throughout.
    static func agreesWithModel(hashes: [KeyHash], operations: Int, seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = Index()
        var model: [KeyHash: IndexEntry] = [:]
        for step in 0..<operations {
            let hash = hashes[Int(random.next() % UInt64(hashes.count))]
            if random.next() % 3 == 0, let current = model[hash] {
                // Removing another version is a no-op; removing the current one removes it.
                #expect(index.remove(hash, at: BodyLocation(blobID: current.location.blobID + 1)) == nil)
                #expect(index.remove(hash, at: BodyLocation(blobID: current.location.blobID)) == current)
                model[hash] = nil
            } else {
                let entry = entry(UInt64(step + 1), size: random.next() % 1000)
                index.insert(entry, for: hash)
                model[hash] = entry
            }
            if step % 97 == 0 {
                #expect(index.count == model.count)
                #expect(index.totalBytes == model.values.reduce(0) { $0 + $1.bodySize })
                for hash in hashes { #expect(index[hash] == model[hash]) }
            }
        }
        #expect(Dictionary(uniqueKeysWithValues: index.map { ($0.hash, $0.entry) }) == model)
    }

    @Test func randomOperationsOnUniformHashes() {
        Self.agreesWithModel(hashes: (0..<600).map { KeyHash(key: "key \($0)") }, operations: 20_000, seed: 1)
    }

    /// Hashes that all share the bits the table uses: one long probe run, so every removal
    /// shifts members back and a wrong shift shows up as a lost entry.
    @Test func randomOperationsOnCollidingHashes() {
        let hashes = (0..<200).map { number in
            var raw = [UInt8](repeating: 0, count: 32)
            raw[0] = UInt8(number & 0xff)
            raw[20] = UInt8(number >> 8)
            return raw.withUnsafeBytes { KeyHash(bytes: $0) }
        }
        Self.agreesWithModel(hashes: hashes, operations: 5_000, seed: 2)
    }

    /// A batch (a manifest's entries on open) is inserted as one insert after another would be:
    /// the table grows during it, and of two entries for one hash the later stays.
    @Test func aBatchIsInsertedAsOneInsertAfterAnother() {
        var random = SplitMix64(seed: 3)
        let hashes = (0..<3000).map { KeyHash(key: "key \($0)") }
        let batch = (0..<5000).map { step in
            (hash: hashes[Int(random.next() % UInt64(hashes.count))], entry: Self.entry(UInt64(step + 1)))
        }
        var index = Index()
        index.insert(Self.entry(99_999), for: batch[0].hash)
        index.insert(contentsOf: batch)
        var model: [KeyHash: IndexEntry] = [:]
        for (hash, entry) in batch { model[hash] = entry }
        #expect(index.count == model.count && model.count < batch.count)
        #expect(index.totalBytes == model.values.reduce(0) { $0 + $1.bodySize })
        let disagreeing = index.filter { model[$0.hash] != $0.entry }.count
        #expect(disagreeing == 0)
    }

    @Test func journalRecordsFoldIn() {
        let hash = KeyHash(key: "a")
        var index = Index()
        index.apply(
            .stored(
                StoredRecord(
                    hash: hash, location: BodyLocation(blobID: 7), bodySize: 5, storedAt: 100, expiresAt: .max, key: Array("a".utf8), etag: [])))
        index.apply(.accessed(AccessedRecord(hash: hash, location: BodyLocation(blobID: 7), accessedAt: 300)))
        index.apply(.accessed(AccessedRecord(hash: hash, location: BodyLocation(blobID: 7), accessedAt: 200)))
        #expect(index[hash]?.lastAccess == 300)
        index.apply(.accessed(AccessedRecord(hash: hash, location: BodyLocation(blobID: 6), accessedAt: 900)))
        #expect(index[hash]?.lastAccess == 300)
        index.apply(.freshened(FreshenedRecord(hash: hash, location: BodyLocation(blobID: 7), storedAt: 5000, expiresAt: 9000)))
        #expect(index[hash]?.storedAt == 5000 && index[hash]?.expiresAt == 9000 && index[hash]?.lastAccess == 5000)
        index.apply(.freshened(FreshenedRecord(hash: hash, location: BodyLocation(blobID: 6), storedAt: 7000, expiresAt: 7000)))
        #expect(index[hash]?.expiresAt == 9000)
        index.apply(.removed(RemovedRecord(hash: hash, location: BodyLocation(blobID: 6), reason: .manual, remover: .current)))
        #expect(index.count == 1)
        index.apply(.cleared(.current))
        #expect(index.isEmpty && index.totalBytes == 0 && index[hash] == nil)
    }
}
