import Foundation
import SharedCacheEngine
import SharedCachePlatform

extension CacheEngine {
    /// Writes everything `read` produces to a file of no name in the cache's temporary folder
    /// (``CacheDirectory/openUnnamedTemporaryFile(purpose:)``) and returns it mapped privately:
    /// a body the cache does not store, held on disk instead of in memory while the caller has
    /// it, as a stored body is. Its space goes back when the returned `Data` (and every copy of
    /// it) is gone; nothing of it is ever a file of the cache, whatever happens to the process.
    ///
    /// Blocking: runs on a thread of its own (``Storing``), a megabyte at a time.
    ///
    /// - Throws: `read`'s error as it is; the cache's own (a full disk) as ``SharedCacheError``.
    func setAside(readingBody read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk) throws -> Data {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BlobFileStore.streamingChunkSize, alignment: 16)
        defer { buffer.deallocate() }
        // The reader's errors (the transfer failed, the body was stored after all) are its
        // own, not the directory's: kept apart from those `perform` explains.
        var readFailure: (any Error)?
        let activity = "setting aside a body the cache does not store"
        let mapped = try directory.perform(activity) { () throws -> MappedBytes? in
            let file = try directory.openUnnamedTemporaryFile(purpose: "aside")
            var size = 0
            reading: while true {
                let chunk: StreamedChunk
                do {
                    chunk = try read(buffer)
                } catch {
                    readFailure = error
                    return nil
                }
                switch chunk {
                case .end:
                    break reading
                case .zeros(let count):
                    size += Int(count)
                    try file.truncate(to: Int64(size))
                case .bytes(let count):
                    try file.writeAll(UnsafeRawBufferPointer(rebasing: buffer[..<count]), atAbsoluteOffset: Int64(size))
                    size += count
                }
            }
            return size == 0 ? nil : try file.mapPrivately(offset: 0, count: size)
        }
        if let readFailure { throw readFailure }
        guard let mapped else { return Data() }
        return Data(
            bytesNoCopy: mapped.start, count: mapped.count,
            deallocator: .custom { _, _ in withExtendedLifetime(mapped) {} })
    }
}
