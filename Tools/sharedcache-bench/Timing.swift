import Foundation
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

struct Measurement: Codable {
    var name: String
    var operations: Int
    var p50Microseconds: Double
    var p99Microseconds: Double
    var operationsPerSecond: Double
}

/// Times `floor(i)` and `cache(i)` alternately for i in 0..<count, one call at a time, so both
/// see the same machine: on a shared VM the filesystem's speed drifts by several times within
/// a minute, and timing one after the other would compare two different machines.
func measurePair(
    _ name: String, count: Int, floor: (Int) throws -> Void, cache: (Int) throws -> Void
) throws -> (floor: Measurement, cache: Measurement) {
    let (floor, cache, _) = try measureInterleaved(name, count: count, floor: floor, cache: cache, peer: nil)
    return (floor, cache)
}

/// ``measurePair`` with a third contender: `peer(i)` does the same operation in the peer's own
/// process and returns the nanoseconds it measured there (so the round trip to it is not counted).
func measureInterleaved(
    _ name: String, count: Int, floor: (Int) throws -> Void, cache: (Int) throws -> Void,
    peer: ((Int) throws -> UInt64)?
) throws -> (floor: Measurement, cache: Measurement, peer: Measurement?) {
    var floorSamples = [UInt64](repeating: 0, count: count)
    var cacheSamples = [UInt64](repeating: 0, count: count)
    var peerSamples = [UInt64](repeating: 0, count: peer == nil ? 0 : count)
    for index in 0..<count {
        var before = now()
        try floor(index)
        floorSamples[index] = now() - before
        before = now()
        try cache(index)
        cacheSamples[index] = now() - before
        if let peer { peerSamples[index] = try peer(index) }
    }
    return (
        summarize("floor: \(name)", floorSamples), summarize("SharedCache \(name)", cacheSamples),
        peer == nil ? nil : summarize("diskcache \(name)", peerSamples)
    )
}

/// ``measurePair`` for async operations, all run in one task, so the timings hold no hop from
/// synchronous code into async code and back.
func measurePairAsync(
    _ name: String, count: Int, floor: @escaping @Sendable (Int) async throws -> Void,
    cache: @escaping @Sendable (Int) async throws -> Void
) throws -> (floor: Measurement, cache: Measurement) {
    let (floorSamples, cacheSamples) = try runBlocking { () -> ([UInt64], [UInt64]) in
        var floorSamples = [UInt64](repeating: 0, count: count)
        var cacheSamples = [UInt64](repeating: 0, count: count)
        for index in 0..<count {
            var before = now()
            try await floor(index)
            floorSamples[index] = now() - before
            before = now()
            try await cache(index)
            cacheSamples[index] = now() - before
        }
        return (floorSamples, cacheSamples)
    }
    return (summarize("floor: \(name)", floorSamples), summarize("SharedCache \(name)", cacheSamples))
}

func summarize(_ name: String, _ samples: [UInt64]) -> Measurement {
    let sorted = samples.sorted()
    func percentile(_ p: Double) -> Double {
        Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
    }
    return Measurement(
        name: name, operations: sorted.count, p50Microseconds: percentile(0.5), p99Microseconds: percentile(0.99),
        operationsPerSecond: Double(sorted.count) / (Double(sorted.reduce(0, +)) / 1e9))
}

func check(_ result: Int32, _ what: String) {
    if result < 0 { fatalError("\(what): \(String(cString: strerror(errno)))") }
}
