import Foundation

/// Who sees a download while it arrives, before the fetch is done: the response as it will be
/// served, once its body starts, then each piece of that body. What lets
/// ``SharedCacheURLProtocol`` hand a body to its client as it arrives (on Darwin).
///
/// Only a response served as it came is shown: not a 304 (the stored body answers it), nor a
/// 5xx that a stale response may answer instead. Once it is shown, the fetch either ends with
/// that response or fails; it never answers with something else. Calls come one at a time, from
/// the transport's thread.
struct ResponseObserver: Sendable {
    /// The response as it will be served (its `data` empty), with its `Cache-Status`.
    var response: @Sendable (FetchResult) -> Void
    /// The next piece of its body.
    var piece: @Sendable (Data) -> Void
}
