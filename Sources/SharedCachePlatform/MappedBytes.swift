#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Bytes of a file mapped privately, unmapped when this goes: a large body handed to a caller
/// without reading it into memory (the kernel pages it in as it is touched, and may drop those
/// pages again under pressure, as it does the page cache). Writable, because `Data` made over
/// it may be changed in place: a written page is copied for this process, never written back.
///
/// The mapping outlives the descriptor it was made from and the file's name. Touching it past
/// the end of the file raises SIGBUS, so only files nobody shrinks are mapped: blobs, which are
/// written once and renamed into place, and never rewritten; and the temporary file of a store
/// told not to publish, written once by its locked writer, which then removes its name.
package final class MappedBytes: @unchecked Sendable {
    /// The first byte asked for; valid while this object lives.
    package let start: UnsafeMutableRawPointer
    package let count: Int
    private let mapping: UnsafeMutableRawPointer
    private let mappedSize: Int

    fileprivate init(mapping: UnsafeMutableRawPointer, mappedSize: Int, skip: Int, count: Int) {
        self.mapping = mapping
        self.mappedSize = mappedSize
        start = mapping + skip
        self.count = count
    }

    deinit { System.unmap(mapping, size: mappedSize) }
}

extension FileDescriptor {
    /// Maps `count` bytes of the file from `offset`, privately. The C function is `mmap`.
    package func mapPrivately(offset: Int64, count: Int) throws(SystemError) -> MappedBytes {
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        let aligned = offset - offset % page
        let skip = Int(offset - aligned)
        // mmap refuses a zero length: an empty range maps one byte (never touched).
        let size = max(skip + count, 1)
        let mapping = try System.map(rawValue, offset: aligned, size: size, shared: false)
        return MappedBytes(mapping: mapping, mappedSize: size, skip: skip, count: count)
    }
}
