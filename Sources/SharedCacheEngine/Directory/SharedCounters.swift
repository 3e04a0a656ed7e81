#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
import SharedCachePlatform

/// Activity counters every process of a directory adds to: `<root>/stats`, mapped shared.
///
/// ```
/// stats   = "SCST" major:u16 minor:u16 created-at:i64 reserved:16 counter*   ; 4096 bytes
/// counter = u64 at offset 32 + 8 × slot                 ; host byte order, atomically updated
/// ```
/// Each process maps the file with `MAP_SHARED` and bumps counters with atomic adds: no lock
/// and no system call per hit. A count is exact except that a process killed between an
/// operation and its increment loses that one increment, and that the file is local to the
/// machine (its byte order is the host's; it is not part of what a backup needs).
package final class SharedCounters: @unchecked Sendable {
    /// Where each counter lives. New slots are added at the end; a slot is never reused.
    package enum Slot: Int, CaseIterable {
        case hits = 0
        case misses = 1
        case stores = 2
        case revalidations = 3
        case downloads = 4
        case compactions = 5
        case lastCompactionAt = 6
        case withheldValidators = 7
        case unconditionalRetries = 8
        /// The highest journal sequence number any process has appended (raised atomically
        /// after each append): a reader whose index has applied it has nothing new to read,
        /// and learns that from one load instead of a size check of the journal.
        case journalSequence = 9
        /// Removals by reason: `removalsBase + reason.rawValue` (1...7).
        case removalsBase = 16
    }

    package static let size = 4096
    private static let magic: [UInt8] = Array("SCST".utf8)
    private static let countersOffset = 32

    private let mapping: SharedMapping
    private var memory: UnsafeMutableRawPointer { mapping.address }

    /// Maps `<root>/stats`, creating it if needed and `creating`; `nil` if it is not a stats
    /// file (a foreign file in its place): the cache then works without shared counters.
    static func open(in directory: CacheDirectory, creating: Bool = true) -> SharedCounters? {
        let flags = O_RDWR | O_NONBLOCK | (creating ? O_CREAT : 0)
        guard let file = try? directory.open(CacheDirectory.statsFile, flags: flags) else { return nil }
        guard let status = try? file.status(), status.isRegularFile else { return nil }
        // Extending with zeros is idempotent, so racing creators agree. Mapping past the end of
        // a shorter file would fault on first touch (SIGBUS): without the full size, no counters.
        if status.size < Int64(size) {
            try? file.truncate(to: Int64(size))
            guard let extended = try? file.status(), extended.size >= Int64(size) else { return nil }
        }
        guard let mapping = try? file.mapShared(size: size) else { return nil }
        let header = UnsafeMutableRawBufferPointer(start: mapping.address, count: 16)
        if header.prefix(4).allSatisfy({ $0 == 0 }) {
            // A new file: write the header, the creation time first and then the magic and
            // version as one atomic word, so that a process opening it meanwhile finds either no
            // magic yet (and writes the same word) or all of it, never part of it (which read as
            // a foreign file, and left that process without counters). Two creators' times
            // differ by microseconds; the later one stays.
            var writer = ByteWriter(capacity: 8)
            writer.append(bytes: magic)
            writer.append(UInt16(1))
            writer.append(UInt16(0))
            let word = writer.bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            mapping.raise(to: UInt64(bitPattern: Clock.nowMilliseconds().littleEndian), atOffset: 8)
            mapping.raise(to: word, atOffset: 0)
        }
        guard header.prefix(4).elementsEqual(magic) else { return nil }
        return SharedCounters(mapping: mapping, file: status)
    }

    /// The file mapped: a `stats` deleted and made anew is another file, which other processes
    /// read while this one's counts go nowhere.
    private let device: UInt64
    private let inode: UInt64

    private init(mapping: SharedMapping, file: FileStatus) {
        self.mapping = mapping
        (device, inode) = (file.device, file.inode)
    }

    private func offset(_ slot: Int) -> Int { Self.countersOffset + 8 * slot }

    /// Whether `stats` was cut short under this process, whose counts from then on go nowhere
    /// and whose reads find zeros: it goes on as a process without counters does until its
    /// live index maps `stats` again, at its next look at the journal.
    package var isLost: Bool { mapping.isLost }

    /// Whether these are still the counters every process reads: not lost, and `stats` is the
    /// file mapped (one `fstatat`).
    func areShared(in directory: CacheDirectory) -> Bool {
        guard !isLost, let status = try? directory.status(of: CacheDirectory.statsFile) else { return false }
        return status.device == device && status.inode == inode
    }

    package func add(_ slot: Slot, _ value: UInt64 = 1) {
        mapping.add(value, atOffset: offset(slot.rawValue))
    }

    package func addRemovals(_ reason: RemovalReason, _ value: UInt64 = 1) {
        mapping.add(value, atOffset: offset(Slot.removalsBase.rawValue + Int(reason.rawValue % 16)))
    }

    package func raise(_ slot: Slot, to value: UInt64) {
        mapping.raise(to: value, atOffset: offset(slot.rawValue))
    }

    package func value(_ slot: Slot) -> UInt64 { mapping.load(atOffset: offset(slot.rawValue)) }

    package func removals(_ reason: RemovalReason) -> UInt64 {
        mapping.load(atOffset: offset(Slot.removalsBase.rawValue + Int(reason.rawValue % 16)))
    }

    /// When the counters started, in milliseconds since the epoch.
    package var createdAt: Int64 { Int64(littleEndian: memory.loadUnaligned(fromByteOffset: 8, as: Int64.self)) }
}
