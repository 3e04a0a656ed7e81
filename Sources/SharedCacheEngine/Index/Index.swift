package import SharedCacheFormat
import SharedCachePlatform

/// The live entries of a cache directory: the manifest with the journal replayed over it.
///
/// Entries sit densely in one array (72 bytes each); an open-addressing table of 64-bit slots,
/// at most half full, finds them by hash. A million entries cost about 89 MB, where a
/// `Dictionary` rounds up to 2^21 buckets of 72 bytes (151 MB). Removal moves the last entry
/// into the hole, so iteration order is arbitrary, as a dictionary's is.
///
/// A value type: a checkpoint snapshots it by copying (copy-on-write) and encodes the copy
/// while appends carry on.
package struct Index: Sendable, Sequence {
    package typealias Element = (hash: KeyHash, entry: IndexEntry)

    private var elements: ContiguousArray<Element> = []
    /// 0 for an empty slot, else the element's position + 1 in the low 32 bits and its tag (see
    /// ``tag(_:)``) above them. Linear probing. A probe compares tags, and a member's home slot
    /// comes from its tag, so only a match touches an element: at a million entries, each
    /// touch is a cache miss.
    private var slots = ContiguousArray<UInt64>(repeating: 0, count: 16)
    /// Sum of the body sizes of all entries.
    package private(set) var totalBytes: UInt64 = 0
    /// What ``stamp()`` returns until the next change; 0 when a change made it stale.
    private var currentStamp: UInt64 = 0

    /// Mixed into every hash: keys are chosen by callers (URLs), so the slot a key lands in
    /// must not be predictable, or a few thousand ground keys could turn lookups linear.
    private static let seed = UInt64.random(in: .min ... .max)

    package init() {}

    /// A number that names these contents: no other contents of an index in this process had
    /// it. A caller that keeps it beside what it read can later tell, from the stamp alone,
    /// that the index has not changed since (the memory tier serves a copy without a lookup).
    package mutating func stamp() -> UInt64 {
        if currentStamp == 0 {
            currentStamp = Self.lastStamp.withLock { last in
                last += 1
                return last
            }
        }
        return currentStamp
    }

    /// The last stamp given to any index of the process.
    private static let lastStamp = Locked<UInt64>(0)

    package var count: Int { elements.count }
    package var isEmpty: Bool { elements.isEmpty }

    package func makeIterator() -> ContiguousArray<Element>.Iterator { elements.makeIterator() }

    package subscript(hash: KeyHash) -> IndexEntry? {
        find(hash).position.map { elements[$0].entry }
    }

    /// Makes room for `count` entries, and for `headroom` more in the array of entries alone:
    /// an array that outgrows its buffer is copied whole into a larger one, which for a moment
    /// holds both (176 MB at a million entries). Untouched, the headroom costs no memory.
    package mutating func reserveCapacity(_ count: Int, headroom: Int = 0) {
        elements.reserveCapacity(count + headroom)
        if Self.slotCount(for: count) > slots.count { rebuildSlots(count: Self.slotCount(for: count)) }
    }

    /// Makes `entry` the current version for `hash`, replacing any other; returns the one it
    /// replaced.
    @discardableResult
    package mutating func insert(_ entry: IndexEntry, for hash: KeyHash) -> IndexEntry? {
        currentStamp = 0
        let (slot, position) = find(hash)
        if let position {
            let replaced = elements[position].entry
            totalBytes = totalBytes - replaced.bodySize + entry.bodySize
            elements[position].entry = entry
            return replaced
        }
        guard elements.count < Int(ManifestCoding.maximumEntryCount) else {
            preconditionFailure("an index holds at most 2^31 entries")
        }
        elements.append((hash, entry))
        slots[slot] = Self.slot(tag: Self.tag(hash), position: elements.count - 1)
        totalBytes += entry.bodySize
        if Self.slotCount(for: elements.count) > slots.count { rebuildSlots(count: slots.count * 2) }
        return nil
    }

    /// Inserts `entries` in order, as ``insert(_:for:)`` does; for many at once (a manifest's,
    /// on open). A million entries' slots are a table far larger than the caches, where every
    /// lookup misses: each one's slot is requested a few entries ahead, so that the misses
    /// overlap.
    package mutating func insert(contentsOf entries: [Element]) {
        let lookahead = 8
        for index in entries.indices {
            if index + lookahead < entries.count {
                let slot = home(Self.tag(entries[index + lookahead].hash))
                slots.withUnsafeBufferPointer { prefetchForWriting($0.baseAddress! + slot) }
            }
            insert(entries[index].entry, for: entries[index].hash)
        }
    }

    /// Removes the entry for `hash` if its current version is at `location`.
    @discardableResult
    package mutating func remove(_ hash: KeyHash, at location: BodyLocation) -> IndexEntry? {
        let (slot, found) = find(hash)
        guard let position = found, elements[position].entry.location == location else { return nil }
        currentStamp = 0
        let removed = elements[position].entry
        vacate(slot)
        let last = elements.count - 1
        if position != last {
            // The last element moves into the hole: repoint its slot first.
            let moved = find(elements[last].hash).slot
            slots[moved] = Self.slot(tag: Self.tag(of: slots[moved]), position: position)
            elements.swapAt(position, last)
        }
        elements.removeLast()
        totalBytes -= removed.bodySize
        return removed
    }

    package mutating func removeAll() {
        currentStamp = 0
        elements.removeAll()
        slots = ContiguousArray(repeating: 0, count: 16)
        totalBytes = 0
    }

    /// Updates the entry for `hash` in place, if there is one.
    package mutating func modify(_ hash: KeyHash, _ body: (inout IndexEntry) -> Void) {
        guard let position = find(hash).position else { return }
        currentStamp = 0
        body(&elements[position].entry)
    }

    /// Folds one journal record into the index; returns the version a stored record replaced.
    @discardableResult
    package mutating func apply(_ record: JournalRecord) -> IndexEntry? {
        switch record {
        case .stored(let stored):
            return insert(
                IndexEntry(
                    location: stored.location, bodySize: stored.bodySize, storedAt: stored.storedAt,
                    expiresAt: stored.expiresAt, lastAccess: stored.storedAt),
                for: stored.hash)
        case .removed(let removed):
            remove(removed.hash, at: removed.location)
        case .cleared:
            removeAll()
        case .accessed(let accessed):
            modify(accessed.hash) { entry in
                guard entry.location == accessed.location else { return }
                entry.lastAccess = Swift.max(entry.lastAccess, accessed.accessedAt)
            }
        case .freshened(let freshened):
            modify(freshened.hash) { entry in
                guard entry.location == freshened.location else { return }
                entry.storedAt = freshened.storedAt
                entry.expiresAt = freshened.expiresAt
                entry.lastAccess = Swift.max(entry.lastAccess, freshened.storedAt)
            }
        case .moved(let moved):
            modify(moved.hash) { entry in
                guard entry.location == moved.from else { return }
                entry.location = moved.to
            }
        case .sealed, .retired, .lost, .unknown:
            break
        }
        return nil
    }

    // MARK: The slot table

    /// Slots for `count` elements: a power of two at least twice the count.
    private static func slotCount(for count: Int) -> Int {
        Swift.max(16, (2 * count).nextPowerOfTwo)
    }

    private var mask: Int { slots.count - 1 }

    /// The top 32 bits of `hash` mixed with the seed. Fibonacci hashing: the multiply carries
    /// every input bit into the top bits.
    private static func tag(_ hash: KeyHash) -> UInt32 {
        UInt32(truncatingIfNeeded: ((hash.tableBits ^ seed) &* 0x9E37_79B9_7F4A_7C15) >> 32)
    }

    private static func slot(tag: UInt32, position: Int) -> UInt64 { UInt64(tag) << 32 | UInt64(position + 1) }
    private static func tag(of slot: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: slot >> 32) }
    private static func position(of slot: UInt64) -> Int { Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1 }

    /// The slot a tag's probe run starts at: its top bits.
    private func home(_ tag: UInt32) -> Int {
        Int(truncatingIfNeeded: tag >> UInt32(32 - slots.count.trailingZeroBitCount))
    }

    /// The slot that holds `hash`, or the empty slot where it would go.
    private func find(_ hash: KeyHash) -> (slot: Int, position: Int?) {
        let tag = Self.tag(hash)
        var slot = home(tag)
        while true {
            let value = slots[slot]
            if value == 0 { return (slot, nil) }
            if Self.tag(of: value) == tag, elements[Self.position(of: value)].hash == hash {
                return (slot, Self.position(of: value))
            }
            slot = (slot + 1) & mask
        }
    }

    /// Empties `slot`, shifting later members of its probe run back so no lookup stops early
    /// (deletion without tombstones).
    private mutating func vacate(_ slot: Int) {
        var hole = slot
        var next = (slot + 1) & mask
        while slots[next] != 0 {
            let home = home(Self.tag(of: slots[next]))
            // Move the member back unless its home lies cyclically after the hole.
            if (next - home) & mask >= (next - hole) & mask {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = 0
    }

    private mutating func rebuildSlots(count: Int) {
        let old = slots
        slots = ContiguousArray(repeating: 0, count: count)
        for value in old where value != 0 {
            var slot = home(Self.tag(of: value))
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = value
        }
    }
}

extension Int {
    /// The smallest power of two at or above `self` (for `self` ≥ 1).
    fileprivate var nextPowerOfTwo: Int { self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount) }
}
