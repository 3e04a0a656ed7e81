/// What ``SharedCache/verify(repair:)`` found.
public struct VerificationReport: Sendable {
    /// One thing wrong with the directory.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
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

        public var kind: Kind
        /// Relative to the cache directory.
        public var path: String
        public var detail: String
        /// Whether `verify(repair: true)` fixed it.
        public var repaired: Bool

        public var description: String {
            "\(kind.rawValue) \(path): \(detail)\(repaired ? " (repaired)" : "")"
        }
    }

    public var problems: [Problem]
    /// Entries whose blob was read and checked in full.
    public var entriesChecked: Int
    public var bytesChecked: UInt64

    /// Whether nothing is left wrong.
    public var isClean: Bool { problems.allSatisfy(\.repaired) }
}

extension SharedCache {
    /// A leftover younger than this may belong to a put still in progress, so it is not a problem.
    static let verificationInFlightAge: Int64 = 60 * 1000

    /// Reconciles the journal, the manifest and the blobs: reads every entry's blob in full and
    /// checks it, and looks for orphaned, foreign and leftover files.
    ///
    /// - Parameter repair: journal the removal of entries whose blob is missing or damaged
    ///   (then unlink it), truncate a damaged journal tail, and delete orphans, foreign files
    ///   and stale temporary files. Files younger than a minute are left alone: a put may be
    ///   in the middle of publishing them.
    public func verify(repair: Bool = false) throws(SharedCacheError) -> VerificationReport {
        try directory.perform("verifying \(path)") {
            var report = VerificationReport(problems: [], entriesChecked: 0, bytesChecked: 0)
            if state.withLock({ $0.statistics.rebuiltOnOpen }) {
                report.problems.append(
                    .init(
                        kind: .rebuiltManifest, path: CacheDirectory.manifestFile,
                        detail: "was missing or corrupt; rebuilt from the blobs when opened", repaired: true))
            }
            let (entries, corruptionStops) = try withState { state in
                try state.live.refresh()
                return (state.live.index, state.live.corruptionStops)
            }
            if corruptionStops > 0 {
                if repair { try commit { _ in ([], ()) } }  // appending truncates a damaged tail
                report.problems.append(
                    .init(
                        kind: .damagedJournal, path: CacheDirectory.journalDirectory,
                        detail: "a damaged record hides the records after it", repaired: repair))
            }
            for (hash, entry) in entries {
                try verifyEntry(hash, entry, repair: repair, into: &report)
            }
            try verifyFiles(against: entries, repair: repair, into: &report)
            return report
        }
    }

    private func verifyEntry(_ hash: KeyHash, _ entry: IndexEntry, repair: Bool, into report: inout VerificationReport)
        throws
    {
        let path = BlobStore.path(hash, entry.blobID)
        let problem: VerificationReport.Problem.Kind
        let detail: String
        if let header = try blobs.readHeader(hash, blobID: entry.blobID) {
            let result = try header.key.withUnsafeBytes { key in
                try blobs.read(hash, blobID: entry.blobID, key: key, expectedSize: entry.bodySize)
            }
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
        } else if try directory.status(of: path) == nil {
            (problem, detail) = (.missingBlob, "the journal records an entry whose blob does not exist")
        } else if try directory.status(of: path)?.isSymbolicLink == true {
            (problem, detail) = (.damagedBlob, "a symbolic link stands where the blob belongs; --repair removes it")
        } else {
            (problem, detail) = (.damagedBlob, "its header is unreadable or fails its checksum")
        }
        if repair {
            try commit { index -> ([JournalRecord], Void) in
                guard index[hash]?.blobID == entry.blobID else { return ([], ()) }
                let record = RemovedRecord(hash: hash, blobID: entry.blobID, reason: .corrupt, remover: .current)
                return ([.removed(record)], ())
            }
            try blobs.remove(hash, blobID: entry.blobID)
        }
        report.problems.append(.init(kind: problem, path: path, detail: detail, repaired: repair))
    }

    private func verifyFiles(
        against entries: Index, repair: Bool, into report: inout VerificationReport
    ) throws {
        let inFlightCutoff = Clock.nowMilliseconds() - Self.verificationInFlightAge
        func note(_ kind: VerificationReport.Problem.Kind, _ path: String, _ detail: String, removable: Bool) throws {
            if repair && removable { try directory.removeFile(path) }
            report.problems.append(.init(kind: kind, path: path, detail: detail, repaired: repair && removable))
        }
        let blobsDirectory = CacheDirectory.blobsDirectory
        for fanOut in try directory.contents(of: blobsDirectory).sorted() {
            let folder = "\(blobsDirectory)/\(fanOut)"
            guard let status = try directory.status(of: folder) else { continue }
            guard status.isDirectory, fanOut.utf8.count == 2, UInt8(fanOut, radix: 16) != nil else {
                try note(.foreignFile, folder, "not a blob fan-out directory", removable: !status.isDirectory)
                continue
            }
            for name in try directory.contents(of: folder).sorted() {
                let path = "\(folder)/\(name)"
                guard let status = try directory.status(of: path) else { continue }
                // A link named like a live entry's blob is reported by that entry's check.
                if status.isSymbolicLink, let (hash, blobID) = BlobStore.parseName(name),
                    entries[hash]?.blobID == blobID
                {
                    continue
                }
                guard status.isRegularFile, let (hash, blobID) = BlobStore.parseName(name),
                    hash.fanOut == UInt8(fanOut, radix: 16)
                else {
                    try note(.foreignFile, path, "not a blob file", removable: !status.isDirectory)
                    continue
                }
                guard entries[hash]?.blobID != blobID, status.modifiedMilliseconds < inFlightCutoff else { continue }
                try note(.orphanBlob, path, "no entry refers to it", removable: true)
            }
        }
        for name in try directory.contents(of: CacheDirectory.temporaryDirectory).sorted() {
            let path = "\(CacheDirectory.temporaryDirectory)/\(name)"
            guard let status = try directory.status(of: path),
                status.modifiedMilliseconds < Clock.nowMilliseconds() - Self.temporaryFileGracePeriod
            else { continue }
            try note(.staleTemporaryFile, path, "left by a writer that died", removable: !status.isDirectory)
        }
    }
}
