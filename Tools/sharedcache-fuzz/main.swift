// sharedcache-fuzz: a seeded mutation fuzzer for every decoder of on-disk bytes and for the
// tools' argument parser.
//
//   sharedcache-fuzz [--inputs N] [--seed S] [--target NAME]
//
// Each input is a valid seed (a journal record, a manifest, a blob header, ...) with one to
// four mutations: flipped bits, bytes set to edge values, 32-bit length fields set to 0, 2^31
// or 2^32 - 1, inserted, deleted, duplicated or truncated ranges, and splices of two seeds.
// A decoder must reject bad input with an error: a crash ends the run (and fails CI), a
// broken round trip or a peak of resident memory over 256 MB (768 MB under the address
// sanitizer; a length field believed) is reported and exits 1. The same seed replays the same inputs.

import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

var inputs = 100_000
var seed: UInt64 = 1
var only: String? = nil
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--inputs": inputs = Int(arguments.popFirst() ?? "") ?? inputs
    case "--seed": seed = UInt64(arguments.popFirst() ?? "") ?? seed
    case "--target": only = arguments.popFirst()
    default:
        FileHandle.standardError.write(Data("usage: sharedcache-fuzz [--inputs N] [--seed S] [--target NAME]\n".utf8))
        exit(64)
    }
}

var random = SplitMix64(seed: seed)
let edgeBytes: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF]
let edgeWords: [UInt32] = [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFFE, 0x0010_0001]

@MainActor func mutate(_ input: [UInt8], seeds: [[UInt8]]) -> [UInt8] {
    var bytes = input
    for _ in 0..<Int.random(in: 1...4, using: &random) {
        let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
        switch Int.random(in: 0..<9, using: &random) {
        case 0 where !bytes.isEmpty:
            bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
        case 1 where !bytes.isEmpty:
            bytes[position] = edgeBytes.randomElement(using: &random)!
        case 2 where bytes.count >= 4:
            let word = edgeWords.randomElement(using: &random)!
            let at = Int.random(in: 0...(bytes.count - 4), using: &random)
            withUnsafeBytes(of: word.littleEndian) { for (offset, byte) in $0.enumerated() { bytes[at + offset] = byte } }
        case 3:
            bytes.insert(contentsOf: (0..<Int.random(in: 1...16, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, at: position)
        case 4 where !bytes.isEmpty:
            bytes.removeSubrange(position..<min(bytes.count, position + Int.random(in: 1...16, using: &random)))
        case 5 where !bytes.isEmpty:
            let end = min(bytes.count, position + Int.random(in: 1...32, using: &random))
            bytes.insert(contentsOf: bytes[position..<end], at: end)
        case 6:
            bytes = Array(bytes.prefix(position))
        case 7:
            let other = seeds.randomElement(using: &random)!
            bytes = Array(bytes.prefix(position)) + Array(other.dropFirst(Int.random(in: 0...other.count, using: &random)))
        default:
            bytes.append(UInt8.random(in: 0...255, using: &random))
        }
    }
    return bytes
}

/// This process's peak resident memory (its own, not a parent's: see `peakResidentKilobytes`).
func peakResidentMegabytes() -> Double {
    Double(peakResidentKilobytes() ?? 0) / 1024
}

var violations = 0
var executed = 0
let targets = FuzzTarget.allCases.filter { only == nil || $0.rawValue == only }
let parserShare = only == nil || only == "arguments" ? 1 : 0
let share = inputs / max(1, targets.count + parserShare)

for target in targets {
    let seeds = target.seeds
    var corpus = seeds
    var accepted = 0
    for _ in 0..<share {
        let input = mutate(corpus.randomElement(using: &random)!, seeds: seeds)
        executed += 1
        if let problem = target.check(input) {
            violations += 1
            print("\(target.rawValue): \(problem); input \(input.map { String(format: "%02x", $0) }.joined())")
        } else if corpus.count < 64, Bool.random(using: &random) {
            corpus.append(input)  // keep some mutants to mutate further
            accepted += 1
        }
    }
    print("\(target.rawValue) inputs=\(share)")
}

if parserShare == 1 {
    // The tools' grammar: unknown options, missing values, `=` forms, `--`, repeats.
    let options: [Arguments.Option] = [
        .flag("--json"), .flag("-h", "--help"), .value("--dir"), .value("-o", "--output"), .repeated("-H", "--header"),
        .value("--expires"),
    ]
    let tokens = [
        "--json", "-h", "--dir", "--dir=", "--dir=x", "-o", "-H", "--header=a: b", "--", "-", "--expires", "--expires=1h",
        "--unknown", "--json=1", "=", "", "key", "-x", "--help", "--output=f",
    ]
    for _ in 0..<share {
        var argv: [String] = []
        for _ in 0..<Int.random(in: 0...8, using: &random) {
            if Int.random(in: 0..<5, using: &random) == 0 {
                argv.append(String(decoding: (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, as: UTF8.self))
            } else {
                argv.append(tokens.randomElement(using: &random)!)
            }
        }
        executed += 1
        do {
            let parsed = try Arguments(argv, options: options)
            // A parse invents nothing: every positional word is one of the arguments, in order,
            // and parsing again gives the same words.
            var rest = argv[...]
            let inOrder = parsed.positional.allSatisfy { word in
                guard let found = rest.firstIndex(of: word) else { return false }
                rest = rest[(found + 1)...]
                return true
            }
            if !inOrder || (try? Arguments(argv, options: options))?.positional != parsed.positional {
                violations += 1
                print("arguments: positional words \(parsed.positional) do not come from \(argv)")
            }
        } catch {
            // A usage error is the right answer to bad arguments.
        }
    }
    print("arguments inputs=\(share)")
}

/// Whether this build runs under the address sanitizer, which keeps freed memory in a
/// quarantine (256 MB by default) and adds shadow memory: its runs get three times the budget,
/// which a believed 4 GB length field still exceeds.
func isAddressSanitized() -> Bool {
    #if os(Linux)
    let everywhere: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
    #else
    let everywhere = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
    #endif
    return dlsym(everywhere, "__asan_init") != nil
}

let peak = peakResidentMegabytes()
if peak > (isAddressSanitized() ? 768 : 256) {
    violations += 1
    print("peak resident memory \(peak) MB: a decoder believed a length field")
}
print("inputs=\(executed) violations=\(violations) crashes=0 seed=\(seed) peak-resident-mb=\(Int(peak))")
exit(violations == 0 ? 0 : 1)
