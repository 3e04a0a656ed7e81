package import Foundation
package import SharedCacheFormat
package import SharedCachePlatform

/// Where entry bodies live: the one place that decides it.
///
/// A write returns a ``BodyLocation``, which the caller journals; from then on the index and
/// every caller name the body by that location and this store alone knows what it means (in
/// format version 1, a blob file of its own). Bodies are immutable once written: a location is
/// never rewritten or reused, so whoever read one reads the same bytes. Implementations are
/// thread-safe.
package protocol BodyStore: Sendable {
    /// Writes a body after its header, returning where it went; the caller journals that.
    ///
    /// - Parameter durable: flush the body (and the directory entry naming it) before returning.
    func write(_ header: BlobHeader, body: UnsafeRawBufferPointer, durable: Bool) throws -> BodyLocation

    /// Reads and checks a whole body: header, key, size and body checksum.
    ///
    /// - Parameters:
    ///   - key: the key the caller asked for; a body stored for any other key is damaged.
    ///   - expectedSize: the body size the index recorded.
    func read(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64) throws -> BodyRead

    /// Writes a body streamed from `read`, a chunk at a time, after its header; runs of zeros
    /// stay holes. Returns where it went and the finished header (size and checksum filled
    /// in); the caller journals that. Nothing is published unless the whole body was written.
    ///
    /// - Parameter publishing: asked once, when the body has ended: `false` publishes nothing
    ///   and hands the body back instead (``Publication/unpublished(_:)``), for a caller that
    ///   learned while the body arrived that it is not to be stored, but must still serve it.
    func write(
        _ header: BlobHeader, durable: Bool, publishing: () -> Bool,
        readingBody read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
    ) throws -> Publication<(BodyLocation, BlobHeader)>

    /// Reads a body a chunk at a time, handing each piece and its offset to `body` (`nil` to
    /// only check it), and checks the whole against its checksum: a body of any size in a
    /// megabyte of memory. `body` sees bytes before the checksum is known, so a caller that
    /// must not act on a damaged body writes where it can take them back, or checks first.
    func stream(
        _ hash: KeyHash, at location: BodyLocation, key: [UInt8], expectedSize: UInt64,
        into body: ((BodyPiece, Int64) throws -> Void)?
    ) throws -> BodyStream

    /// Holds a body so that it stays readable whoever removes its entry meanwhile, and checks
    /// its header: what the HTTP client holds while a conditional request is in flight. `nil`
    /// when the body is gone or its header is wrong.
    func pin(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64) throws
        -> (any PinnedBody, BlobHeader)?

    /// Reads and checks only the header (metadata, listing); `nil` when missing or damaged.
    func readHeader(_ hash: KeyHash, at location: BodyLocation) throws -> BlobHeader?

    /// Gives back the space of a body no entry refers to any more. The caller journaled its
    /// removal first; a body already gone is fine.
    func reclaim(_ hash: KeyHash, at location: BodyLocation) throws

    /// Calls `visit` with every stored body whose header checks out and that is live unless
    /// the journal says otherwise: the recovery of a lost manifest. (Packed bodies are not:
    /// their records outlive their entries.)
    func forEachBody(_ visit: (KeyHash, BodyLocation, BlobHeader) throws -> Void) throws

    /// Finds what the store holds that is not a live body: bodies no entry refers to (once
    /// older than `orphanCutoff`, milliseconds since the epoch, so a put between writing and
    /// journaling is left alone) and files that are not the store's at all.
    ///
    /// - Parameter repair: remove what is found (foreign folders are reported, never removed).
    func audit(isLive: (KeyHash, BodyLocation) -> Bool, orphanCutoff: Int64, repair: Bool) throws -> [BodyProblem]

    /// Where a body is, for a person: a path relative to the cache directory.
    func describe(_ hash: KeyHash, at location: BodyLocation) -> String

    /// The file that holds a body, relative to the cache directory: its blob, or its pack
    /// segment.
    func file(holding hash: KeyHash, at location: BodyLocation) -> String

    /// The finished pack segments (nobody is writing them), last written before `cutoff`
    /// (milliseconds since the epoch), each held locked for the caller: candidates for
    /// retiring whole once no entry refers to them.
    func finishedPacks(modifiedBefore cutoff: Int64) throws -> [FinishedPack]

    /// Copies a packed body, checked whole, to a new record in this process's own segment;
    /// `nil` when it is missing or damaged. The caller journals the move.
    func copy(_ hash: KeyHash, at location: BodyLocation, durable: Bool) throws -> BodyLocation?

    /// Deletes a finished segment whose retirement the caller journaled.
    func delete(_ pack: FinishedPack) throws

    /// Closes what the store holds open of retired segments (`nil`: of any that are gone).
    func close(retired packs: [UInt64]?)

    /// Lets go of the segment this process appends to, and so of its lock; the next put takes
    /// on a segment again.
    func finishWriting()

    /// Files named as pack segments that are not (see ``PackSegments/headerless(sparing:cutoff:repair:)``).
    func headerlessSegments(sparing livePacks: Set<UInt64>, cutoff: Int64, repair: Bool) throws -> [BodyProblem]
}

extension BodyStore {
    // A store without segments (blob files only) has none to retire.
    package func finishedPacks(modifiedBefore cutoff: Int64) throws -> [FinishedPack] { [] }
    package func copy(_ hash: KeyHash, at location: BodyLocation, durable: Bool) throws -> BodyLocation? { nil }
    package func delete(_ pack: FinishedPack) throws {}
    package func close(retired packs: [UInt64]?) {}
    package func finishWriting() {}
    package func headerlessSegments(sparing livePacks: Set<UInt64>, cutoff: Int64, repair: Bool) -> [BodyProblem] {
        []
    }
}

/// What reading a body found.
package enum BodyRead {
    /// The body, with its entry under the key the caller asked with.
    case found(CacheHit)
    /// Not there (its entry was removed a moment ago by another process): a plain miss.
    case missing
    /// There, but failing its checks; the caller journals its removal.
    case damaged(String)
}

/// A step of a body streamed in: bytes in the buffer, a run of zeros known without reading
/// them (a hole of a sparse file), or the end.
package enum StreamedChunk: Equatable {
    case bytes(Int)
    case zeros(Int64)
    case end
}

/// What a streamed write or store that may be told not to publish (`publishing:`) did with its
/// body; one shape at each layer it passes: the body store's (where the body went, and its
/// finished header), the engine's (the version journaled), the HTTP store's (the response
/// stored).
package enum Publication<Stored> {
    /// Published and, past the body store, journaled; what the layer says of it.
    case stored(Stored)
    /// Not published, as the writer was told: nothing of it is left as a file of the cache or
    /// in the journal, and this is the whole body. Past the pack threshold it is mapped from
    /// the file it was written to, which has no name any more, so its space goes back when the
    /// `Data` (and every copy of it) is gone; a smaller one is in memory.
    case unpublished(Data)

    /// The same outcome, with `transform` applied to what was stored.
    package func map<Other>(_ transform: (Stored) throws -> Other) rethrows -> Publication<Other> {
        switch self {
        case .stored(let stored): .stored(try transform(stored))
        case .unpublished(let body): .unpublished(body)
        }
    }
}

extension Publication: Sendable where Stored: Sendable {}

/// A piece of a body streamed out, at its offset in the body.
package enum BodyPiece {
    case bytes(UnsafeRawBufferPointer)
    /// This many zeros, from a hole in the stored file: never read.
    case zeros(Int64)
}

/// What streaming a body out found.
package enum BodyStream {
    /// Every piece was handed on, and together they match the checksum.
    case intact(BlobHeader)
    /// Not there: a plain miss.
    case missing
    /// There, but failing its checks (possibly after some pieces were handed on).
    case damaged(String)
}

/// A body held readable, whoever removes its entry. Immutable; any thread may read it.
package protocol PinnedBody: AnyObject, Sendable {
    /// Reads and checks the whole body, as ``BodyStore/read(_:at:key:expectedSize:)`` does.
    func read() throws -> BodyRead

    /// Reads the body from its start into the buffers it is given, as a streamed write
    /// (``BodyStore/write(_:durable:publishing:readingBody:)``) reads its body: for copying a large body
    /// without holding it in memory. The read that reaches the end throws ``BodyDamage`` if
    /// what was read does not match the body's checksum, so no copy of a damaged body is ever
    /// published.
    func reader() -> (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
}

/// A pinned body failed its checks while it was copied.
package struct BodyDamage: Error, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
}

extension PinnedBody {
    /// Reads the whole body at once (a packed body is small), then hands it out.
    package func reader() -> (UnsafeMutableRawBufferPointer) throws -> StreamedChunk {
        var body: Data?
        var offset = 0
        return { buffer in
            if body == nil {
                guard case .found(let hit) = try self.read() else { throw BodyDamage(reason: "gone or damaged") }
                body = hit.data
            }
            guard let body, offset < body.count else { return .end }
            let count = min(buffer.count, body.count - offset)
            body.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + count]))
            }
            offset += count
            return .bytes(count)
        }
    }
}

/// Something in the store that is not a live body.
package struct BodyProblem: Sendable {
    package enum Kind: Sendable, Hashable {
        /// A body no entry refers to (left by a killed writer).
        case orphan
        /// A file or folder that is not the store's (a symbolic link included).
        case foreign
    }

    package var kind: Kind
    /// The body, for an orphan.
    package var orphan: (hash: KeyHash, location: BodyLocation)?
    /// Relative to the cache directory.
    package var path: String
    package var detail: String
    /// Whether the audit removed it.
    package var removed: Bool
}

extension BodyProblem {
    /// What an audit found at `path`, removed when `repair` asks and it may go: a file, or an
    /// empty folder planted where a file belongs. A folder with contents is someone's; it stays,
    /// reported with what to do.
    package static func found(
        _ kind: Kind, at path: String, _ detail: String, isFolder: Bool = false,
        orphan: (hash: KeyHash, location: BodyLocation)? = nil, repair: Bool, in directory: CacheDirectory
    ) throws -> BodyProblem {
        let removed = repair ? try directory.removeFileOrEmptyFolder(path, isFolder: isFolder) : false
        return BodyProblem(
            kind: kind, orphan: orphan, path: path,
            detail: isFolder && !removed ? "\(detail); remove the folder" : detail, removed: removed)
    }
}

extension CacheDirectory {
    /// Removes the file at `path`, or the folder there if `isFolder` and it is empty; whether it
    /// went (a folder with contents stays).
    package func removeFileOrEmptyFolder(_ path: String, isFolder: Bool) throws -> Bool {
        guard isFolder else {
            try removeFile(path)
            return true
        }
        return (try? removeFolder(path)) != nil
    }
}
