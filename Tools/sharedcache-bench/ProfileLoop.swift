import Foundation
import SharedCache
import SharedCacheCLI

/// `--role loop DIR get|put KEYS COUNT [default]`: the benchmark's 1 KB operations in a loop of
/// their own, for a profiler (`perf record`, `strace -c`): KEYS entries (stored first, for gets),
/// then COUNT operations in random order (gets) or on new keys (puts). Prints the mean per
/// operation. The memory tier is off, or as configured by default with `default`.
func runProfileLoop(_ arguments: [String]) throws -> Never {
    let (directory, operation, keys, count) = (arguments[0], arguments[1], Int(arguments[2])!, Int(arguments[3])!)
    let configuration =
        arguments.count > 4 && arguments[4] == "default"
        ? Configuration(sizeLimit: 0) : Configuration(sizeLimit: 0, memoryCostLimit: 0)
    let cache = try SharedCache(directory: directory, configuration: configuration)
    let body = Data(repeating: 0x5A, count: 1024)
    let names = (0..<keys).map(keyName)
    if operation == "get" {
        for (index, name) in names.enumerated() where try cache.get(key: name) == nil {
            try cache.put(key: name, data: body, metadata: EntryMetadata(etag: "\"v\(index)\""))
        }
    }
    let run = UInt64.random(in: 0...UInt64.max)
    let work =
        operation == "get"
        ? (0..<count).map { _ in names[Int.random(in: 0..<keys)] }
        : (0..<count).map { String(format: "https://example.com/loop/%016llx/%08d", run, $0) }
    let start = DispatchTime.now().uptimeNanoseconds
    for (index, name) in work.enumerated() {
        if operation == "get" {
            guard try cache.get(key: name) != nil else { fatalError("entry missing") }
        } else {
            try cache.put(key: name, data: body, metadata: EntryMetadata(etag: "\"v\(index)\""))
        }
    }
    let elapsed = DispatchTime.now().uptimeNanoseconds - start
    print(String(format: "%@: %.0f ns per operation over %d", operation, Double(elapsed) / Double(count), count))
    exit(0)
}

/// `--role http-loop DIR revalidated|bare COUNT`: against nginx on loopback, COUNT revalidated
/// fetches of a 1 KB file, or as many of URLSession's own conditional GETs of it, answered 304,
/// for a profiler (`perf record`, `strace -f -c`). Prints the p50 and p99.
func runHTTPProfileLoop(_ arguments: [String]) throws -> Never {
    let (directory, kind, count) = (arguments[0], arguments[1], Int(arguments[2])!)
    guard let fixture = try HTTPBenchFixture(in: directory) else { fatalError("nginx is not installed") }
    let samples = try runBlocking {
        var samples: [UInt64] = []
        for _ in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            if kind == "bare" { try await fixture.bareConditional() } else { try await fixture.revalidatedFetch() }
            samples.append(DispatchTime.now().uptimeNanoseconds - start)
        }
        return samples
    }
    let measured = summarize(kind, samples)
    let (p50, p99) = (measured.p50Microseconds, measured.p99Microseconds)
    print(String(format: "%@: p50 %.1f µs, p99 %.1f µs over %d requests", kind, p50, p99, count))
    exit(0)
}
