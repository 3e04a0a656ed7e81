import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The checker of the invariants, from what every process logged.

struct CheckReport {
    var violations: [String] = []
    var operations = 0, gets = 0, hits = 0, puts = 0, removes = 0, fetches = 0, removalsHeard = 0
}

func check(history: String, fullRunSubscribers: [Int], endHash: String) throws -> CheckReport {
    var report = CheckReport()
    var puts = Set<String>()  // "key writer version"
    var gets: [String] = []
    var removed: [String] = []
    var subscriberLogs: [Int: [Substring]] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: history) {
        let lines = try String(contentsOfFile: "\(history)/\(name)", encoding: .utf8).split(separator: "\n")
        if name.hasPrefix("subscriber-") {
            subscriberLogs[Int(name.dropFirst("subscriber-".count).dropLast(".log".count))!] = lines
            continue
        }
        for line in lines {
            report.operations += 1
            let fields = line.split(separator: " ")
            switch fields.first {
            case "P":
                report.puts += 1
                puts.insert(fields.dropFirst().joined(separator: " "))
            case "G":
                report.gets += 1
                report.hits += 1
                gets.append(fields.dropFirst().joined(separator: " "))
            case "R":
                report.removes += 1
                removed.append(String(fields[1]))
            case "F": report.fetches += 1
            case "X": report.violations.append("\(name): \(line)")
            default: report.violations.append("\(name): unreadable line \(line)")
            }
        }
    }
    // 1. Every get returned a body some put made for that key.
    for get in gets where !puts.contains(get) { report.violations.append("a get returned \(get), which no put made") }

    // 2. Exactly once, in order; full-run subscribers heard every removal and the same ones.
    var heard: [Int: [String]] = [:]
    for (id, lines) in subscriberLogs {
        var last: UInt64 = 0
        var sequences = Set<UInt64>()
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 3 else {
                report.violations.append("subscriber \(id): unreadable line \(line)")
                continue
            }
            if let sequence = UInt64(fields[0]) {
                if !sequences.insert(sequence).inserted { report.violations.append("subscriber \(id) heard \(sequence) twice") }
                if sequence < last { report.violations.append("subscriber \(id) heard \(sequence) after \(last)") }
                last = max(last, sequence)
            }
            heard[id, default: []].append("\(fields[0]) \(fields[1])")
        }
        report.removalsHeard += lines.count
    }
    for id in fullRunSubscribers {
        let lines = heard[id] ?? []
        let hashes = Set(lines.map { $0.split(separator: " ")[1] })
        for hash in removed where !hashes.contains(Substring(hash)) {
            report.violations.append("subscriber \(id) never heard of the removal of \(hash.prefix(16))")
        }
        if !hashes.contains(Substring(endHash)) { report.violations.append("subscriber \(id) never caught up") }
        if id != fullRunSubscribers[0], lines != heard[fullRunSubscribers[0]] ?? [] {
            report.violations.append("subscribers \(fullRunSubscribers[0]) and \(id) heard different removals")
        }
    }
    return report
}
