import SharedCacheTestSupport
import Testing

@testable import SharedCache

/// The writer stores into zero-filled storage ahead of its count and grows it when full; these
/// check it against the plainest encoder there is, a byte at a time onto an array.
@Suite("ByteWriter, against a byte-at-a-time model")
struct ByteWriterTests {
    /// A little-endian integer, a byte at a time.
    static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<MemoryLayout<T>.size).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// Random appends of every kind (and overwrites of what was written, and starting over),
    /// from a writer made with `capacity`: what it holds must equal the model's bytes.
    @Test(arguments: [(seed: UInt64(1), capacity: 0), (2, 1), (3, 64), (4, 300), (5, 5000)])
    func randomAppendsMatchTheModel(seed: UInt64, capacity: Int) {
        var random = SplitMix64(seed: seed)
        var writer = ByteWriter(capacity: capacity)
        var model: [UInt8] = []
        for _ in 0..<400 {
            let value = random.next()
            switch value % 9 {
            case 0:
                writer.append(UInt8(truncatingIfNeeded: value >> 8))
                model += Self.littleEndian(UInt8(truncatingIfNeeded: value >> 8))
            case 1:
                writer.append(UInt16(truncatingIfNeeded: value >> 8))
                model += Self.littleEndian(UInt16(truncatingIfNeeded: value >> 8))
            case 2:
                writer.append(UInt32(truncatingIfNeeded: value >> 8))
                model += Self.littleEndian(UInt32(truncatingIfNeeded: value >> 8))
            case 3:
                writer.append(Int64(bitPattern: value))
                model += Self.littleEndian(Int64(bitPattern: value))
            case 4:
                // Past any capacity the writer was made with, now and then.
                let bytes = (0..<Int(value % 700)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(value % 251)) }
                writer.append(bytes: bytes)
                model += bytes
            case 5:
                writer.append(zeros: Int(value % 50))
                model += [UInt8](repeating: 0, count: Int(value % 50))
                // And bytes from a sequence without contiguous storage, a byte at a time.
                let spelled = (0..<Int(value % 20)).lazy.map { UInt8(truncatingIfNeeded: $0 + 1) }
                writer.append(bytes: spelled)
                model += spelled
            case 6:
                let hash = KeyHash(key: "key \(value)")
                writer.append(hash)
                model += hash.withUnsafeBytes { Array($0) }
            case 7:
                // Kept for the next encoding (or not, past 1 KiB): what follows must not see
                // what was here, zeros included.
                writer.removeAll(keepingCapacityUpTo: 1024)
                model = []
            default:
                guard model.count >= 4 else { continue }
                let offset = Int(value % UInt64(model.count - 3))
                let overwrite = UInt32(truncatingIfNeeded: value >> 16)
                writer.set(overwrite, at: offset)
                model.replaceSubrange(offset..<offset + 4, with: Self.littleEndian(overwrite))
            }
            #expect(writer.withUnsafeBytes { Array($0) } == model, "seed \(seed)")
        }
        #expect(writer.bytes == model, "seed \(seed)")
    }

    /// Zeros appended after the storage grew are zeros, as are those of a writer made exactly
    /// as large as what it holds.
    @Test func appendedZerosAreZeroAfterGrowth() {
        var writer = ByteWriter(capacity: 4)
        writer.append(UInt32.max)
        writer.append(bytes: [UInt8](repeating: 0xFF, count: 9000))
        writer.append(zeros: 5000)
        writer.append(UInt8(7))
        #expect(writer.count == 14_005)
        #expect(writer.bytes[..<9004].allSatisfy { $0 == 0xFF })
        #expect(writer.bytes[9004..<14_004].allSatisfy { $0 == 0 })
        #expect(writer.bytes.last == 7)

        var exact = ByteWriter(capacity: 12)
        exact.append(UInt64.max)
        exact.append(zeros: 4)
        #expect(exact.bytes == [UInt8](repeating: 0xFF, count: 8) + [0, 0, 0, 0])
    }
}
