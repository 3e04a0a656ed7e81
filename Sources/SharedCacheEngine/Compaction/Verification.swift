import SharedCacheFormat
import SharedCachePlatform

/// What ``SharedCache/verify(repair:)`` found.
public struct VerificationReport: Sendable {
    /// One thing wrong with the directory.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// What kind of problem a file has.
        public enum Kind: String, Sendable, Hashable {
            /// The journal has a damaged record that stops readers until a writer truncates it.
            case damagedJournal
            /// An entry's blob is missing.
            case missingBlob
            /// An entry's blob fails a check (header, key, size or body checksum).
            case damagedBlob
            /// A blob file no entry refers to.
            case orphanBlob
            /// A file in `blobs/` that is not a blob (including symbolic links).
            case foreignFile
            /// A leftover in `tmp/` from a writer that died.
            case staleTemporaryFile
            /// The manifest was missing or corrupt and was rebuilt when the cache was opened.
            case rebuiltManifest
        }

        /// What kind of problem this is.
        public var kind: Kind
        /// Relative to the cache directory.
        public var path: String
        /// What was found, for a person.
        public var detail: String
        /// Whether `verify(repair: true)` fixed it.
        public var repaired: Bool

        public var description: String {
            "\(kind.rawValue) \(path): \(detail)\(repaired ? " (repaired)" : "")"
        }
    }

    /// Every problem found, repaired or not.
    public var problems: [Problem]
    /// Entries whose blob was read and checked in full.
    public var entriesChecked: Int
    /// Bytes of bodies read and checked.
    public var bytesChecked: UInt64

    /// Whether nothing is left wrong.
    public var isClean: Bool { problems.allSatisfy(\.repaired) }
}

extension CacheEngine {
    /// A leftover younger than this may belong to a put still in progress, so it is not a problem.
    package static let verificationInFlightAge: Int64 = 60 * 1000

    /// Reconciles the journal, the manifest and the blobs: reads every entry's blob in full and
    /// checks it, and looks for orphaned, foreign and leftover files.
    ///
    /// - Parameter repair: journal the removal of entries whose blob is missing or damaged
    ///   (then unlink it), truncate a damaged journal tail, and delete orphans, foreign files
    ///   and stale temporary files. Files younger than a minute are left alone: a put may be
    ///   in the middle of publishing them.
    package func verify(repair: Bool = false) throws(SharedCacheError) -> VerificationReport {
        try directory.perform("verifying \(path)") {
            var report = VerificationReport(problems: [], entriesChecked: 0, bytesChecked: 0)
            if state.withLock({ $0.statistics.rebuiltOnOpen }) {
                report.problems.append(
                    .init(
                        kind: .rebuiltManifest, path: CacheDirectory.manifestFile,
                        detail: "was missing or corrupt, or its journal was gone; rebuilt when opened", repaired: true))
            }
            // Damage at the end of the journal, looked at with the append lock held, so that no
            // write is in progress: bytes past the last whole record are then a damaged record,
            // a damaged length (which reads as a record still being written) or a torn write,
            // and they hide whatever follows. Repairing, the lock's own catch-up repairs them.
            let repairsBefore = try withState { $0.live.journalRepairs }
            let damagedEnd = try withAppendLock(repairing: repair) { live in
                (try live.hasBytesPastItsRecords(), nil)
            }
            let repaired = try withState { $0.live.journalRepairs } > repairsBefore
            if damagedEnd || repaired {
                report.problems.append(
                    .init(
                        kind: .damagedJournal, path: CacheDirectory.journalDirectory,
                        detail: "a damaged or torn record hides what follows it", repaired: repaired && !damagedEnd))
            }
            // The journal itself is read: the shared journal end lets a refresh skip it for a
            // moment after the last read.
            let (entries, readPastDamage) = try withState { state in
                try state.live.refresh(readingTheJournal: true)
                return (state.live.index, state.live.readPastUnrepairedDamage)
            }
            if readPastDamage {
                // Every process reads past it the same way; a checkpoint puts it behind the
                // manifest, where no process reads any more.
                if repair { try checkpoint() }
                report.problems.append(
                    .init(
                        kind: .damagedJournal, path: CacheDirectory.journalDirectory,
                        detail: "damage took records that every process reads past; the records after them are kept",
                        repaired: repair))
            }
            try verifyRetiredSegments(repair: repair, into: &report)
            for (hash, entry) in entries {
                try verifyEntry(hash, entry, repair: repair, into: &report)
            }
            try verifyFiles(against: entries, repair: repair, into: &report)
            try verifyReserve(repair: repair, into: &report)
            return report
        }
    }

    /// Something other than a file where the full-disk reserve belongs keeps it from being made:
    /// a full disk would then stop the compactor that frees it. Repairing removes a FIFO, link
    /// or empty folder there and makes the reserve (a folder with contents is someone's).
    private func verifyReserve(repair: Bool, into report: inout VerificationReport) throws {
        let name = CacheDirectory.reserveFile
        guard let found = try directory.status(of: name), !found.isRegularFile else { return }
        let removed = repair ? try directory.removeFileOrEmptyFolder(name, isFolder: found.isDirectory) : false
        if removed { directory.keepReserve() }
        report.problems.append(
            .init(
                kind: .foreignFile, path: name,
                detail: "\(found.kindDescription) where the space kept for compacting on a full disk belongs"
                    + (found.isDirectory && !removed ? "; remove the folder" : ""),
                repaired: removed))
    }

    /// Opens every segment older than the one this process reads now: each is sealed and its
    /// records are in this process's index. One that no longer opens (emptied, overwritten, a
    /// FIFO or folder in its place) would stop every compactor that starts from the oldest
    /// segment; repairing checkpoints (so the manifest covers it) and removes it.
    private func verifyRetiredSegments(repair: Bool, into report: inout VerificationReport) throws {
        let current = try withState { $0.live.cursor.segment.generation }
        for generation in try JournalSegment.generations(in: directory) where generation < current {
            let name = JournalSegment.name(generation)
            do {
                _ = try JournalSegment.open(generation, in: directory)
                continue
            } catch let error as SharedCacheError where [.corruptData, .unsafePath].contains(error.code) {
                var repaired = false
                if repair {
                    try checkpoint()
                    if try directory.status(of: name)?.isDirectory == true {
                        try? directory.removeFolder(name)
                    } else {
                        try directory.removeFile(name)
                    }
                    repaired = try directory.status(of: name) == nil
                }
                report.problems.append(
                    .init(
                        kind: .damagedJournal, path: name,
                        detail: "a sealed segment that no longer reads as one; the manifest covers it",
                        repaired: repaired))
            }
        }
    }

    private func verifyEntry(_ hash: KeyHash, _ entry: IndexEntry, repair: Bool, into report: inout VerificationReport)
        throws
    {
        let path = bodies.describe(hash, at: entry.location)
        // The file's own status tells a missing body from a damaged one (a packed one's path
        // names a place in its segment, not a file).
        let file = bodies.file(holding: hash, at: entry.location)
        let problem: VerificationReport.Problem.Kind
        let detail: String
        if let header = try bodies.readHeader(hash, at: entry.location) {
            let result = try bodies.read(
                hash, at: entry.location, key: String(decoding: header.key, as: UTF8.self), expectedSize: entry.bodySize
            )
            switch result {
            case .found:
                report.entriesChecked += 1
                report.bytesChecked += entry.bodySize
                return
            case .missing:
                (problem, detail) = (.missingBlob, "vanished while being verified")
            case .damaged(let reason):
                (problem, detail) = (.damagedBlob, reason)
            }
        } else if try directory.status(of: file) == nil {
            (problem, detail) = (.missingBlob, "the journal records an entry whose blob does not exist")
        } else if try directory.status(of: file)?.isSymbolicLink == true {
            (problem, detail) = (.damagedBlob, "a symbolic link stands where the blob belongs; --repair removes it")
        } else {
            (problem, detail) = (.damagedBlob, "its header is unreadable or fails its checksum")
        }
        if repair {
            try commit { index -> ([JournalRecord], Void) in
                guard index[hash]?.location == entry.location else { return ([], ()) }
                let record = RemovedRecord(hash: hash, location: entry.location, reason: .corrupt, remover: .current)
                return ([.removed(record)], ())
            }
            try bodies.reclaim(hash, at: entry.location)
        }
        report.problems.append(.init(kind: problem, path: path, detail: detail, repaired: repair))
    }

    private func verifyFiles(
        against entries: Index, repair: Bool, into report: inout VerificationReport
    ) throws {
        let inFlightCutoff = now() - Self.verificationInFlightAge
        var livePacks = Set<UInt64>()
        for (_, entry) in entries where entry.location.isPacked { livePacks.insert(entry.location.pack) }
        let problems =
            try bodies.audit(
                isLive: { hash, location in entries[hash]?.location == location }, orphanCutoff: inFlightCutoff,
                repair: repair)
            + bodies.headerlessSegments(sparing: livePacks, cutoff: inFlightCutoff, repair: repair)
        for problem in problems {
            report.problems.append(
                .init(
                    kind: problem.kind == .orphan ? .orphanBlob : .foreignFile, path: problem.path,
                    detail: problem.detail, repaired: problem.removed))
        }
        for name in try directory.contents(of: CacheDirectory.temporaryDirectory).sorted() {
            let path = "\(CacheDirectory.temporaryDirectory)/\(name)"
            guard let status = try directory.status(of: path),
                try status.isDirectory || directory.isLeftover(path, now: now())
            else { continue }
            let removable = !status.isDirectory
            if repair && removable { try directory.removeFile(path) }
            report.problems.append(
                .init(
                    kind: .staleTemporaryFile, path: path, detail: "left by a writer that died",
                    repaired: repair && removable))
        }
    }
}
