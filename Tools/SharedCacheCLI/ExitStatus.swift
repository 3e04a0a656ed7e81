package import SharedCache

/// Exit statuses from sysexits(3), as the man pages list them.
package enum ExitStatus: Int32, Sendable {
    case success = 0
    /// A miss: the key (or hash) is not in the cache, or `fetch --offline` found nothing stored.
    case notFound = 1
    /// EX_USAGE: wrong arguments.
    case usage = 64
    /// EX_DATAERR: the cache holds corrupt data that was not repaired, or is of a newer format.
    case dataError = 65
    /// EX_NOINPUT: an input file does not exist or cannot be read.
    case noInput = 66
    /// EX_UNAVAILABLE: the cache directory cannot be used (not a directory, not a cache), or
    /// the network failed.
    case unavailable = 69
    /// EX_SOFTWARE: a bug.
    case software = 70
    /// EX_CANTCREAT: an output file cannot be created.
    case cannotCreate = 73
    /// EX_IOERR: an I/O error, including a full disk.
    case ioError = 74
    /// EX_TEMPFAIL: try again later (another compactor runs, a lock was held too long).
    case tryAgain = 75
    /// EX_NOPERM: permission denied.
    case noPermission = 77

    /// The status for a cache error.
    package init(_ error: SharedCacheError) {
        switch error.code {
        case .busy, .lockTimeout: self = .tryAgain
        case .corruptData, .unsupportedFormat: self = .dataError
        case .permissionDenied: self = .noPermission
        case .noSpace, .ioFailure: self = .ioError
        case .invalidArgument: self = .usage
        case .notCached: self = .notFound
        default: self = .unavailable
        }
    }
}
