import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One recorded system call, resolved against the cache directory: paths relative to its
/// root, files named by the checker's own inode numbers (a recorded inode number is only
/// valid while the file exists; the kernel reuses them).
enum Operation: Hashable, CustomStringConvertible {
    /// A name for a new, empty file (`open` with `O_CREAT` where no file was).
    case create(path: String, inode: Int)
    case write(inode: Int, offset: Int, bytes: [UInt8])
    case truncate(inode: Int, length: Int)
    case makeDirectory(path: String)
    case removeDirectory(path: String)
    case unlink(path: String)
    /// `replacing`: a file had the name `to` (ext4 then flushes `inode`'s data first).
    case rename(from: String, to: String, inode: Int, replacing: Bool)
    case link(from: String, to: String, inode: Int)
    /// `fsync` or `fdatasync` of a file (both flush its data and size).
    case synchronizeFile(inode: Int, path: String)
    /// `fsync` of a directory: its entries.
    case synchronizeDirectory(path: String)
    /// A line of the workload's: `begin …` or `ack …`.
    case note(String)

    var isNote: Bool {
        if case .note = self { return true }
        return false
    }

    var isBarrier: Bool {
        switch self {
        case .synchronizeFile, .synchronizeDirectory: true
        default: false
        }
    }

    /// File contents rather than names (ext4 writes these back on its own schedule).
    var isData: Bool {
        if case .write = self { return true }
        return false
    }

    var description: String {
        switch self {
        case .create(let path, let inode): "create \(path) (#\(inode))"
        case .write(let inode, let offset, let bytes): "write #\(inode) [\(offset), +\(bytes.count))"
        case .truncate(let inode, let length): "truncate #\(inode) to \(length)"
        case .makeDirectory(let path): "mkdir \(path)"
        case .removeDirectory(let path): "rmdir \(path)"
        case .unlink(let path): "unlink \(path)"
        case .rename(let from, let to, let inode, let replacing):
            "rename\(replacing ? "" : "-noreplace") \(from) -> \(to) (#\(inode))"
        case .link(let from, let to, _): "link \(from) -> \(to)"
        case .synchronizeFile(let inode, let path): "fsync #\(inode) \(path)"
        case .synchronizeDirectory(let path): "fsync dir \(path.isEmpty ? "." : path)"
        case .note(let text): "note: \(text)"
        }
    }
}

/// The files of a directory: names to inodes, and each inode's bytes.
struct Image: Hashable {
    var names: [String: Int] = [:]
    var directories: Set<String> = []
    var contents: [Int: [UInt8]] = [:]

    /// How a write can be cut short by a power loss.
    enum Tear: Hashable {
        /// The file ends after `kept` bytes of the write (ext4: the size follows written data).
        case shortened(kept: Int)
        /// The whole write's length reached the file, but only `kept` bytes of its data: the
        /// rest reads as zeros, or as garbage (a weak file system's unwritten blocks).
        case zeroFilled(kept: Int)
        case garbageFilled(kept: Int)
    }

    mutating func apply(_ operation: Operation, tear: Tear? = nil) {
        switch operation {
        case .create(let path, let inode):
            names[path] = inode
            if contents[inode] == nil { contents[inode] = [] }
        case .write(let inode, let offset, var bytes):
            switch tear {
            case nil: break
            case .shortened(let kept): bytes = Array(bytes.prefix(kept))
            case .zeroFilled(let kept):
                for index in kept..<bytes.count { bytes[index] = 0 }
            case .garbageFilled(let kept):
                var state = UInt32(truncatingIfNeeded: offset &* 2_654_435_761) | 1
                for index in kept..<bytes.count {
                    state ^= state << 13
                    state ^= state >> 17
                    state ^= state << 5
                    bytes[index] = UInt8(truncatingIfNeeded: state)
                }
            }
            var file = contents[inode] ?? []
            if file.count < offset + bytes.count {
                file += [UInt8](repeating: 0, count: offset + bytes.count - file.count)
            }
            file.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
            contents[inode] = file
        case .truncate(let inode, let length):
            var file = contents[inode] ?? []
            if file.count > length {
                file.removeLast(file.count - length)
            } else {
                file += [UInt8](repeating: 0, count: length - file.count)
            }
            contents[inode] = file
        case .makeDirectory(let path):
            directories.insert(path)
        case .removeDirectory(let path):
            directories.remove(path)
        case .unlink(let path):
            names[path] = nil
        case .rename(let from, let to, let inode, _):
            names[from] = nil
            names[to] = inode
            if contents[inode] == nil { contents[inode] = [] }
        case .link(_, let to, let inode):
            names[to] = inode
            if contents[inode] == nil { contents[inode] = [] }
        case .synchronizeFile, .synchronizeDirectory, .note:
            break
        }
    }

    /// A digest of what a directory materialised from this image would hold: a sum of one
    /// hash per directory and per file, so no sorting is needed.
    var fingerprint: Int {
        var digest = directories.count
        for path in directories { digest &+= path.hashValue }
        for (path, inode) in names {
            var hasher = Hasher()
            hasher.combine(path)
            (contents[inode] ?? []).withUnsafeBytes { hasher.combine(bytes: $0) }
            digest &+= hasher.finalize() &* 31
        }
        return digest
    }

    // MARK: Reading and writing real directories

    /// Reads the directory at `root`; `inodes` learns which real inode became which.
    static func read(_ root: String, inodes: inout [UInt64: Int]) throws -> Image {
        var image = Image()
        let manager = FileManager.default
        guard let walker = manager.enumerator(atPath: root) else { throw CrashCheckError("cannot list \(root)") }
        image.directories.insert("")
        while let relative = walker.nextObject() as? String {
            let path = "\(root)/\(relative)"
            let attributes = try manager.attributesOfItem(atPath: path)
            if attributes[.type] as? FileAttributeType == .typeDirectory {
                image.directories.insert(relative)
            } else {
                let inode = inodes.count + 1
                inodes[(attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0] = inode
                image.names[relative] = inode
                image.contents[inode] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            }
        }
        return image
    }

    /// Writes the image as a new directory at `root` (plain `mkdir` and `write`: Foundation's
    /// file writing flushes every file, which a checker making thousands of them cannot afford).
    func materialise(at root: String) throws {
        func makeDirectory(_ path: String) throws {
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                throw CrashCheckError("mkdir \(path): errno \(errno)")
            }
        }
        try makeDirectory(root)
        // Sorted, parents come before their children.
        for path in directories.sorted() where !path.isEmpty { try makeDirectory("\(root)/\(path)") }
        for (path, inode) in names {
            let parent = parentDirectory(path)
            if !parent.isEmpty && !directories.contains(parent) {
                try FileManager.default.createDirectory(atPath: "\(root)/\(parent)", withIntermediateDirectories: true)
            }
            let descriptor = open("\(root)/\(path)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw CrashCheckError("create \(root)/\(path): errno \(errno)") }
            defer { close(descriptor) }
            let bytes = contents[inode] ?? []
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == bytes.count else { throw CrashCheckError("write \(root)/\(path): errno \(errno)") }
        }
    }
}

/// A recorded workload: the directory before it, and its calls in the order they were made.
struct Recording {
    var base: Image
    var operations: [Operation]
    /// Every name each inode had, before or during the workload.
    var names: [Int: Set<String>] = [:]

    /// The paths an operation changes: names, or the names of the file it writes.
    func paths(of operation: Operation) -> Set<String> {
        switch operation {
        case .create(let path, _), .makeDirectory(let path), .removeDirectory(let path), .unlink(let path),
            .synchronizeDirectory(let path):
            [path]
        case .rename(let from, let to, _, _), .link(let from, let to, _):
            [from, to]
        case .write(let inode, _, _), .truncate(let inode, _), .synchronizeFile(let inode, _):
            names[inode] ?? []
        case .note:
            []
        }
    }

    /// Reads the recorder's log, keeping the calls inside `root` (given as the recorder wrote
    /// it: symbolic links resolved) and every note.
    init(log: String, root: String, base: Image, inodes recorded: [UInt64: Int]) throws {
        self.base = base
        var live = base
        var inodes = recorded
        var next = (base.contents.keys.max() ?? 0) + 1
        var operations: [Operation] = []
        func relative(_ path: String) -> String? {
            if path == root { return "" }
            guard path.hasPrefix(root + "/") else { return nil }
            return String(path.dropFirst(root.count + 1))
        }
        func inode(_ number: String, _ path: String) -> Int? {
            if let known = UInt64(number).flatMap({ inodes[$0] }) { return known }
            return relative(path).flatMap { live.names[$0] }
        }
        var names: [Int: Set<String>] = [:]
        for (path, inode) in base.names { names[inode, default: []].insert(path) }
        func emit(_ operation: Operation) {
            operations.append(operation)
            live.apply(operation)
            switch operation {
            case .create(let path, let inode), .rename(_, let path, let inode, _), .link(_, let path, let inode):
                names[inode, default: []].insert(path)
            default:
                break
            }
        }
        for line in log.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 3 else { throw CrashCheckError("malformed log line: \(line)") }
            let call = fields[2]
            let arguments = Array(fields.dropFirst(3))
            switch call {
            case "note":
                emit(.note(arguments.first ?? ""))
            case "open":
                guard let path = relative(arguments[0]), let number = UInt64(arguments[1]) else { continue }
                if let existing = live.names[path] {
                    inodes[number] = existing
                } else {
                    inodes[number] = next
                    emit(.create(path: path, inode: next))
                    next += 1
                }
            case "write":
                guard let file = inode(arguments[0], arguments[3]), let offset = Int(arguments[1]) else { continue }
                emit(.write(inode: file, offset: offset, bytes: decodeHex(arguments[2])))
            case "truncate":
                guard let file = inode(arguments[0], arguments[2]), let length = Int(arguments[1]) else { continue }
                emit(.truncate(inode: file, length: length))
            case "mkdir":
                if let path = relative(arguments[0]) { emit(.makeDirectory(path: path)) }
            case "rmdir":
                if let path = relative(arguments[0]) { emit(.removeDirectory(path: path)) }
            case "unlink":
                if let path = relative(arguments[0]), live.names[path] != nil { emit(.unlink(path: path)) }
            case "rename", "rename-noreplace":
                guard let from = relative(arguments[0]), let to = relative(arguments[1]), let file = live.names[from]
                else { continue }
                emit(.rename(from: from, to: to, inode: file, replacing: live.names[to] != nil))
            case "link":
                guard let from = relative(arguments[0]), let to = relative(arguments[1]), let file = live.names[from]
                else { continue }
                emit(.link(from: from, to: to, inode: file))
            case "fsync", "fdatasync":
                if arguments[2] == "d" {
                    if let path = relative(arguments[1]) { emit(.synchronizeDirectory(path: path)) }
                } else if let file = inode(arguments[0], arguments[1]) {
                    emit(.synchronizeFile(inode: file, path: relative(arguments[1]) ?? arguments[1]))
                }
            case "close":
                continue
            default:
                throw CrashCheckError("unknown call in the log: \(call)")
            }
        }
        self.operations = operations
        self.names = names
    }
}

private func decodeHex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count / 2)
    var high: UInt8? = nil
    for character in text.utf8 {
        let digit = character <= 57 ? character - 48 : character - 87
        if let first = high {
            bytes.append(first << 4 | digit)
            high = nil
        } else {
            high = digit
        }
    }
    return bytes
}

/// The directory that holds `path`, relative to the root ("" for the root itself).
func parentDirectory(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "" }
    return String(path[..<slash])
}
