import Foundation
import SharedCachePlatform

/// Where the tools find the cache directory when `--dir` is not given.
package enum CacheLocation {
    /// `$SHAREDCACHE_DIR`; else `$XDG_CACHE_HOME/sharedcache` or `~/.cache/sharedcache` (Linux),
    /// `~/Library/Caches/SharedCache` (macOS).
    package static func resolve(
        _ explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        -> String
    {
        if let explicit { return explicit }
        if let directory = environment["SHAREDCACHE_DIR"], !directory.isEmpty { return directory }
        let home = environment["HOME"] ?? NSHomeDirectory()
        #if os(macOS) || os(iOS)
        return "\(home)/Library/Caches/SharedCache"
        #else
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return "\(cache)/sharedcache" }
        return "\(home)/.cache/sharedcache"
        #endif
    }

    /// `--dir PATH`, as both tools take it.
    package static let option = Arguments.Option.value("--dir")

    /// The directory `--dir` names in `arguments`, else the default ``resolve(_:environment:)``
    /// finds.
    ///
    /// - Throws: ``UsageError`` when `--dir` is given an empty value, which would otherwise mean
    ///   the working directory.
    package static func directory(
        _ arguments: Arguments, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(UsageError) -> String {
        let explicit = arguments.value(option.name)
        if explicit?.isEmpty == true {
            throw UsageError("--dir needs the path of the cache directory; leave it out for the default")
        }
        return resolve(explicit, environment: environment)
    }
}

/// Durations as people type them: `90`, `90s`, `15m`, `12h`, `7d`.
package enum DurationText {
    package static func parse(_ text: String) -> Duration? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var scale: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            scale = unit
            digits = digits.dropLast()
        }
        guard let count = Int64(digits), count >= 0 else { return nil }
        // `99999999999999999d` does not fit: not a duration, rather than a trap.
        let (seconds, overflow) = count.multipliedReportingOverflow(by: scale)
        return overflow ? nil : .seconds(seconds)
    }

    /// `1d 2h`, `15m`, `42s`: the largest two units.
    package static func format(_ duration: Duration) -> String {
        var seconds = duration.components.seconds
        var parts: [String] = []
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60), ("s", 1)]
        where seconds >= size || (size == 1 && parts.isEmpty) {
            parts.append("\(seconds / size)\(unit)")
            seconds %= size
            if parts.count == 2 { break }
        }
        return parts.joined(separator: " ")
    }
}

/// Byte counts as people read them: `512 B`, `1.5 KB`, `96.1 MB`.
package func formatBytes(_ bytes: UInt64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1000 && unit < units.count - 1 {
        value /= 1000
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : String(format: value < 10 ? "%.1f %@" : "%.0f %@", value, units[unit])
}

/// Which directory a path names now (its device and inode): a tool that runs for long says so
/// when the cache it uses was removed or replaced, rather than take that for damage.
package struct DirectoryIdentity: Equatable {
    private let device: UInt64
    private let inode: UInt64

    /// What `path` names now; `nil` when nothing, or when that cannot be told.
    package static func current(_ path: String) -> DirectoryIdentity? {
        try? DirectoryIdentity(path)
    }

    /// `nil` when nothing is at `path`; throws when that cannot be told (permission, I/O).
    private init?(_ path: String) throws(SystemError) {
        do {
            let status = try System.status(atPath: path, followingSymlinks: true)
            (device, inode) = (status.device, status.inode)
        } catch {
            guard [ENOENT, ENOTDIR].contains(error.errno) else { throw error }
            return nil
        }
    }

    /// Whether `path` names another directory now than `identity`, or none; `false` when that
    /// cannot be told (its error is then the one to report).
    package static func hasChanged(_ path: String, from identity: DirectoryIdentity?) -> Bool {
        do {
            return try DirectoryIdentity(path) != identity
        } catch {
            return false
        }
    }

    /// ``hasChanged(_:from:)``, once the directory has been still for `quiet` (nothing added to
    /// or removed from it or its folders), or gone, but after `limit` at most, or as soon as
    /// `stopping` says to (a stop signal).
    ///
    /// For a process that met an error: a deletion under way (`rm -rf`) empties the directory a
    /// file at a time, which the process can meet as damage before the directory itself goes,
    /// and the advice for damage (a repair) would then be wrong.
    package static func hasChanged(
        _ path: String, from identity: DirectoryIdentity?, onceStillFor quiet: Duration = .seconds(1),
        limit: Duration = .seconds(60), stopping: () -> Bool = { false }
    ) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        var look = Contents(path)
        var stillSince = clock.now
        while !hasChanged(path, from: identity), clock.now < deadline, !stopping() {
            if clock.now - stillSince >= quiet { return false }
            Clock.sleep(nanoseconds: 20_000_000)
            let next = Contents(path)
            if next != look { (look, stillSince) = (next, clock.now) }
        }
        return hasChanged(path, from: identity)
    }

    /// When the directory and its folders last changed: a file added to or removed from one
    /// changes its modification time (and a folder's removal, the directory's link count).
    /// `blobs/` is looked into: a blob's removal changes its fan-out folder alone, and
    /// emptying one of those can take longer than the stillness asked for.
    private struct Contents: Equatable {
        var changes: [FileStatus?]

        init(_ path: String) {
            let blobFolders = ((try? Self.entries(of: path + "/blobs")) ?? []).sorted().map { "/blobs/" + $0 }
            changes = (["", "/journal", "/packs", "/blobs", "/tmp", "/fetching"] + blobFolders).map {
                try? System.status(atPath: path + $0, followingSymlinks: false)
            }
        }

        private static func entries(of folder: String) throws(SystemError) -> [String] {
            try FileDescriptor(path: folder, flags: O_RDONLY | O_DIRECTORY).entries(of: ".")
        }
    }
}
