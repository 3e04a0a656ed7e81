import Foundation
import SharedCacheEngine
import SharedCachePlatform

/// Where a downloaded body goes as it arrives: into memory, until it outgrows
/// ``memoryLimit`` and the response is one to store; from then on into its entry's file,
/// through a ``BodyPipe`` read by a store running on a thread of its own. So a body of any
/// size that is stored costs a few megabytes of memory, and the caller gets it back mapped.
///
/// A body larger than the cache's size limit is not stored (the compactor would only evict it,
/// and every older entry with it if it came last), but still answers the fetch: one that says
/// so in its `Content-Length` is never sent to the store; one that goes past the limit as it
/// arrives is taken from the store there (which removes what it wrote and journals nothing).
/// Either way, past ``memoryLimit`` its bytes are set aside in a file of no name
/// (``CacheEngine/setAside(readingBody:)``) and come back mapped, as a stored body does. A
/// body whose length is not known in advance (chunked, or decoded from a `Content-Encoding`)
/// goes to both from then on, since it may yet pass the limit, until its end or the limit.
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

    /// Why the store was stopped: the body went past the cache's size limit.
    struct TooLarge: Error {}

    /// Why the copy set aside was dropped: the body was stored, and is served from there.
    private struct Stored: Error {}

    /// What came back, once the transport is done.
    enum Received {
        /// The body, in memory (or set aside, mapped), not stored yet.
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
        /// The response was one to store, but its body is larger than the size limit.
        var tooLarge = false
        /// The body's length, when its head says it in advance (`Content-Length`, as sent).
        var announcedLength: Int64?
        /// Whether the observer was shown the response.
        var announced = false
        var memory = Data()
        var received: Int64 = 0
        /// Into the store, while the body may be stored.
        var pipe: BodyPipe?
        var storing: Storing<CacheEngine.StoredOutcome>?
        /// Into a file of no name, while the body may be too large to store.
        var asidePipe: BodyPipe?
        var settingAside: Storing<Data>?
        /// Bytes went to a store that was then stopped, with no copy set aside: the body cannot
        /// be served whole (only a body longer than its `Content-Length` gets here).
        var lost = false
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
            let interrupted = state.withLock { state -> (pipes: [BodyPipe], received: Int64)? in
                guard state.received == 0 else {
                    return ([state.pipe, state.asidePipe].compactMap { $0 }, state.received)
                }
                state = State(head: head, headTime: time)
                return nil
            }
            if let (pipes, received) = interrupted {
                let error = Incomplete(reason: "the transport started another response after \(received) bytes")
                for pipe in pipes { pipe.fail(error) }
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
                    state.announcedLength = Self.announcedLength(of: head)
                    // Announced larger than the limit: never sent to the store.
                    if state.plan != nil, let length = state.announcedLength, length > sizeLimit {
                        state.plan = nil
                        state.tooLarge = true
                    }
                }
                guard !state.announced, let head = state.head, let announcement,
                    let served = announcement.served(head, state.plan, state.tooLarge)
                else { return nil }
                state.announced = true
                return served
            }
            if let shown { announcement?.observer.response(shown) }
            if announced { announcement?.observer.piece(data) }
            let (stopped, pushes) = state.withLock { state in take(data, &state) }
            stopped?.fail(TooLarge())
            for (pipe, bytes) in pushes { try pipe.push(bytes) }
        }
    }

    /// Decides where `data`, the next piece of the body, goes: returns the store's pipe if the
    /// store is to stop (the body just went past the size limit), and what to push where.
    private func take(_ data: Data, _ state: inout State) -> (stopped: BodyPipe?, pushes: [(BodyPipe, Data)]) {
        state.received += Int64(data.count)
        var stopped: BodyPipe?
        if state.plan != nil, state.received > sizeLimit {
            // Past the limit as it arrives: what the store wrote goes, and the body is served
            // from the copy set aside (or from memory, if it has not left it).
            state.plan = nil
            state.tooLarge = true
            stopped = state.pipe
            state.pipe = nil
            if stopped != nil, state.asidePipe == nil { state.lost = true }
        }
        var pushes: [(BodyPipe, Data)] = []
        if let pipe = state.pipe { pushes.append((pipe, data)) }
        if let aside = state.asidePipe { pushes.append((aside, data)) }
        guard state.storing == nil, state.settingAside == nil else { return (stopped, pushes) }
        state.memory.append(data)
        guard state.memory.count > Self.memoryLimit else { return (stopped, pushes) }
        let cache = cache
        if let plan = state.plan {
            let pipe = BodyPipe()
            state.pipe = pipe
            state.storing = Storing {
                defer { pipe.stopReading() }
                return try cache.store(plan, body: .reading(pipe.next))
            }
            pushes.append((pipe, state.memory))
        }
        // A body that may still pass the limit (its length unknown), or has, is set aside.
        if state.tooLarge || (state.plan != nil && state.announcedLength == nil) {
            let aside = BodyPipe()
            state.asidePipe = aside
            state.settingAside = Storing {
                defer { aside.stopReading() }
                return try cache.setAside(readingBody: aside.next)
            }
            pushes.append((aside, state.memory))
        }
        if !pushes.isEmpty { state.memory = Data() }
        return (stopped, pushes)
    }

    /// The response, once the transport returned: the body whole (in memory, or set aside), or
    /// stored. A body shorter than its `Content-Length` says is not a response: nothing is
    /// stored. A store stopped at the size limit has removed what it wrote by the time this
    /// returns.
    ///
    /// - Throws: ``Incomplete`` for a body cut short; the store's error if it failed.
    func finish() async throws -> Received {
        let current = state.withLock { $0 }
        guard var response = current.head else { throw URLError(.badServerResponse) }
        if let incomplete = Self.incompleteness(of: response, received: current.received)
            ?? (current.lost ? Incomplete(reason: "the body went past its Content-Length and the size limit") : nil)
        {
            await abandon(because: incomplete)
            throw incomplete
        }
        if let storing = current.storing, current.pipe == nil {
            // Stopped at the size limit: waited for, so its temporary file is gone.
            _ = try? await storing.value
        }
        if let pipe = current.pipe, let storing = current.storing {
            pipe.finish()
            let outcome: CacheEngine.StoredOutcome
            do {
                outcome = try await storing.value
            } catch {
                if let aside = current.asidePipe, let settingAside = current.settingAside {
                    try? await abandon(settingAside, aside, because: error)
                }
                throw error
            }
            if let aside = current.asidePipe, let settingAside = current.settingAside {
                try? await abandon(settingAside, aside, because: Stored())
            }
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
        if let aside = current.asidePipe, let settingAside = current.settingAside {
            aside.finish()
            response.body = try await settingAside.value
        } else {
            response.body = current.memory
        }
        return .whole(response)
    }

    /// The transfer failed with `error`: the store and the copy set aside (if they started)
    /// stop and remove what they wrote, and are waited for.
    func abandon(because error: any Error) async {
        let current = state.withLock { ($0.pipe, $0.storing, $0.asidePipe, $0.settingAside) }
        if let storing = current.1 { try? await abandon(storing, current.0, because: error) }
        if let settingAside = current.3 { try? await abandon(settingAside, current.2, because: error) }
    }

    /// Why the store (or the copy set aside) failed, once the transfer stopped because it did
    /// (``BodyPipe/StoreStopped``); the other is stopped and waited for.
    func storeFailure() async -> any Error {
        let current = state.withLock { ($0.pipe, $0.storing, $0.asidePipe, $0.settingAside) }
        var failures: [any Error] = []
        if let storing = current.1 {
            do { _ = try await Self.value(of: storing, stoppingWith: current.0) } catch { failures.append(error) }
        }
        if let settingAside = current.3 {
            do { _ = try await Self.value(of: settingAside, stoppingWith: current.2) } catch { failures.append(error) }
        }
        // Not the stops this receiver made itself: the failure that made them.
        return failures.first { !($0 is TooLarge) && !($0 is BodyPipe.StoreStopped) } ?? BodyPipe.StoreStopped()
    }

    /// The outcome of a store that may not have failed itself: one whose reading is still
    /// open is stopped first, so that it does not wait for a body that no longer comes.
    private static func value<Outcome>(of storing: Storing<Outcome>, stoppingWith pipe: BodyPipe?) async throws
        -> Outcome
    {
        pipe?.fail(BodyPipe.StoreStopped())
        return try await storing.value
    }

    private func abandon<Outcome>(_ storing: Storing<Outcome>, _ pipe: BodyPipe?, because error: any Error)
        async throws
    {
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
        let coding = response.headers["Content-Encoding"]?.trimmingSpaces().lowercased() ?? "identity"
        switch response.headers.contentLength {
        case .absent:
            return nil
        case .invalid:
            let field = response.headers["Content-Length"] ?? ""
            return Incomplete(reason: "its Content-Length, \"\(field)\", is not one length (RFC 9112 §6.3)")
        case .length(let length) where coding == "identity" && Int64(length) != received:
            return Incomplete(reason: "the body ended after \(received) of the \(length) bytes it announced")
        case .length:
            return nil
        }
    }
}
