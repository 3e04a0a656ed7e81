import Foundation
import SharedCacheEngine
import SharedCachePlatform

/// Where a downloaded body goes as it arrives: into memory, until it outgrows
/// ``memoryLimit`` and the response is one to store; from then on into its entry's file,
/// through a ``BodyPipe`` read by a store running on a thread of its own. So a body of any
/// size that is stored costs a few megabytes of memory, and the caller gets it back mapped.
///
/// A body larger than the cache's size limit is not stored (the compactor would only evict it,
/// and every older entry with it if it came last), but still answers the fetch. Past
/// ``memoryLimit`` it goes to a store as any other, told not to publish it: from the start when
/// its `Content-Length` says it is too large, from the moment it passes the limit when its
/// length is not known in advance (chunked, or decoded from a `Content-Encoding`). Such a store
/// writes the whole body once, to its temporary file, journals nothing, and hands the body back
/// mapped from that file, which has no name any more
/// (``CacheEngine/store(key:metadata:storedAt:expiresAt:pinning:publishing:readingBody:)``).
///
/// Any other body that is not stored (its response forbids it, or the fetch does not hold its
/// URL's lock) is held in memory whole: a `no-store` body must not be written to disk at all
/// (RFC 9111 §5.2.2.5), and the fetch returns it as `Data`.
///
/// Thread-safe: the transport calls ``receive(_:)`` on its own thread, one call at a time; the
/// exchange calls the rest once the transport is done.
final class DownloadReceiver: @unchecked Sendable {
    /// Bodies up to this size are received into memory and stored from there (packed when
    /// small); a larger one streams to a blob file, which is read back mapped.
    static let memoryLimit = Int(BlobFileStore.mappingThreshold)

    /// Why a body is not the whole of its response.
    struct Incomplete: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    /// What came back, once the transport is done.
    enum Received {
        /// The body, in memory (or, too large to store, mapped), not stored yet.
        case whole(TransportResponse)
        /// The response was stored as it arrived; the body is the stored one, pinned and
        /// mapped.
        case stored(TransportResponse, CacheEngine.StoredOutcome, any PinnedBody)
    }

    private struct State {
        var head: TransportResponse?
        var headTime: Int64 = 0
        /// How the response is to be stored, decided once its body starts (a 304 or a bodiless
        /// answer never pays for it); `planned` says whether it was.
        var plan: CacheEngine.StoragePlan?
        var planned = false
        /// The response was one to store, but its body is larger than the size limit: the
        /// store (if one starts) is not to publish it.
        var tooLarge = false
        /// Whether the observer was shown the response.
        var announced = false
        var memory = Data()
        var received: Int64 = 0
        var pipe: BodyPipe?
        var storing: Storing?
    }

    /// Who is shown the response while it arrives, and how it would be served (`nil`: not as
    /// it came, so it is not shown).
    struct Announcement: Sendable {
        var observer: ResponseObserver
        /// The response, how it is to be stored (`nil`: it is not), and whether it is not
        /// stored only for being larger than the size limit.
        var served: @Sendable (TransportResponse, CacheEngine.StoragePlan?, _ tooLarge: Bool) -> FetchResult?
    }

    private let cache: CacheEngine
    /// How to store a response with this head, received at this time; `nil` not to store it.
    private let planning: @Sendable (TransportResponse, Int64) -> CacheEngine.StoragePlan?
    private let announcement: Announcement?
    /// The largest body stored: the cache's size limit when the fetch began; `.max` for none.
    private let sizeLimit: Int64
    private let state = Locked(State())

    init(
        cache: CacheEngine, announcement: Announcement? = nil,
        plan: @escaping @Sendable (TransportResponse, Int64) -> CacheEngine.StoragePlan?
    ) {
        self.cache = cache
        self.announcement = announcement
        planning = plan
        sizeLimit = cache.storedBodyLimit
    }

    /// Whether the observer was shown the response: the fetch must end with it, or fail.
    var announced: Bool { state.withLock { $0.announced } }

    /// Whether the response was one to store but is not, its body being larger than the
    /// cache's size limit.
    var exceededSizeLimit: Bool { state.withLock { $0.tooLarge } }

    /// Takes the next thing the transport hands on.
    ///
    /// - Throws: ``BodyPipe/StoreStopped`` once the store failed: the transfer stops, and
    ///   ``abandon(because:)`` says why.
    func receive(_ event: TransportEvent) throws {
        switch event {
        case .head(let head):
            // A transport that sent the request again starts over, before any body; a head
            // after some body is not a response this cache can take (the store stops).
            let time = Clock.nowMilliseconds()
            let interrupted = state.withLock { state -> (pipe: BodyPipe?, received: Int64)? in
                guard state.received == 0 else { return (state.pipe, state.received) }
                state = State(head: head, headTime: time)
                return nil
            }
            if let (pipe, received) = interrupted {
                let error = Incomplete(reason: "the transport started another response after \(received) bytes")
                pipe?.fail(error)
                throw error
            }
        case .body(let data):
            guard !data.isEmpty else { return }
            // The response is shown once its body starts: a head that comes again (a resend)
            // comes before any body.
            let shown = state.withLock { state -> FetchResult? in
                if !state.planned, let head = state.head {
                    state.plan = planning(head, state.headTime)
                    state.planned = true
                    // Announced larger than the limit: its store, if one starts, publishes nothing.
                    if state.plan != nil, let length = Self.announcedLength(of: head), length > sizeLimit {
                        state.tooLarge = true
                    }
                }
                guard !state.announced, let head = state.head, let announcement,
                    let served = announcement.served(head, state.tooLarge ? nil : state.plan, state.tooLarge)
                else { return nil }
                state.announced = true
                return served
            }
            if let shown { announcement?.observer.response(shown) }
            if announced { announcement?.observer.piece(data) }
            let next = state.withLock { state -> (BodyPipe, Data)? in
                state.received += Int64(data.count)
                // Past the limit as it arrives: the store, if it started, goes on to the end and
                // then hands the body back instead of publishing it.
                if state.plan != nil, state.received > sizeLimit { state.tooLarge = true }
                if let pipe = state.pipe { return (pipe, data) }
                state.memory.append(data)
                guard state.memory.count > Self.memoryLimit, let plan = state.plan else { return nil }
                let (pipe, cache, shared) = (BodyPipe(), cache, self.state)
                state.pipe = pipe
                state.storing = Storing {
                    defer { pipe.stopReading() }
                    // Asked once the body has ended: after the last `receive`, so it is final.
                    let publishing = { !shared.withLock { $0.tooLarge } }
                    return try cache.store(plan, body: .reading(pipe.next, publishing: publishing))
                }
                defer { state.memory = Data() }
                return (pipe, state.memory)
            }
            if let (pipe, bytes) = next { try pipe.push(bytes) }
        }
    }

    /// The response, once the transport returned: the body whole (in memory, or mapped when a
    /// store did not publish it, being too large), or stored. A body shorter than its
    /// `Content-Length` says is not a response: nothing is stored.
    ///
    /// - Throws: ``Incomplete`` for a body cut short; the store's error if it failed.
    func finish() async throws -> Received {
        let current = state.withLock { $0 }
        guard var response = current.head else { throw URLError(.badServerResponse) }
        if let incomplete = Self.incompleteness(of: response, received: current.received) {
            await abandon(because: incomplete)
            throw incomplete
        }
        guard let pipe = current.pipe, let storing = current.storing else {
            response.body = current.memory
            return .whole(response)
        }
        pipe.finish()
        switch try await storing.value {
        case .unpublished(let body):
            response.body = body
            return .whole(response)
        case .stored(let outcome):
            let cache = cache
            guard let version = outcome.version,
                let (pinned, body) = try await cache.offPool({ try cache.pinnedBody(of: version) })
            else {
                throw SharedCacheError(
                    .notCached,
                    "the response was stored, then removed by another process before it could be read; "
                        + "fetch it again")
            }
            response.body = body
            return .stored(response, outcome, pinned)
        }
    }

    /// The transfer failed with `error`: the store (if one started) stops and removes what it
    /// wrote, and is waited for.
    func abandon(because error: any Error) async {
        let (pipe, storing) = state.withLock { ($0.pipe, $0.storing) }
        if let storing { try? await abandon(storing, pipe, because: error) }
    }

    /// Why the store failed, once the transfer stopped because it did
    /// (``BodyPipe/StoreStopped``).
    func storeFailure() async -> any Error {
        guard let storing = state.withLock({ $0.storing }) else { return BodyPipe.StoreStopped() }
        do {
            _ = try await storing.value
            return BodyPipe.StoreStopped()
        } catch {
            return error
        }
    }

    private func abandon(_ storing: Storing, _ pipe: BodyPipe?, because error: any Error) async throws {
        pipe?.fail(error)
        _ = try await storing.value
    }

    /// The body's length as its head announces it, when the body is received as sent: a
    /// `Content-Length` with no `Content-Encoding` (URLSession decodes one, which changes the
    /// size), and not for a 304 or a 204, which have no body.
    static func announcedLength(of response: TransportResponse) -> Int64? {
        guard response.status != 304, response.status != 204,
            (response.headers["Content-Encoding"]?.trimmingSpaces().lowercased() ?? "identity") == "identity",
            case .length(let length) = response.headers.contentLength
        else { return nil }
        return Int64(length)
    }

    /// Why a body of `received` bytes is not the whole of `response`'s, if it is not: its
    /// `Content-Length` names another size, or is no length at all (RFC 9112 §6.3: such a
    /// response is discarded, where libcurl reads `4x` as 4, or takes the last of two). (A body
    /// the transport decoded from a `Content-Encoding` has a size of its own, so only an
    /// unencoded one's length is compared.)
    static func incompleteness(of response: TransportResponse, received: Int64) -> Incomplete? {
        guard response.status != 304, response.status != 204 else { return nil }
        if case .invalid = response.headers.contentLength {
            let field = response.headers["Content-Length"] ?? ""
            return Incomplete(reason: "its Content-Length, \"\(field)\", is not one length (RFC 9112 §6.3)")
        }
        if let length = announcedLength(of: response), length != received {
            return Incomplete(reason: "the body ended after \(received) of the \(length) bytes it announced")
        }
        return nil
    }
}
