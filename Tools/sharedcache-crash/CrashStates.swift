import SharedCacheCLI
import SharedCacheTestSupport

/// What a power loss may leave of the calls a workload made: which persistence model.
enum Model: String, CaseIterable, Sendable {
    /// Every call up to the crash, none after: what killing the process leaves.
    case prefix
    /// ext4 with `data=ordered` and delayed allocation: calls on names (and sizes set by
    /// `ftruncate`) reach the disk as an in-order prefix, and any fsync commits every one
    /// before it; a file's data reaches it as a prefix of its writes since its last fsync,
    /// cut at a page, late or never; a rename over an existing file brings the renamed file's
    /// data with it (`auto_da_alloc`), a rename without replacing does not.
    case ext4 = "ext4-ordered"
    /// ALICE's default and APFS under plain fsync: any call not yet made durable may be lost,
    /// whatever was kept after it; a write may land torn (its length without all its data:
    /// zeros or garbage past the cut). A file's fsync makes its data durable, a directory's
    /// fsync the names in it; renames are atomic.
    case weak
}

/// One state a power loss may leave: the calls before `point` were made, and all of them
/// reached the disk except `dropped`; `tear` cut one of them short.
struct CrashState: Hashable {
    var point: Int
    var dropped: [Int]
    var tear: Tear?

    struct Tear: Hashable {
        var index: Int
        var kind: Image.Tear
    }

    func image(of recording: Recording) -> Image {
        var image = recording.base
        let dropped = Set(dropped)
        for index in 0..<point where !dropped.contains(index) {
            image.apply(recording.operations[index], tear: tear?.index == index ? tear?.kind : nil)
        }
        return image
    }

    /// Whether the state loses or tears an operation on a path containing `fragment`.
    func loses(_ fragment: String, of recording: Recording) -> Bool {
        (dropped + (tear.map { [$0.index] } ?? [])).contains { index in
            recording.paths(of: recording.operations[index]).contains { $0.contains(fragment) }
        }
    }

    func describe(_ recording: Recording) -> String {
        var lines = ["crashed before operation \(point) of \(recording.operations.count)"]
        if let last = recording.operations[..<point].lastIndex(where: { !$0.isNote }) {
            lines.append("  last made: [\(last)] \(recording.operations[last])")
        }
        func named(_ index: Int) -> String {
            let operation = recording.operations[index]
            guard case .write = operation, let names = recording.names[inodeOf(operation)] else {
                return "\(operation)"
            }
            return "\(operation) \(names.sorted().joined(separator: ", "))"
        }
        for index in dropped { lines.append("  lost: [\(index)] \(named(index))") }
        if let tear { lines.append("  torn (\(tear.kind)): [\(tear.index)] \(named(tear.index))") }
        return lines.joined(separator: "\n")
    }
}

/// Enumerates the crash states of a recording under a model, following §6.3 of the research
/// note: crash points everywhere, deviations only among calls no barrier made durable yet,
/// one deviation at a time plus all-lost, a few seeded random mixes per point, duplicates
/// (same directory, same acknowledgements seen) removed.
struct CrashStateGenerator {
    let recording: Recording
    let model: Model
    /// Random mixes added per crash point (beyond the systematic ones).
    let randomPerPoint: Int

    /// For each operation, the first barrier after it that makes it durable under the model;
    /// `Int.max` if none does, the operation's own index if it is never lost.
    private let durableAt: [Int]

    init(recording: Recording, model: Model, randomPerPoint: Int) {
        self.recording = recording
        self.model = model
        self.randomPerPoint = randomPerPoint
        let operations = recording.operations
        var durableAt = [Int](repeating: Int.max, count: operations.count)
        for (index, operation) in operations.enumerated() {
            switch operation {
            case .note, .synchronizeFile, .synchronizeDirectory, .makeDirectory, .removeDirectory:
                durableAt[index] = index  // nothing to lose, or (directories) kept for simplicity
                continue
            default: break
            }
            for later in (index + 1)..<max(index + 1, operations.count)
            where Self.covers(operations[later], operation, model) {
                durableAt[index] = later
                break
            }
        }
        self.durableAt = durableAt
    }

    /// Whether the barrier `barrier` makes `operation` (made before it) durable.
    private static func covers(_ barrier: Operation, _ operation: Operation, _ model: Model) -> Bool {
        switch (model, barrier, operation) {
        case (.prefix, _, _):
            return false
        case (.ext4, .synchronizeFile(let synced, _), .write(let inode, _, _)):
            return synced == inode
        case (.ext4, .synchronizeFile, _), (.ext4, .synchronizeDirectory, _):
            // Any fsync commits the journal transaction, holding every earlier name change.
            return !operation.isData
        case (.weak, .synchronizeFile(let synced, _), .write(let inode, _, _)),
            (.weak, .synchronizeFile(let synced, _), .truncate(let inode, _)):
            return synced == inode
        case (.weak, .synchronizeDirectory(let directory), .create(let path, _)),
            (.weak, .synchronizeDirectory(let directory), .unlink(let path)),
            (.weak, .synchronizeDirectory(let directory), .rename(_, let path, _, _)),
            (.weak, .synchronizeDirectory(let directory), .link(_, let path, _)):
            return parentDirectory(path) == directory
        default:
            return false
        }
    }

    /// Every state, in a fixed order (so that a seed and an index name one), without duplicates.
    func states(seed: UInt64) -> [CrashState] {
        var random = SplitMix64(seed: seed)
        var seen = Set<[Int]>()
        var states: [CrashState] = []
        let operations = recording.operations
        var notesSeen = 0
        for point in 0...operations.count {
            if point > 0, operations[point - 1].isNote { notesSeen += 1 }
            for state in candidates(at: point, random: &random) {
                let normalised = model == .ext4 ? allocateOnReplace(state) : state
                guard seen.insert([notesSeen, normalised.image(of: recording).fingerprint]).inserted else { continue }
                states.append(normalised)
            }
        }
        return states
    }

    private func candidates(at point: Int, random: inout SplitMix64) -> [CrashState] {
        let full = CrashState(point: point, dropped: [], tear: nil)
        guard model != .prefix else { return [full] }
        let operations = recording.operations
        let pending = (0..<point).filter { durableAt[$0] >= point }
        var states = [full]
        guard !pending.isEmpty else { return states }
        states.append(CrashState(point: point, dropped: pending, tear: nil))
        switch model {
        case .prefix:
            break
        case .ext4:
            let metadata = pending.filter { !operations[$0].isData }
            let data = pending.filter { operations[$0].isData }
            var writesByInode: [Int: [Int]] = [:]
            for index in data {
                if case .write(let inode, _, _) = operations[index] { writesByInode[inode, default: []].append(index) }
            }
            // Name changes as an in-order prefix, with all or none of the pending data.
            for cut in metadata.indices {
                states.append(CrashState(point: point, dropped: Array(metadata[cut...]), tear: nil))
                states.append(CrashState(point: point, dropped: (Array(metadata[cut...]) + data).sorted(), tear: nil))
            }
            states.append(CrashState(point: point, dropped: data, tear: nil))
            // Two deviations: the names cut before a rename or unlink (the steps that publish
            // or retire), and one file's pending data lost while every other file's arrived.
            for cut in metadata.indices {
                switch operations[metadata[cut]] {
                case .rename, .unlink: break
                default: continue
                }
                for (_, writes) in writesByInode.sorted(by: { $0.key < $1.key }) {
                    states.append(
                        CrashState(point: point, dropped: (Array(metadata[cut...]) + writes).sorted(), tear: nil))
                }
            }
            // One file's data behind: each prefix of its pending writes, and each write cut at a page.
            for (_, writes) in writesByInode.sorted(by: { $0.key < $1.key }) {
                for kept in writes.indices {
                    states.append(CrashState(point: point, dropped: Array(writes[kept...]), tear: nil))
                    let index = writes[kept]
                    if case .write(_, let offset, let bytes) = operations[index],
                        let page = pageBoundary(inside: offset, bytes.count)
                    {
                        states.append(
                            CrashState(
                                point: point, dropped: Array(writes[(kept + 1)...]),
                                tear: .init(index: index, kind: .shortened(kept: page - offset))))
                    }
                }
            }
            for _ in 0..<randomPerPoint {
                let cut = Int.random(in: 0...metadata.count, using: &random)
                var dropped = Array(metadata[cut...])
                for (_, writes) in writesByInode.sorted(by: { $0.key < $1.key }) {
                    dropped += writes[Int.random(in: 0...writes.count, using: &random)...]
                }
                states.append(CrashState(point: point, dropped: dropped.sorted(), tear: nil))
            }
        case .weak:
            // ALICE's ordering pass: lose one call, keep everything else.
            for index in pending { states.append(CrashState(point: point, dropped: [index], tear: nil)) }
            // Its atomicity pass, for the last write made: torn half-way and at a page.
            if let last = pending.last(where: { operations[$0].isData }),
                case .write(_, let offset, let bytes) = operations[last], bytes.count > 1
            {
                var cuts = [bytes.count / 2]
                if let page = pageBoundary(inside: offset, bytes.count) { cuts.append(page - offset) }
                for cut in cuts {
                    for kind in [Image.Tear.zeroFilled(kept: cut), .garbageFilled(kept: cut), .shortened(kept: cut)] {
                        states.append(CrashState(point: point, dropped: [], tear: .init(index: last, kind: kind)))
                    }
                }
            }
            for _ in 0..<randomPerPoint {
                let dropped = pending.filter { _ in Bool.random(using: &random) }
                var tear: CrashState.Tear? = nil
                if let write = pending.filter({ operations[$0].isData && !dropped.contains($0) }).randomElement(
                    using: &random),
                    case .write(_, _, let bytes) = operations[write], bytes.count > 1, Bool.random(using: &random)
                {
                    tear = .init(index: write, kind: .zeroFilled(kept: Int.random(in: 1..<bytes.count, using: &random)))
                }
                states.append(CrashState(point: point, dropped: dropped, tear: tear))
            }
        }
        return states
    }

    /// ext4's `auto_da_alloc`: a rename over an existing file that reached the disk brought
    /// the renamed file's earlier writes with it.
    private func allocateOnReplace(_ state: CrashState) -> CrashState {
        let operations = recording.operations
        var dropped = Set(state.dropped)
        var tear = state.tear
        for index in 0..<state.point where !dropped.contains(index) {
            guard case .rename(_, _, let inode, true) = operations[index] else { continue }
            for earlier in 0..<index {
                guard case .write(inode, _, _) = operations[earlier] else { continue }
                dropped.remove(earlier)
                if tear?.index == earlier { tear = nil }
            }
        }
        return CrashState(point: state.point, dropped: dropped.sorted(), tear: tear)
    }
}

private func inodeOf(_ operation: Operation) -> Int {
    if case .write(let inode, _, _) = operation { return inode }
    return 0
}

/// The first multiple of 4,096 strictly inside a write of `count` bytes at `offset`, if any.
private func pageBoundary(inside offset: Int, _ count: Int) -> Int? {
    let boundary = (offset / 4096 + 1) * 4096
    return boundary < offset + count ? boundary : nil
}
