#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
package import SharedCachePlatform

/// The layout of a cache directory: what each name in it is.
///
/// ```
/// <root>/format  config  lock  manifest  daemon  stats  journal/<generation>
///        packs/<pack>  blobs/<xx>/<hash>.<id>  tmp/  fetching/<hash>
/// ```
extension CacheDirectory {
    package static let journalDirectory = "journal"
    package static let blobsDirectory = "blobs"
    package static let packsDirectory = "packs"
    package static let temporaryDirectory = "tmp"
    package static let fetchingDirectory = "fetching"
    package static let lockFile = "lock"
    package static let manifestFile = "manifest"
    package static let daemonFile = "daemon"
    package static let statsFile = "stats"

    /// Who may use the directory, which decides the modes of new files and folders.
    package var sharing: Sharing { modes.enforced ? .group : .owner }

    /// Runs `body`, explaining any platform failure as a public error about `activity`.
    ///
    /// The one boundary where errors of the layers below (`SystemError`, `FormatError`)
    /// become `SharedCacheError`, each kept as its cause: code above the platform layer does
    /// its I/O inside `perform` and lets errors propagate.
    package func perform<Result>(_ activity: @autoclosure () -> String, _ body: () throws -> Result)
        throws(SharedCacheError) -> Result
    {
        do throws(SharedCacheError) {
            return try Self.perform(path: path, activity(), body)
        } catch {
            // A file that vanished because the whole directory did: trying again cannot help.
            if error.code == .notFound, isRemovedOrReplaced { throw .removedOrReplaced(path) }
            throw error
        }
    }

    /// Whether `path` names another directory now than the one this value has open, or none:
    /// it was removed (as "remove the directory to start over" says) or replaced under this
    /// process, whose descriptors lead to the old one for good. `false` when that cannot be told.
    package var isRemovedOrReplaced: Bool {
        guard let open = try? descriptor.status() else { return false }
        do {
            let named = try System.status(atPath: path, followingSymlinks: true)
            return (named.device, named.inode) != (open.device, open.inode)
        } catch {
            return [ENOENT, ENOTDIR].contains(error.errno)
        }
    }

    /// ``perform(_:_:)`` before there is a directory value, for the cache rooted at `path`.
    package static func perform<Result>(
        path: String, _ activity: @autoclosure () -> String, _ body: () throws -> Result
    ) throws(SharedCacheError) -> Result {
        do {
            return try body()
        } catch {
            throw SharedCacheError(error, root: path, while: activity())
        }
    }
}

extension SharedCacheError {
    /// The directory at `path` was removed or replaced while this process had it open.
    package static func removedOrReplaced(_ path: String) -> SharedCacheError {
        SharedCacheError(
            .notFound,
            "\(path) was removed or replaced while this process had it open; open the cache again to use what "
                + "is there now",
            path: path)
    }

    /// Any error of the layers below, explained as the cache's own.
    package init(_ error: any Error, root: String, while activity: String) {
        switch error {
        case let error as SharedCacheError:
            self = error
        case let error as SystemError:
            self.init(error, root: root, while: activity)
        case let error as FormatError:
            self = .corrupt("something in \(root) read while \(activity)", path: root, error)
        case is CancellationError:
            self = .cancelled(activity)
        default:
            self.init(.ioFailure, "\(activity) failed: \(error)", path: root)
            underlyingError = error
        }
    }
}

extension Sharing {
    /// Files 0600 and folders 0700 for the owner; 0660 and 02770, enforced, for a group.
    package var modes: FileModes {
        self == .group
            ? FileModes(file: 0o660, directory: 0o2770, enforced: true)
            : FileModes(file: 0o600, directory: 0o700, enforced: false)
    }

    /// A root is group-shared when its group may read, write and search it and it is
    /// set-group-ID (so what members create keeps the group).
    package init(rootStatus status: FileStatus) {
        let groupBits = UInt32(S_ISGID) | 0o070
        self = status.permissions & groupBits == groupBits ? .group : .owner
    }
}
