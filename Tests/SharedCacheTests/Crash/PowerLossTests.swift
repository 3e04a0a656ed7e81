import Foundation
import SharedCache
import Testing
import SharedCacheCLI

/// The power-loss checker (`Tools/sharedcache-crash`), run as the built program: a bounded
/// sample of every workload's crash states, and the states that showed each bug it found.
@Suite("Power loss")
struct PowerLossTests {
    static var executable: String {
        Worker.executable.deletingLastPathComponent().appendingPathComponent("sharedcache-crash").path
    }

    /// Runs the checker, waiting on a thread of its own (``offThePool(_:)``); its exit status and
    /// output.
    static func check(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await offThePool {
            let (termination, output) = try ChildProcess.run(URL(fileURLWithPath: executable), arguments: arguments)
            return (termination.status, output)
        }
    }

    @Test("A seeded sample of every workload's crash states breaks no rule")
    func boundedSample() async throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("power-loss sample: seed \(seed)")
        // Three states per workload, durability and model; the tool itself runs on every eighth.
        let (status, output) = try await Self.check(["--seed", "\(seed)", "--cap", "3", "--tools", "sample"])
        #expect(status == 0, "seed \(seed):\n\(output)")
        let totals = try #require(Self.totals(output), "no summary line:\n\(output)")
        #expect(totals.checked > 0 && totals.violations == 0, "seed \(seed):\n\(output)")
    }

    /// The states checked and those with violations, from the checker's summary line.
    static func totals(_ output: String) -> (checked: Int, violations: Int)? {
        guard let match = output.firstMatch(of: /(\d+) states checked, (\d+) with violations/),
            let checked = Int(match.1), let violations = Int(match.2)
        else { return nil }
        return (checked, violations)
    }

    // MARK: What the checker found

    /// A power loss tore the journal's last record. `verify --repair` truncated it, and then
    /// `verify` in the same process reported the damage again: it counted every time a read
    /// had ever stopped at a damaged record, not whether one still did.
    /// The same, when the power loss also lost the shared counters (`stats`), so they do not
    /// announce the torn record: a refresh soon after the last read trusted them and skipped
    /// the journal, and verify --repair saw no damage and repaired nothing (found by the
    /// power-loss checker under the thread sanitizer).
    @Test("verify --repair of a torn journal tail repairs it, though the shared counters were lost too")
    func verifyRepairsATornTailTheCountersDoNotAnnounce() throws {
        let directory = try Self.directoryWithATornJournalTail()
        try FileManager.default.removeItem(atPath: directory("cache/stats"))
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try cache.get(key: "a")?.data == Data("a".utf8))
        #expect(try cache.verify(repair: true).problems.map(\.kind) == [.damagedJournal])
        #expect(try SharedCache(directory: directory("cache")).verify().problems.isEmpty)
    }

    @Test("verify after verify --repair of a torn journal tail is clean, in the same process")
    func verifyAfterRepairingATornTail() throws {
        let directory = try Self.directoryWithATornJournalTail()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try cache.get(key: "a")?.data == Data("a".utf8))
        #expect(try cache.verify(repair: true).problems.map(\.kind) == [.damagedJournal])
        #expect(try cache.verify().problems.isEmpty)
    }

    /// A cache (in `cache/`) of two entries, "a" and "b", whose journal's last record reached
    /// the disk only in part: its length did, its last 20 bytes are zeros.
    static func directoryWithATornJournalTail() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"))
        try writer.put(key: "a", data: Data("a".utf8))
        try writer.put(key: "b", data: Data("b".utf8))
        let path = directory("cache/journal/0000000000000001")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes.replaceSubrange((bytes.count - 20)..., with: Data(count: 20))
        try bytes.write(to: URL(fileURLWithPath: path))
        return directory
    }

    @Test("Crash states tearing a synchronized put's journal record recover to a clean verify")
    func tornJournalRecordsRecover() async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", "put-remove", "--durability", "synchronized", "--model", "weak",
            "--losing", "journal/", "--tools", "none", "--cap", "1000",
        ])
        #expect(status == 0, "\(output)")
    }

    /// A creation renames `config` into place before it writes `format`. Unflushed, a power loss
    /// could keep the rename and tear the bytes (garbage past the part written): the directory
    /// then held a `config` no creation wrote and no `format`, and was refused as another
    /// program's, with no advice that helps (found by the seeded sample, seed
    /// 13015311686361689527). A creation now flushes `config` whatever the durability.
    @Test("Crash states tearing a creation's config still open")
    func aCreationsConfigSurvives() async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", "create", "--durability", "none", "--model", "weak",
            "--losing", "config", "--tools", "none", "--cap", "1000",
        ])
        #expect(status == 0, "\(output)")
        #expect((Self.totals(output)?.checked ?? 0) > 0, "\(output)")
    }

    /// A checkpoint creates the next journal segment by renaming a header written in `tmp/`
    /// without replacing. Without a flush (`Durability.none`), ext4 may commit the rename and
    /// not the header (auto_da_alloc only covers renames over a file), leaving an empty
    /// segment: the directory then failed to open, and `verify --repair` failed the same way.
    @Test(
        "Crash states losing a new segment's header bytes open",
        arguments: [("checkpoint", "ext4-ordered"), ("rotation", "weak")])
    func segmentHeadersSurvive(workload: String, model: String) async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", workload, "--durability", "none", "--model", model,
            "--losing", "tmp/segment", "--tools", "none", "--cap", "40",
        ])
        #expect(status == 0, "\(output)")
    }

    /// With `Durability.synchronized`, a checkpoint flushes its manifest, and the name the
    /// rename gave it, before it retires the segments the manifest covers. Unflushed, a power
    /// loss could keep the retirement and lose the manifest's bytes: opening rebuilt the
    /// manifest without the retired segment, and a packed entry recorded only there was lost,
    /// though its put had returned as durable.
    @Test("Crash states losing a synchronized checkpoint's manifest lose no acknowledged put")
    func manifestsReachTheDiskBeforeTheSegmentsTheyCoverGo() async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", "rotation", "--durability", "synchronized", "--model", "weak",
            "--losing", "manifest", "--tools", "none", "--cap", "1000",
        ])
        #expect(status == 0, "\(output)")
        let totals = try #require(Self.totals(output), "no summary line:\n\(output)")
        #expect(totals.checked > 0 && totals.violations == 0, "\(output)")
    }

    /// With `Durability.synchronized`, a new pack segment's name and a new blob file's name
    /// are flushed (their folder's fsync) before the journal record that names them is
    /// written. Unflushed, a power loss could keep the durable record and lose the name: the
    /// acknowledged put read as a miss. (`create` makes a pack segment; `concurrent` packs up
    /// to 4 KiB, so its 5,000-byte bodies are blob files.)
    @Test(
        "Crash states losing a new body's file name lose no acknowledged put",
        arguments: [("create", "packs/"), ("concurrent", "blobs/")])
    func bodyFileNamesReachTheDiskBeforeTheirRecords(workload: String, losing: String) async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", workload, "--durability", "synchronized", "--model", "weak",
            "--losing", losing, "--tools", "none", "--cap", "1000",
        ])
        #expect(status == 0, "\(output)")
        let totals = try #require(Self.totals(output), "no summary line:\n\(output)")
        #expect(totals.checked > 0 && totals.violations == 0, "\(output)")
    }

    /// A checkpoint appends `sealed(G+1)` to segment G, then creates G+1. Unflushed
    /// (`Durability.none`), the seal could be lost while G+1 and records appended to it
    /// survived: the next process appended to G, and its next checkpoint sealed G again,
    /// found G+1 already there and kept it, with a first sequence that was not the new
    /// seal's and records from before the power loss, which a process opening the directory
    /// then applied on top of the new manifest (reads changed after a checkpoint; a put made
    /// since recovery could be overridden by an older record).
    @Test("Crash states losing a sealed segment's last writes recover, checkpoint and reopen alike")
    func sealsReachTheDiskBeforeTheNextSegment() async throws {
        let (status, output) = try await Self.check([
            "--seed", "1", "--workload", "checkpoint", "--durability", "none", "--model", "ext4-ordered",
            "--losing", "journal/0000000000000001", "--tools", "none", "--cap", "1000",
        ])
        #expect(status == 0, "\(output)")
    }

    /// Under the weak model (directory entries of `journal/` unflushed with `Durability.none`),
    /// a power loss after two checkpoints kept segment 3 and the old manifest (generation 1)
    /// but lost segment 2's name. Opening read segment 1 to its seal, found 2 missing while a
    /// newer one existed, and read the manifest again, forever: every process, the tool's
    /// `verify --repair` included, spun. Found by `--full --seed 20261123` (rotation, none,
    /// weak). The opener now rebuilds a manifest whose journal keeps leading to a missing
    /// segment, as it did for one that names a missing segment.
    @Test("A manifest whose journal leads through a seal to a missing segment is rebuilt, not looped on")
    func staleManifestLeadingToAMissingSegment() throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        let cache = try SharedCache(directory: path, configuration: Configuration(journalRetention: .seconds(3600)))
        let firstManifest = try Data(contentsOf: URL(fileURLWithPath: "\(path)/manifest"))
        try cache.put(key: "a", data: Data("a".utf8))
        try cache.checkpoint()
        try cache.put(key: "b", data: Data("b".utf8))
        try cache.checkpoint()
        try firstManifest.write(to: URL(fileURLWithPath: "\(path)/manifest"))
        try FileManager.default.removeItem(atPath: "\(path)/journal/0000000000000002")

        // In a process of its own, so that a regression fails here instead of hanging the suite.
        let child = try Tool.admin.start(["--dir", path, "verify", "--repair", "--json"])
        // The output ends when the process does: a regression that hangs is caught at 60 s.
        guard let output = child.output?.remainingData(within: .seconds(60)) else {
            child.signal(SIGKILL)
            _ = child.wait()
            Issue.record("`sharedcache verify --repair` did not finish in 60 s")
            return
        }
        let errors = child.errors?.remainingData(within: .seconds(10)) ?? Data()
        let printed = String(decoding: output + errors, as: UTF8.self)
        #expect(child.wait() == .exited(0), "\(printed)")
        let report = try? JSONSerialization.jsonObject(with: output) as? [String: Any]
        let kinds = (report?["problems"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
        #expect(kinds?.contains("rebuiltManifest") == true, "\(printed)")
        #expect(try SharedCache(directory: path).verify().isClean)
    }
}
