public import Foundation

extension SharedCacheError: LocalizedError {
    /// The message, with the failed system call where there is one: what `localizedDescription`
    /// shows, instead of Foundation's "The operation couldn't be completed".
    public var errorDescription: String? { description }
}

extension SharedCacheError.Code {
    /// Matches an error of any type against a code, so that a `catch` clause can name a code
    /// where the thrown type is lost, as it is in a `Task { }` closure or any untyped `throws`:
    ///
    /// ```swift
    /// Task {
    ///     do {
    ///         let result = try await cache.fetch(request)
    ///         show(result.data)
    ///     } catch SharedCacheError.Code.cancelled {
    ///         // the view went away
    ///     } catch let error as SharedCacheError where error.code == .network {
    ///         showOffline(error.message)
    ///     }
    /// }
    /// ```
    public static func ~= (code: SharedCacheError.Code, error: any Error) -> Bool {
        (error as? SharedCacheError)?.code == code
    }
}
