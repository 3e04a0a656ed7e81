import Foundation
import Testing
import CSharedCacheSupport

@testable import SharedCache
import SharedCacheCLI

@Suite("CRC32C and SHA-256 against published vectors")
struct ChecksumTests {
    /// RFC 3720, appendix B.4, plus the common "123456789" check value.
    static let crcVectors: [([UInt8], UInt32)] = [
        (Array(repeating: 0, count: 32), 0x8A91_36AA),
        (Array(repeating: 0xFF, count: 32), 0x62A8_AB43),
        ((0..<32).map { UInt8($0) }, 0x46DD_794E),
        ((0..<32).reversed().map { UInt8($0) }, 0x113F_DB5C),
        (Array("123456789".utf8), 0xE306_9283),
        ([], 0),
    ]

    @Test(arguments: crcVectors)
    func crc32cVectors(bytes: [UInt8], expected: UInt32) {
        #expect(CRC32C.checksum(bytes) == expected)
    }

    /// The 3-way hardware path folds chunks of three 256-byte or 8 KiB blocks together; check it
    /// against a bitwise reference at lengths on both sides of where each starts, and at an odd
    /// offset.
    @Test func crc32cMatchesBitwiseReferenceAtEveryPath() {
        var random = TestSeed.generator("crc32cMatchesBitwiseReferenceAtEveryPath")
        let data = (0..<70_010).map { _ in UInt8.random(in: 0...255, using: &random) }
        let edges = [767, 768, 769, 1024, 1535, 1536, 1537, 2304, 24_575, 24_576, 24_577, 25_344, 49_152]
        for length in [0, 1, 7, 8, 9, 255, 256, 4095, 4096, 65_536, 69_999] + edges {
            let slice = Array(data[3..<(3 + length)])
            #expect(CRC32C.checksum(slice) == referenceCRC32C(slice), "length \(length); \(TestSeed.replay)")
        }
        // Extending in pieces equals one pass.
        let whole = CRC32C.checksum(data)
        let first = data.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[..<12_345])) }
        let both = data.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[12_345...]), extending: first)
        }
        #expect(both == whole, "\(TestSeed.replay)")
    }

    @Test func maskRoundTrips() {
        for value: UInt32 in [0, 1, 0xFFFF_FFFF, 0x1234_5678, 0xA282_EAD8] {
            #expect(CRC32C.unmask(CRC32C.mask(value)) == value)
            #expect(CRC32C.mask(value) != value)
        }
    }

    /// FIPS 180-4 examples.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func sha256Vectors(message: String, expected: String) {
        #expect(KeyHash(key: message).hex == expected)
    }

    @Test func sha256OfOneMillionAs() {
        let message = String(repeating: "a", count: 1_000_000)
        #expect(KeyHash(key: message).hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every padding case (lengths around the 55/56/64-byte boundaries) against coreutils.
    @Test(.enabled(if: Requirements.isInstalled("/usr/bin/sha256sum"), "needs coreutils' sha256sum"))
    func sha256AgreesWithSha256sumAtBlockBoundaries() throws {
        for length in [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200] {
            let message = String((0..<length).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
            let (_, printed) = try ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/sha256sum"), input: .bytes(Data(message.utf8)))
            #expect(KeyHash(key: message).hex == String(printed.prefix(64)), "length \(length)")
        }
    }

    /// The CPU's SHA instructions and the portable code give the same digest for every length up
    /// to five blocks, of random bytes; the published vectors above go through whichever
    /// `scs_sha256` picks, so both paths meet a reference. (Without the instructions `scs_sha256`
    /// is the portable code, and the comparison would hold whatever either did.)
    @Test(.enabled(if: scs_sha256_is_hardware_accelerated() != 0, "this CPU has no SHA instructions"))
    func sha256HardwareAndPortablePathsAgree() {
        var random = TestSeed.generator("sha256HardwareAndPortablePathsAgree")
        for length in 0...320 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            var fast = [UInt8](repeating: 0, count: 32), portable = [UInt8](repeating: 0, count: 32)
            bytes.withUnsafeBytes { raw in
                scs_sha256(raw.baseAddress, raw.count, &fast)
                scs_sha256_portable(raw.baseAddress, raw.count, &portable)
            }
            #expect(fast == portable, "length \(length); \(TestSeed.replay)")
        }
    }

    /// The portable code meets a published vector whichever path `scs_sha256` takes here.
    @Test func sha256PortablePathMeetsAVector() {
        let vector = Array("abc".utf8)
        var portable = [UInt8](repeating: 0, count: 32)
        scs_sha256_portable(vector, vector.count, &portable)
        #expect(
            portable.withUnsafeBytes { KeyHash(bytes: $0) }.hex
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func keyHashHexRoundTrips() {
        let hash = KeyHash(key: "https://example.com/")
        #expect(KeyHash(hex: hash.hex) == hash)
        #expect(KeyHash(hex: hash.hex.uppercased()) == hash)
        #expect(KeyHash(hex: "xyz") == nil)
        #expect(KeyHash(hex: String(repeating: "g", count: 64)) == nil)
    }

    private func referenceCRC32C(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }
}
