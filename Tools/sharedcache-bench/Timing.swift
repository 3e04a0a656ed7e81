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

/// One side of a measurement that takes turns (``measureInTurns(count:batch:_:)``): its
/// operations on the indices of a batch, one after another, and the nanoseconds each took.
struct Contender {
    var name: String
    var time: (Range<Int>) throws -> [UInt64]

    /// An operation of this process, timed here with the monotonic clock.
    static func local(_ name: String, _ operation: @escaping (Int) throws -> Void) -> Contender {
        local(name, preparing: { $0 }, operation)
    }

    /// An operation of this process on what `prepare` makes of the index (a key, say), made
    /// before the clock starts, as the floors and the peer make theirs.
    static func local<Input>(
        _ name: String, preparing prepare: @escaping (Int) -> Input, _ operation: @escaping (Input) throws -> Void
    ) -> Contender {
        Contender(name: name) { batch in
            try batch.map { index in
                let input = prepare(index)
                let before = now()
                try operation(input)
                return now() - before
            }
        }
    }

    /// `operation` on key `key(i)` done by `server`, which times it there.
    static func server(
        _ name: String, _ server: OperationServer, _ operation: String, key: @escaping (Int) -> Int = { $0 }
    ) -> Contender {
        Contender(name: name) { batch in try server.time(operation, batch.map(key)) }
    }
}

/// Times each contender's operation on i for i in 0..<count; their measurements, in their order.
///
/// The contenders take turns a batch of `batch` operations at a time, so all see the same
/// machine: on a shared VM the filesystem's speed drifts by several times within a minute, and
/// timing one after the other would compare different machines. The order rotates by one from
/// one batch to the next, so no contender always runs right after the same other one. A batch
/// of 1 times each operation right after the others' (in their wake: the caches they left, the
/// switch to and from their process); a batch of hundreds times each in its steady state, as a
/// program doing many of them runs it.
func measureInTurns(count: Int, batch: Int = 1, _ contenders: [Contender]) throws -> [Measurement] {
    var samples = [[UInt64]](repeating: [], count: contenders.count)
    for (round, start) in stride(from: 0, to: count, by: batch).enumerated() {
        let indices = start..<min(count, start + batch)
        for turn in 0..<contenders.count {
            let contender = (round + turn) % contenders.count
            samples[contender] += try contenders[contender].time(indices)
        }
    }
    return zip(contenders, samples).map { summarize($0.name, $1) }
}

/// Times `floor(i)` and `cache(i)` in turns (``measureInTurns(count:batch:_:)``) for i in 0..<count.
func measurePair(
    _ name: String, count: Int, floor: @escaping (Int) throws -> Void, cache: @escaping (Int) throws -> Void
) throws -> (floor: Measurement, cache: Measurement) {
    let measured = try measureInTurns(
        count: count, [.local("floor: \(name)", floor), .local("SharedCache \(name)", cache)])
    return (measured[0], measured[1])
}

/// `floor(i)` then `cache(i)` for i in 0..<count, for async operations, all run in one task, so
/// the timings hold no hop from synchronous code into async code and back.
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
