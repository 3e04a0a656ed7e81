#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCachePlatform

/// Space kept for the compactor: `<root>/reserve`, a megabyte of zeros it gives back when the
/// filesystem is full. Evicting must journal each removal before unlinking anything, and a
/// journal append needs free bytes; with the reserve released, the evictions that free the
/// space can be journaled (a batch of a thousand is about 150 KB). It is made with the
/// directory, and again after every pass that had to release it.
extension CacheDirectory {
    package static let reserveFile = "reserve"
    package static let reserveSize = 1 << 20

    /// Makes the reserve unless it is there; best effort (a full disk cannot give it).
    package func keepReserve() {
        guard (try? status(of: Self.reserveFile)) == .some(nil) else { return }
        // Written in tmp/ and renamed into place, so a crash halfway leaves nothing in the
        // root that an opener would take for a foreign file.
        _ = try? publishNewFile(
            purpose: Self.reserveFile, durable: false,
            write: { file in
                let zeros = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
                defer { zeros.deallocate() }
                zeros.initializeMemory(as: UInt8.self, repeating: 0)
                // Written, not truncated to size: a sparse file would reserve nothing.
                for _ in 0..<(Self.reserveSize / zeros.count) { try file.writeAll(UnsafeRawBufferPointer(zeros)) }
            },
            publish: { temporary in try renameWithoutReplacing(temporary, to: Self.reserveFile) })
    }

    /// Runs `write`; if the disk is full, gives the reserve back and runs it once more. For the
    /// writes that free space or say how to: journaling evictions and retirements, lowering
    /// the limits.
    package func releasingReserveWhenFull<Result, Failure: Error>(
        _ write: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        do throws(Failure) {
            return try write()
        } catch where Self.isFull(error) && releaseReserve() {
            return try write()
        }
    }

    /// Whether `error` says the disk (or the quota) is full, as a system call or the engine
    /// reports it.
    package static func isFull(_ error: any Error) -> Bool {
        if let error = error as? SystemError { return error.isNoSpace }
        return (error as? SharedCacheError)?.code == .noSpace
    }

    /// Gives the reserve back to the filesystem; whether there was one to give.
    package func releaseReserve() -> Bool {
        guard (try? status(of: Self.reserveFile))??.isRegularFile == true else { return false }
        return (try? removeFile(Self.reserveFile)) != nil
    }
}
