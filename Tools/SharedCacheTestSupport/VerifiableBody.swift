package import Foundation

/// Bodies that say which key, writer and version they were made for, padded with bytes derived
/// from those, so any reader in any process can tell a genuine body from a mix, a truncation or
/// another key's body. The multi-process tests and `sharedcache-stress` write and check these.
package enum VerifiableBody {
    package static func make(key: String, writer: Int, version: Int, size: Int) -> Data {
        var data = Data("key=\(key);writer=\(writer);version=\(version);size=\(size);".utf8)
        var padding = SplitMix64(seed: UInt64(truncatingIfNeeded: stableHash(key) &+ writer &* 31 &+ version &* 7919))
        while data.count < size { data.append(UInt8(truncatingIfNeeded: padding.next())) }
        return data
    }

    /// The writer and version `data` was made by for `key`; `nil` if it is not exactly such a body.
    package static func origin(of data: Data, key: String) -> (writer: Int, version: Int)? {
        let prefix = Data("key=\(key);writer=".utf8)
        guard data.starts(with: prefix) else { return nil }
        // What follows is "W;version=V;size=S;" and then padding. Split bytes, not characters:
        // a padding byte can form one grapheme cluster with the ";" before it.
        let fields = data.dropFirst(prefix.count).prefix(64).split(separator: UInt8(ascii: ";"), maxSplits: 3)
            .map { String(decoding: $0, as: UTF8.self) }
        guard fields.count >= 3, let writer = Int(fields[0]), fields[1].hasPrefix("version="),
            fields[2].hasPrefix("size="), let version = Int(fields[1].dropFirst(8)),
            let size = Int(fields[2].dropFirst(5)), size <= 64 << 20,
            data == make(key: key, writer: writer, version: version, size: size)
        else { return nil }
        return (writer, version)
    }

    /// FNV-1a: Swift's `hashValue` is seeded per process, and every process must agree.
    private static func stableHash(_ text: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: hash)
    }
}

/// A reproducible random stream: the same seed, the same numbers, in every process.
package struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
