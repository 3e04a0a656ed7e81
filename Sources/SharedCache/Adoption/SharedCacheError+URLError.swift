public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SharedCacheError {
    /// This error as URLSession would report it, for code that already handles `URLError`.
    ///
    /// | ``SharedCacheError/Code`` | `URLError.Code` |
    /// |---|---|
    /// | ``Code/network`` | the transport's own `URLError` (`.notConnectedToInternet`, `.cannotConnectToHost`, `.timedOut`, …), else `.unknown` |
    /// | ``Code/cancelled`` | `.cancelled` |
    /// | ``Code/notCached`` | `.resourceUnavailable`, as URLSession answers `.returnCacheDataDontLoad` with nothing cached |
    /// | ``Code/invalidArgument`` (a URL that is not http or https) | `.unsupportedURL` |
    /// | ``Code/noSpace`` | `.cannotWriteToFile` |
    /// | ``Code/permissionDenied`` | `.noPermissionsToReadFile` |
    /// | any other failure of the cache directory | `.cannotOpenFile` |
    ///
    /// The cache's own failures map to the `URLError` codes of local files, never to a network
    /// code. The `URLError` keeps this error as its underlying error
    /// (`URLError/sharedCacheError`), and its message as its description.
    ///
    /// - Parameter url: the URL the failing request was for, as `URLError.failingURL`.
    public func urlError(for url: URL? = nil) -> URLError {
        var userInfo: [String: Any] = [NSUnderlyingErrorKey: self, NSLocalizedDescriptionKey: message]
        if let url {
            userInfo[NSURLErrorFailingURLErrorKey] = url
        }
        let code: URLError.Code
        switch self.code {
        case .network:
            guard let transport = underlyingError as? URLError else {
                code = .unknown
                break
            }
            // The transport's own code and details, with this error beneath and its message on top.
            for (key, value) in transport.userInfo where userInfo[key] == nil {
                userInfo[key] = value
            }
            userInfo[NSUnderlyingErrorKey] = self
            code = transport.code
        case .cancelled: code = .cancelled
        case .notCached: code = .resourceUnavailable
        case .invalidArgument: code = .unsupportedURL
        case .noSpace: code = .cannotWriteToFile
        case .permissionDenied: code = .noPermissionsToReadFile
        default: code = .cannotOpenFile
        }
        return URLError(code, userInfo: userInfo)
    }
}

extension URLError {
    /// The ``SharedCacheError`` this error stands for, when SharedCache reported it
    /// (``SharedCache/data(for:options:)``, a session with ``SharedCache/install(in:)``):
    /// its ``SharedCacheError/code``, message, path and system call.
    public var sharedCacheError: SharedCacheError? {
        userInfo[NSUnderlyingErrorKey] as? SharedCacheError
    }
}
