#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform

/// This process's pack segments: the one it appends to, and the descriptors it reads through.
///
/// A segment has one writer at a time, which holds an exclusive flock on it for as long as it
/// may append: an unlocked segment is one nobody writes. A process takes on such a segment
/// that is not full before it makes a new one, so short-lived writers (a command-line tool
/// storing one entry) share segments instead of leaving one each; it appends after everything
/// already there, so no byte is ever written twice. The writer `pwrite`s at an offset it keeps
/// itself (no `O_APPEND`: another process's short write could never land in the middle of its
/// records), and a record becomes an entry only when its journal record names it. Readers
/// copy a record from the segment's mapping (or `pread` it whole) through a descriptor kept
/// open in a small least-recently-used cache.
/// Thread-safe.
package final class PackSegments: Sendable {
    /// A segment is full at this size; the next record starts a new one.
    package static let segmentCapacity: UInt64 = 64 << 20
    /// Descriptors kept open for reading; a process reading more segments reopens some.
    package static let openSegmentLimit = 64

    let directory: CacheDirectory
    /// Whether segments are read through mappings. Not on a network filesystem, where pages
    /// already mapped are not revalidated as a `pread` is: a record another machine appended
    /// could read as damage there, and be journaled as such for every process.
    let mapsSegments: Bool
    private let writer = Locked<ActiveSegment?>(nil)
    private let readers = Locked(OpenSegments())

    package init(directory: CacheDirectory, mapsSegments: Bool = true) {
        self.directory = directory
        self.mapsSegments = mapsSegments
    }

    /// `packs/<16 hex digits>`.
    package static func name(_ pack: UInt64) -> String {
        var digits = [UInt8](repeating: 0, count: 16)
        digits.withUnsafeMutableBytes { writeHexDigits(pack, width: 16, into: $0) }
        return "\(CacheDirectory.packsDirectory)/\(String(decoding: digits, as: UTF8.self))"
    }

    /// The pack a segment's file name names; `nil` for any other name.
    package static func parseName(_ name: String) -> UInt64? {
        guard name.utf8.count == 16, let pack = UInt64(name, radix: 16), pack != 0 else { return nil }
        return pack
    }

    // MARK: Writing

    /// Appends a record holding `header` and `body` to this process's segment and returns its
    /// location. A failed write abandons the segment, so no record ever follows a torn one.
    package func append(_ header: BlobHeader, body: UnsafeRawBufferPointer, durable: Bool) throws -> BodyLocation {
        let length = UInt32(PackRecord.length(headerSize: header.encodedSize, bodySize: body.count))
        return try writer.withLock { active in
            if let current = active, current.end + UInt64(length) > Self.segmentCapacity { active = nil }
            if active == nil {
                active = try ActiveSegment.adopt(in: directory) ?? ActiveSegment.create(in: directory, durable: durable)
            }
            let segment = active!
            let location = BodyLocation(pack: segment.pack, position: segment.end, length: length)
            // One buffer, one pwrite: the record and its padding.
            // Kept whatever its size: a record is at most the pack threshold and a body header.
            segment.encoding.removeAll(keepingCapacityUpTo: .max)
            PackRecord.encode(header, body: body, pack: segment.pack, position: segment.end, into: &segment.encoding)
            do {
                try segment.encoding.withUnsafeBytes {
                    try segment.file.writeAll($0, atAbsoluteOffset: Int64(segment.end))
                }
                if durable { try segment.file.synchronizeData() }
            } catch {
                active = nil
                throw error
            }
            segment.end += UInt64(segment.encoding.count)
            return location
        }
    }

    /// The segment this process appends to, if any: the compactor leaves it alone.
    package var activePack: UInt64? { writer.withLock { $0?.pack } }

    /// Closes the segment this process appends to, which lets go of its lock: the one file
    /// lock a process keeps between calls. The next append takes on a segment again (most
    /// likely this one, unlocked and not full).
    package func finishWriting() {
        writer.withLock { $0 = nil }
    }

    // MARK: Reading

    /// The segment `pack`, open for reading; `nil` when it no longer exists (retired).
    package func open(_ pack: UInt64) throws -> PackFile? {
        if let file = readers.withLock({ $0.file(pack) }) { return file }
        guard let descriptor = try directory.openForRepeatedReading(Self.name(pack)) else {
            return nil
        }
        // A FIFO or a folder planted under a segment's name opens too (the FIFO without
        // blocking), and would fail every read of it with a bare `pread` error.
        let status = try descriptor.status()
        guard status.isRegularFile else { throw SystemError.notRegularFile(Self.name(pack), status) }
        let file = PackFile(pack: pack, file: descriptor, mapped: mapsSegments)
        return readers.withLock { $0.insert(file) }
    }

    /// Closes the descriptors of retired segments (`nil`: of any whose file is gone), so their
    /// space comes back.
    package func close(retired packs: [UInt64]?) {
        readers.withLock { open in
            if let packs {
                for pack in packs { open.remove(pack) }
            } else {
                open.removeAll { (try? $0.file.status().linkCount) == 0 }
            }
        }
    }
}

/// A pack segment open for reading. Immutable; reads are copies from its mapping where there
/// is one, else `pread`s, so any thread may use it, and whoever holds it (a pinned body) keeps
/// the bytes readable after the file is deleted.
package final class PackFile: Sendable {
    package let pack: UInt64
    package let file: FileDescriptor
    /// The segment mapped up to its capacity (a segment only grows, and never past it; under a
    /// limit on address space, up to its size when opened); `nil` where copies from a mapping
    /// are not guarded (see ``GrowingFileMapping``).
    package let mapping: GrowingFileMapping?

    init(pack: UInt64, file: consuming FileDescriptor, mapped: Bool) {
        self.pack = pack
        mapping = mapped ? GrowingFileMapping.map(file, capacity: Int(PackSegments.segmentCapacity)) : nil
        self.file = file
    }
}

/// The segment this process appends to, holding its flock for as long as it is open.
private final class ActiveSegment: @unchecked Sendable {
    // @unchecked: `end` and `encoding` change only under PackSegments' writer mutex.
    let pack: UInt64
    let file: FileDescriptor
    var end: UInt64
    /// Where each record is encoded for its pwrite, kept so that a put allocates no buffer.
    /// (Unchecked: the writer mutex keeps accesses apart, and a put's encode and write are two.)
    @exclusivity(unchecked) var encoding = ByteWriter(capacity: 0)

    private init(pack: UInt64, file: consuming FileDescriptor, end: UInt64) {
        self.pack = pack
        self.file = file
        self.end = end
    }

    /// How many unlocked segments a process tries to take on before it makes a new one.
    private static let adoptionAttempts = 8

    /// Takes on a segment nobody writes that has room, appending after its end (a torn record
    /// a dead writer left there stays unreferenced garbage); `nil` when there is none.
    static func adopt(in directory: CacheDirectory) throws -> ActiveSegment? {
        let names = (try? directory.contents(of: CacheDirectory.packsDirectory)) ?? []
        for name in names.shuffled().prefix(adoptionAttempts) {
            guard let pack = PackSegments.parseName(name),
                let file = try? directory.openIfPresent(PackSegments.name(pack), flags: O_RDWR | O_NONBLOCK),
                let before = try? file.status(), before.isRegularFile,
                UInt64(before.size) >= UInt64(PackRecord.segmentHeaderSize),
                UInt64(before.size) + (1 << 20) < PackSegments.segmentCapacity,
                (try? file.tryLock(.exclusive)) == true
            else { continue }
            // Locked: read the size again (its writer may have appended until it let go), and
            // make sure the compactor did not delete it meanwhile (it deletes under this lock).
            guard let status = try? file.status(), status.linkCount > 0 else { continue }
            return ActiveSegment(pack: pack, file: file, end: PackRecord.next(after: UInt64(status.size), length: 0))
        }
        return nil
    }

    /// Creates a new segment under a fresh name and takes its lock: a name never used before,
    /// so no reader can hold an older file by it.
    static func create(in directory: CacheDirectory, durable: Bool) throws -> ActiveSegment {
        for _ in 0..<4 {
            let pack = UniqueNames.next()
            let name = PackSegments.name(pack)
            let opened: FileDescriptor?
            do {
                opened = try directory.open(name, flags: O_RDWR | O_CREAT | O_EXCL)
            } catch {
                guard error.errno == EEXIST || error.errno == ENOENT else { throw error }
                // ENOENT: `packs/` was removed by hand; EEXIST: try another name.
                if error.errno == ENOENT { try directory.makeDirectory(CacheDirectory.packsDirectory) }
                opened = nil
            }
            guard let file = opened else { continue }
            _ = try file.tryLock(.exclusive)  // a new file: nobody else can hold it
            let header = PackRecord.segmentHeader(pack: pack, createdAt: Clock.nowMilliseconds())
            try header.withUnsafeBytes { try file.writeAll($0, atAbsoluteOffset: 0) }
            if durable {
                try file.synchronizeData()
                try directory.synchronizeDirectory(containing: name)
            }
            return ActiveSegment(pack: pack, file: file, end: UInt64(PackRecord.segmentHeaderSize))
        }
        throw SystemError("open", errno: EEXIST, path: CacheDirectory.packsDirectory)
    }
}

/// The read descriptors, least recently used first out.
private struct OpenSegments {
    private var files: [UInt64: (file: PackFile, lastUse: UInt64)] = [:]
    private var clock: UInt64 = 0

    mutating func file(_ pack: UInt64) -> PackFile? {
        // One hash lookup on every get: the found slot is marked used in place.
        guard let index = files.index(forKey: pack) else { return nil }
        clock += 1
        files.values[index].lastUse = clock
        return files.values[index].file
    }

    /// Keeps `file`, unless another thread opened the same segment first (then that one).
    mutating func insert(_ file: PackFile) -> PackFile {
        if let existing = self.file(file.pack) { return existing }
        if files.count >= PackSegments.openSegmentLimit,
            let oldest = files.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
        {
            files[oldest] = nil
        }
        clock += 1
        files[file.pack] = (file, clock)
        return file
    }

    mutating func remove(_ pack: UInt64) { files[pack] = nil }

    mutating func removeAll(where shouldRemove: (PackFile) -> Bool) {
        files = files.filter { !shouldRemove($0.value.file) }
    }
}

/// A finished pack segment (nobody was writing it), now locked by the caller: while this
/// exists no process can take it on, and the compactor may retire it.
package final class FinishedPack: Sendable {
    package let pack: UInt64
    package let size: Int64
    fileprivate let file: FileDescriptor

    fileprivate init(pack: UInt64, size: Int64, file: consuming FileDescriptor) {
        self.pack = pack
        self.size = size
        self.file = file
    }
}

extension PackSegments {
    // MARK: Scanning

    /// Every pack segment's number, in no particular order.
    package func segments() throws -> [UInt64] {
        try directory.contents(of: CacheDirectory.packsDirectory).compactMap(Self.parseName)
    }

    /// Files in `packs/` that are not pack segments (repair removes them), and segments that
    /// are not yet named by anything: what `verify` reports.
    package func audit(repair: Bool) throws -> [BodyProblem] {
        var problems: [BodyProblem] = []
        for name in try directory.contents(of: CacheDirectory.packsDirectory).sorted() {
            let path = "\(CacheDirectory.packsDirectory)/\(name)"
            guard let status = try directory.status(of: path) else { continue }
            if Self.parseName(name) != nil, status.isRegularFile { continue }
            // A link is never followed, so the records it leads to are lost with it, unless a
            // copy of its target takes its place first.
            let detail =
                Self.parseName(name) != nil && status.isSymbolicLink
                ? "a symbolic link where a pack segment belongs; its entries are misses, and --repair removes it: "
                    + "to keep them, replace it with a copy of the file it points to first"
                : "not a pack segment"
            problems.append(
                try .found(.foreign, at: path, detail, isFolder: status.isDirectory, repair: repair, in: directory))
        }
        return problems
    }

    /// Files named as segments that do not begin with a segment's header: not segments at all
    /// (`verify` reports them, and repairing removes them). Spared: a segment a live entry names
    /// (each record checks itself, and a read never looks at the header), one a writer holds
    /// locked or wrote since `cutoff` (milliseconds since the epoch; it may be making it). Each
    /// is held locked until it is removed, so that no process takes it on meanwhile.
    package func headerless(sparing livePacks: Set<UInt64>, cutoff: Int64, repair: Bool) throws -> [BodyProblem] {
        var problems: [BodyProblem] = []
        for segment in try finished(modifiedBefore: cutoff).sorted(by: { $0.pack < $1.pack })
        where !livePacks.contains(segment.pack) {
            var header = [UInt8](repeating: 0, count: PackRecord.segmentHeaderSize)
            let count = try header.withUnsafeMutableBytes { try segment.file.read(fromAbsoluteOffset: 0, into: $0) }
            guard count < header.count || !header.withUnsafeBytes({ PackRecord.isSegmentHeader($0, of: segment.pack) })
            else { continue }
            problems.append(
                try .found(
                    .foreign, at: Self.name(segment.pack),
                    "named as a pack segment, but it does not begin with one's header", repair: repair, in: directory))
        }
        return problems
    }

    // MARK: Reclaiming

    /// The segments whose writer finished with them (or died) and that were last written
    /// before `cutoff`, each locked: the compactor's candidates for retiring whole. This
    /// process's own segment is never among them.
    package func finished(modifiedBefore cutoff: Int64) throws -> [FinishedPack] {
        let own = activePack
        var found: [FinishedPack] = []
        for pack in try segments() where pack != own {
            guard let file = try openIfFile(pack) else { continue }
            let status = try file.status()
            guard status.isRegularFile, status.modifiedMilliseconds < cutoff, try file.tryLock(.exclusive) else {
                continue
            }
            found.append(FinishedPack(pack: pack, size: status.size, file: file))
        }
        return found
    }

    /// Segment `pack` opened (for writing too: an exclusive lock over NFS takes a descriptor
    /// open for writing); `nil` when it is gone, or something that does not open as a file
    /// there, a link, a folder or a socket, which `verify` reports.
    private func openIfFile(_ pack: UInt64) throws -> FileDescriptor? {
        do {
            return try directory.openIfPresent(Self.name(pack), flags: O_RDWR | O_NONBLOCK)
        } catch where [ELOOP, EISDIR, ENXIO].contains(error.errno) {
            return nil
        }
    }

    /// Deletes a finished segment; the caller journaled its retirement first, so every process
    /// closes its descriptor and the space comes back.
    package func delete(_ pack: FinishedPack) throws {
        try directory.removeFile(Self.name(pack.pack))
        close(retired: [pack.pack])
    }
}
