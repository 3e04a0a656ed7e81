import Foundation

/// Who sees a download while it arrives, before the fetch is done: the response as it will be
/// served, once its body starts, then each piece of that body. What lets
/// ``SharedCacheURLProtocol`` hand a body to its client as it arrives (on Darwin).
///
/// Only a response served as it came is shown: not a 304 (the stored body answers it), nor a
/// 5xx that a stale response may answer instead. Once it is shown, the fetch either ends with
/// that response or fails; it never answers with something else. Its `Cache-Status` says what
/// was planned when its body began: a body of unknown length (chunked, or decoded) shown as
/// `stored` that then goes past the size limit is served all the same but not stored, which the
/// fetch's own result says (`detail=too-large`). Calls come one at a time, from the
/// transport's thread.
struct ResponseObserver: Sendable {
    /// The response as it will be served (its `data` empty), with its `Cache-Status`.
    var response: @Sendable (FetchResult) -> Void
    /// The next piece of its body.
    var piece: @Sendable (Data) -> Void
}
