import Foundation
import SharedCacheEngine

/// A response body handed from the thread that receives it (the transport's) to the thread
/// that stores it, holding at most ``capacity`` bytes between them: the receiver waits while
/// the store catches up, so a download of any size costs a few megabytes of memory.
///
/// The store reads it as a ``CacheEngine/store(key:metadata:storedAt:expiresAt:pinning:publishing:readingBody:)``
/// body: its end arrives only from ``finish()``, so a transfer that failed or was cut short
/// ends the read with an error, and nothing is stored.
///
/// Thread-safe: one thread pushes, one reads.
final class BodyPipe: @unchecked Sendable {
    /// Why the store stopped reading before the end: the receiver drops the rest.
    struct StoreStopped: Error {}

    /// The most bytes held between the two threads.
    let capacity: Int
    private let condition = NSCondition()
    private var chunks: [Data] = []
    private var buffered = 0
    private var ended = false
    private var failure: (any Error)?
    private var storeStopped = false

    /// How many bytes the store waits for before it reads: a write of its own each.
    static let batch = 1 << 20

    init(capacity: Int = 4 << 20) {
        precondition(capacity > Self.batch, "a pipe that cannot hold a batch")
        self.capacity = capacity
    }

    // MARK: The receiving side

    /// Hands `data` on, waiting while the pipe is full.
    ///
    /// - Throws: ``StoreStopped`` once the store has stopped reading (it failed: a full disk).
    func push(_ data: Data) throws {
        guard !data.isEmpty else { return }
        condition.lock()
        defer { condition.unlock() }
        while buffered >= capacity, !storeStopped { condition.wait() }
        guard !storeStopped else { throw StoreStopped() }
        chunks.append(data)
        buffered += data.count
        // The store is woken for a batch, not for every piece (URLSession's are 16 KB).
        if buffered >= Self.batch { condition.broadcast() }
    }

    /// The body is complete: the store reads to its end and commits it.
    func finish() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// The body will not be complete (the transfer failed, was cancelled or cut short): the
    /// store's read throws `error`, and nothing is stored.
    func fail(_ error: any Error) {
        condition.lock()
        if failure == nil { failure = error }
        condition.broadcast()
        condition.unlock()
    }

    // MARK: The storing side

    /// Fills `buffer` with the next bytes (as many as have arrived, up to its size), waiting
    /// for some; `.end` once the body is complete.
    func next(into buffer: UnsafeMutableRawBufferPointer) throws -> StreamedChunk {
        condition.lock()
        defer { condition.unlock() }
        while buffered < min(Self.batch, buffer.count), !ended, failure == nil { condition.wait() }
        if let failure { throw failure }
        guard !chunks.isEmpty else { return .end }
        var filled = 0
        var taken = 0
        while taken < chunks.count, filled < buffer.count {
            let chunk = chunks[taken]
            let count = min(buffer.count - filled, chunk.count)
            chunk.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: $0[..<count]))
            }
            filled += count
            if count < chunk.count {
                chunks[taken] = chunk.subdata(in: chunk.startIndex + count..<chunk.endIndex)
                break
            }
            taken += 1
        }
        chunks.removeFirst(taken)
        buffered -= filled
        condition.broadcast()
        return .bytes(filled)
    }

    /// The store is done reading, whether it finished or failed: a receiver waiting on a full
    /// pipe stops waiting, and later pushes throw.
    func stopReading() {
        condition.lock()
        storeStopped = true
        chunks.removeAll()
        buffered = 0
        condition.broadcast()
        condition.unlock()
    }
}
