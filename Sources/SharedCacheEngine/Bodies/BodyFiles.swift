#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCachePlatform

// Where the tools' bodies come from and go to, outside the cache directory: standard input and
// output, and files named on the command line. `package`: for the tools of this package. Every
// byte goes through the platform layer's checked loops (short writes continue where they
// stopped), and an output file appears only when it is whole.

/// A body to store, read in chunks from a file, a pipe or a device until its end.
///
/// Not thread-safe: one thread reads it.
package final class BodyInput {
    private let file: FileDescriptor
    /// Where a regular file is read next (its holes are skipped, not read); `nil` for a stream.
    private var offset: Int64?
    /// What error messages call it.
    package let name: String

    private init(file: consuming FileDescriptor, name: String) {
        self.file = file
        self.name = name
    }

    /// Standard input (a descriptor of its own, so the process's stays open).
    package static func standardInput() throws(SharedCacheError) -> BodyInput {
        do {
            return BodyInput(file: try System.duplicate(STDIN_FILENO), name: "standard input")
        } catch {
            throw BodyFiles.error(error, path: "standard input", while: "cannot read standard input")
        }
    }

    /// Opens `path` for reading: a regular file, or a FIFO, character device or socket read as
    /// a stream (`/dev/null` is an empty body).
    ///
    /// - Throws: `.invalidArgument` for a directory; the open's failure otherwise.
    package init(path: String) throws(SharedCacheError) {
        do {
            file = try FileDescriptor(path: path, flags: O_RDONLY | O_NOCTTY)
        } catch {
            throw BodyFiles.error(error, path: path, while: "cannot read \(path)")
        }
        name = path
        let status = try? file.status()
        if let status, status.isDirectory {
            throw SharedCacheError(
                .invalidArgument, "\(path) is a directory; give the file to store, or - for standard input",
                path: path)
        }
        if status?.isRegularFile == true { offset = 0 }
    }

    /// Reads the next bytes into `buffer`, or says that a hole (zeros) comes next, or that the
    /// body ended. The C functions are `read`, or `lseek` and `pread` for a regular file.
    func next(into buffer: UnsafeMutableRawBufferPointer) throws(SharedCacheError) -> StreamedChunk {
        do {
            guard let offset else {
                let count = try file.readAvailable(into: buffer)
                return count == 0 ? .end : .bytes(count)
            }
            guard let data = try file.nextData(from: offset) else {
                // Only a hole is left, up to the end of the file as it is now.
                let size = try file.status().size
                self.offset = max(offset, size)
                return size > offset ? .zeros(size - offset) : .end
            }
            if data > offset {
                self.offset = data
                return .zeros(data - offset)
            }
            let count = try file.readOnce(fromAbsoluteOffset: offset, into: buffer)
            self.offset = offset + Int64(count)
            return count == 0 ? .end : .bytes(count)
        } catch {
            throw BodyFiles.error(error, path: name, while: "reading \(name) failed")
        }
    }
}

/// Where a body is written: standard output (or a device or FIFO) as a stream, or a file that
/// is written beside its destination and renamed over it once the body is whole and checked.
///
/// An unpublished temporary file is removed when this value goes, so a failed or refused write
/// never leaves a half file. Not thread-safe: one thread writes it.
package final class BodyOutput {
    private let file: FileDescriptor
    /// The file written, for a regular file: the temporary name and the destination.
    private let replacing: (temporary: String, destination: String)?
    private var length: Int64 = 0
    private var published = false
    /// What error messages call it.
    package let name: String

    private init(file: consuming FileDescriptor, replacing: (String, String)?, name: String) {
        self.file = file
        self.replacing = replacing
        self.name = name
    }

    /// Standard output, written in order (a descriptor of its own, so the process's stays open).
    package static func standardOutput() throws(SharedCacheError) -> BodyOutput {
        do {
            return BodyOutput(file: try System.duplicate(STDOUT_FILENO), replacing: nil, name: "standard output")
        } catch {
            throw BodyFiles.error(error, path: "standard output", while: "cannot write standard output")
        }
    }

    /// Prepares to write `path`: a temporary file in the same folder, renamed over `path` by
    /// ``publish()``. A FIFO or device already at `path` (such as `/dev/null`) is written
    /// directly, as a stream.
    ///
    /// - Throws: `.invalidArgument` when `path` is a directory; the failure to create the
    ///   temporary file otherwise (a missing folder, no permission).
    package init(path: String) throws(SharedCacheError) {
        name = path
        let existing = try? System.status(atPath: path, followingSymlinks: true)
        if let existing, existing.isDirectory {
            throw SharedCacheError(
                .invalidArgument,
                "\(path) is a directory; name the file to write, such as \(path.hasSuffix("/") ? path : path + "/")BODY",
                path: path)
        }
        if let existing, !existing.isRegularFile {
            do {
                file = try FileDescriptor(path: path, flags: O_WRONLY | O_NOCTTY)
            } catch {
                throw BodyFiles.error(error, path: path, while: "cannot write \(path)")
            }
            replacing = nil
            return
        }
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = "\(folder).\(base).\(String(UniqueNames.next(), radix: 16)).partial"
        do {
            file = try FileDescriptor(path: temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, mode: 0o666)
        } catch {
            throw BodyFiles.error(error, path: path, while: "cannot create \(path)")
        }
        replacing = (temporary, path)
    }

    deinit {
        if let replacing, !published { try? System.remove(atPath: replacing.temporary) }
    }

    /// Whether bytes written cannot be taken back (standard output, a FIFO, a device).
    package var isStream: Bool { replacing == nil }

    /// Writes a piece of the body at `offset`: a file leaves zeros as holes; a stream gets them.
    func write(_ piece: BodyPiece, at offset: Int64) throws(SharedCacheError) {
        switch piece {
        case .bytes(let bytes):
            try write(bytes, at: offset)
        case .zeros(let count) where !isStream:
            length = max(length, offset + count)
        case .zeros(let count):
            let zeros = UnsafeMutableRawBufferPointer.allocate(
                byteCount: Int(min(count, Int64(BlobFileStore.streamingChunkSize))), alignment: 16)
            defer { zeros.deallocate() }
            zeros.initializeMemory(as: UInt8.self, repeating: 0)
            var written: Int64 = 0
            while written < count {
                let chunk = UnsafeRawBufferPointer(rebasing: zeros[..<Int(min(Int64(zeros.count), count - written))])
                try write(chunk, at: offset + written)
                written += Int64(chunk.count)
            }
        }
    }

    /// Writes `bytes`, which belong at `offset` of the body. A stream takes them in order; a file
    /// leaves chunks of zeros as holes.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(SharedCacheError) {
        do {
            if isStream {
                try file.writeAll(bytes)
            } else if !BlobFileStore.isAllZeros(bytes) {
                try file.writeAll(bytes, atAbsoluteOffset: offset)
            }
        } catch {
            throw BodyFiles.error(error, path: name, while: "writing \(name) failed")
        }
        length = max(length, offset + Int64(bytes.count))
    }

    /// Makes the file whole (trailing holes included) and renames it over its destination.
    package func publish() throws(SharedCacheError) {
        guard let replacing, !published else { return }
        do {
            try file.truncate(to: length)
            try System.rename(atPath: replacing.temporary, to: replacing.destination)
        } catch {
            throw BodyFiles.error(error, path: name, while: "writing \(name) failed")
        }
        published = true
    }
}

enum BodyFiles {
    /// Explains a failed system call on a file outside the cache, named by the user.
    static func error(_ error: SystemError, path: String, while what: String) -> SharedCacheError {
        let code: SharedCacheError.Code
        let advice: String
        switch error.errno {
        case ENOSPC, EDQUOT:
            code = .noSpace
            advice = "the filesystem is full; free space and try again"
        case EACCES, EPERM, EROFS:
            code = .permissionDenied
            advice = "check the permissions of \(path) and its folder"
        case ENOENT:
            code = .invalidArgument
            advice = "no such file or folder; check the path"
        case ENOTDIR:
            code = .notADirectory
            advice = "a component of the path is not a folder; check the path"
        case EISDIR:
            code = .invalidArgument
            advice = "it is a directory; name a file"
        default:
            code = .ioFailure
            advice = "the system reported an I/O error (\(String(cString: strerror(error.errno)))); check the disk"
        }
        var explained = SharedCacheError(code, "\(what): \(advice)", path: path)
        explained.underlyingError = error
        return explained
    }
}
