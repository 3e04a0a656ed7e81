import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// init: make a directory a cache, private or shared with a group.

extension Command {
    static let initialize = Command(
        name: "init", synopsis: "[--group]",
        summary: """
            Create the cache directory (any command does, privately) and say who may use it. With \
            --group, every member of the directory's group may: directories get mode 2770 and files \
            0660 whatever each process's umask. A new directory takes your group; to share with \
            another, chgrp -R it, or run init in an empty directory made with that group and mode 2770.
            """,
        options: [(.flag("--group"), "share the new directory with its group")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache(Configuration(sharing: invocation.arguments.has("--group") ? .group : .owner))
        let sharing = SharingReport(cache)
        if invocation.json {
            invocation.terminal.printJSON(["directory": cache.path, "sharing": sharing.name])
        } else {
            invocation.terminal.print("\(cache.path): \(sharing.description)")
        }
        return .success
    }
}

/// Who may use the directory, as `init` and `stat` print it.
struct SharingReport {
    var name: String
    var description: String

    init(_ cache: SharedCache) {
        var status = stat()
        let group = lstat(cache.path, &status) == 0 ? status.st_gid : 0
        switch cache.configuration.sharing {
        case .owner:
            name = "owner"
            description = "private to its owner (mode 700)"
        case .group:
            name = "group"
            let groupName = getgrgid(group).map { String(cString: $0.pointee.gr_name) } ?? "\(group)"
            description = "shared with group \(groupName) (mode 2770)"
        }
    }
}
