#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif
import SharedCachePlatform

extension SharedCache {
    /// Puts this cache under every session made from `configuration`: URLSession,
    /// Kingfisher's `ImageDownloader`, Alamofire's `Session`, Nuke's `DataLoader` — anything
    /// that takes a `URLSessionConfiguration`.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.default
    /// cache.install(in: configuration)
    /// let session = URLSession(configuration: configuration)
    /// let (data, response) = try await session.data(from: url)   // through the shared cache
    /// ```
    ///
    /// It puts a ``SharedCacheURLProtocol`` first in `protocolClasses`, so every `http` and
    /// `https` request of such a session is answered as ``data(for:options:)`` answers it, and
    /// turns the configuration's own `URLCache` off (`urlCache = nil`) so that two caches never
    /// disagree about a response. The configuration's `requestCachePolicy` is left as it is:
    /// with no `URLCache` nothing in Foundation consults it, and a request's own policy then
    /// reaches SharedCache unchanged (`.reloadIgnoringLocalCacheData` forces a refresh,
    /// `.returnCacheDataDontLoad` stays offline, …). Installing over an earlier install
    /// replaces it. Call it before making the session: a session copies its configuration.
    ///
    /// Several caches in one process stay apart. A `URLProtocol` sees only its request and
    /// its task, not the configuration or session it came from (on Linux, not even the
    /// configuration's `httpAdditionalHeaders`), so the tie is the protocol class itself: each
    /// cache that is installed gets a class of its own, a distinct specialization of one generic
    /// subclass of ``SharedCacheURLProtocol``, and that class answers for that cache alone.
    /// A process can have 256 such classes; past that, classes of caches that no longer exist
    /// are reused. A session whose cache has been deallocated goes to the network uncached.
    ///
    /// Cookies: the app's go out as URLSession adds them to the request, but a `Set-Cookie` in
    /// a response is stored in no jar (the cache's transport keeps none; see
    /// ``URLSessionTransport/uncachedSession``), nor are those of redirects the cache follows.
    /// An app that relies on URLSession storing them stores them itself from the response.
    ///
    /// - Parameter configuration: changed in place.
    public func install(in configuration: URLSessionConfiguration) {
        let bound = URLProtocolBinding.protocolClass(for: self)
        let others = (configuration.protocolClasses ?? []).filter { !($0 is SharedCacheURLProtocol.Type) }
        configuration.protocolClasses = [bound] + others
        configuration.urlCache = nil
    }
}

/// Which protocol class stands for which cache: 256 specializations of ``BoundURLProtocol``,
/// one per installed cache, each answering for that cache alone.
enum URLProtocolBinding {
    static let capacity = 256

    private final class Weak {
        weak var cache: SharedCache?
        init(_ cache: SharedCache) { self.cache = cache }
    }

    private struct State {
        var caches: [Weak?] = Array(repeating: nil, count: URLProtocolBinding.capacity)
        var slotOfClass: [ObjectIdentifier: Int] = [:]
    }

    private static let state = Locked(State())

    /// The class bound to `cache`, binding a free one the first time.
    static func protocolClass(for cache: SharedCache) -> SharedCacheURLProtocol.Type {
        state.withLock { state in
            let slot: Int
            if let existing = state.caches.firstIndex(where: { $0?.cache === cache }) {
                slot = existing
            } else {
                // A never used slot first, then one whose cache is gone.
                let free = state.caches.firstIndex { $0 == nil } ?? state.caches.firstIndex { $0?.cache == nil }
                guard let free else {
                    preconditionFailure("more than \(capacity) SharedCache instances installed and alive at once")
                }
                state.caches[free] = Weak(cache)
                slot = free
            }
            let bound = specialization(slot)
            state.slotOfClass[ObjectIdentifier(bound)] = slot
            return bound
        }
    }

    /// The cache `protocolClass` answers for.
    static func cache(for protocolClass: AnyClass) -> SharedCache? {
        state.withLock { state in
            state.slotOfClass[ObjectIdentifier(protocolClass)].flatMap { state.caches[$0]?.cache }
        }
    }

    /// `BoundURLProtocol` specialized for slot `n`, one type argument per bit of `n`.
    static func specialization(_ slot: Int) -> SharedCacheURLProtocol.Type {
        func bit(_ index: Int) -> any ProtocolSlotBit.Type { slot >> index & 1 == 0 ? Zero.self : One.self }
        return specialize(bit(0), bit(1), bit(2), bit(3), bit(4), bit(5), bit(6), bit(7))
    }

    private static func specialize<
        B0: ProtocolSlotBit, B1: ProtocolSlotBit, B2: ProtocolSlotBit, B3: ProtocolSlotBit, B4: ProtocolSlotBit,
        B5: ProtocolSlotBit, B6: ProtocolSlotBit, B7: ProtocolSlotBit
    >(
        _: B0.Type, _: B1.Type, _: B2.Type, _: B3.Type, _: B4.Type, _: B5.Type, _: B6.Type, _: B7.Type
    ) -> SharedCacheURLProtocol.Type {
        BoundURLProtocol<B0, B1, B2, B3, B4, B5, B6, B7>.self
    }

    enum Zero: ProtocolSlotBit {}
    enum One: ProtocolSlotBit {}
}

/// One bit of a protocol class's slot number, as a type.
protocol ProtocolSlotBit {}

/// ``SharedCacheURLProtocol`` bound to one cache: each specialization is a class of its own at
/// run time, which URLSession instantiates from the configuration's `protocolClasses`.
final class BoundURLProtocol<
    B0: ProtocolSlotBit, B1: ProtocolSlotBit, B2: ProtocolSlotBit, B3: ProtocolSlotBit, B4: ProtocolSlotBit,
    B5: ProtocolSlotBit, B6: ProtocolSlotBit, B7: ProtocolSlotBit
>: SharedCacheURLProtocol {}
