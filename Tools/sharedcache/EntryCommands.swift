import Foundation
import SharedCache
import SharedCacheCLI

// get, put, rm, clear, ls, show: the entries themselves.

extension Command {
    static let get = Command(
        name: "get", synopsis: "KEY [-o FILE]",
        summary: "Write the body stored under KEY to standard output or FILE. Exits 1 on a miss.",
        options: [(.value("-o", "--output"), "write the body to FILE instead of standard output")]
    ) { invocation in
        let key = try invocation.positional(1...1, "KEY")[0]
        let cache = try invocation.cache()
        // The body is copied a megabyte at a time and checked as it goes: a file is written
        // beside its destination and renamed into place only when whole and intact.
        let output: BodyOutput
        if let path = invocation.arguments.value("-o") {
            guard !path.isEmpty else { throw UsageError("-o needs the name of a file to write") }
            do throws(SharedCacheError) {
                output = try BodyOutput(path: path)
            } catch {
                invocation.terminal.fail(error.description, .cannotCreate)
            }
        } else {
            output = try .standardOutput()
        }
        guard try cache.get(key: key, to: output) != nil else {
            invocation.terminal.warn("not in the cache: \(key.escapingControlCharacters)")
            return .notFound
        }
        return .success
    }

    static let put = Command(
        name: "put", synopsis: "KEY [FILE] [--etag ETAG] [--last-modified DATE] [--expires DURATION|never]",
        summary: "Store FILE (or standard input) under KEY, replacing any earlier entry.",
        options: [
            (.value("--etag"), "the entity tag to store with it, e.g. '\"v1\"'"),
            (.value("--last-modified"), "the Last-Modified value to store with it"),
            (.value("--expires"), "when it expires: a duration such as 90s, 15m, 12h, 7d, or never"),
        ]
    ) { invocation in
        let values = try invocation.positional(1...2, "KEY")
        let input: BodyInput
        if values.count == 2, values[1] != "-" {
            do throws(SharedCacheError) {
                input = try BodyInput(path: values[1])
            } catch {
                invocation.terminal.fail(error.description, .noInput)
            }
        } else {
            input = try .standardInput()
        }
        var metadata = EntryMetadata(
            etag: invocation.arguments.value("--etag"), lastModified: invocation.arguments.value("--last-modified"))
        if let text = invocation.arguments.value("--expires") {
            if text == "never" {
                metadata.expiry = .never
            } else if let duration = DurationText.parse(text) {
                metadata.expiry = .after(duration)
            } else {
                throw UsageError("--expires \(text) is not a duration like 90s, 15m, 12h, 7d, or never")
            }
        }
        let entry = try invocation.cache().put(key: values[0], from: input, metadata: metadata)
        if invocation.json { invocation.terminal.printJSON(EntryJSON(entry)) }
        return .success
    }

    static let remove = Command(
        name: "rm", synopsis: "KEY... | --hash HASH...",
        summary: "Remove entries by key, or by the SHA-256 of their key. Exits 1 if any was not there.",
        options: [(.flag("--hash"), "the arguments are 64-digit key hashes, not keys")]
    ) { invocation in
        let targets = try invocation.positional(1...Int.max, invocation.arguments.has("--hash") ? "HASH" : "KEY")
        let cache = try invocation.cache()
        var missing = false
        var results: [RemovalJSON] = []
        for target in targets {
            let removed: Bool
            if invocation.arguments.has("--hash") {
                guard let hash = KeyHash(hex: target) else { throw UsageError("\(target) is not a 64-digit hex hash") }
                removed = try cache.remove(hash: hash)
            } else {
                removed = try cache.remove(key: target)
            }
            if !removed {
                missing = true
                if !invocation.json { invocation.terminal.warn("not in the cache: \(target)") }
            }
            results.append(RemovalJSON(target: target, removed: removed))
        }
        if invocation.json { for result in results { invocation.terminal.printJSON(result) } }
        return missing ? .notFound : .success
    }

    /// `rm --json`'s line for one key or hash.
    private struct RemovalJSON: Encodable {
        var target: String
        var removed: Bool
    }

    static let clear = Command(
        name: "clear", synopsis: "", summary: "Remove every entry. Every process following the journal hears of it."
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache()
        let before = try cache.statistics().entryCount
        try cache.clear()
        if invocation.json {
            invocation.terminal.printJSON(["removed": before])
        } else {
            invocation.terminal.warn("removed \(before) entr\(before == 1 ? "y" : "ies")")
        }
        return .success
    }

    static let list = Command(
        name: "ls", synopsis: "",
        summary: "List every entry, least recently used first: hash, size, last access, expiry, key."
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        for entry in try invocation.cache().listEntries() {
            if invocation.json {
                invocation.terminal.printJSON(entry)
            } else {
                let expires = entry.expiresAt.map(formatDate) ?? "never"
                invocation.terminal.print(
                    "\(entry.hash.prefix(16))  \(formatBytes(entry.size).padding(toLength: 8, withPad: " ", startingAt: 0))  "
                        + "\(formatDate(entry.lastAccess))  \(expires.padding(toLength: 20, withPad: " ", startingAt: 0))  "
                        + entry.key.escapingControlCharacters)
            }
        }
        return .success
    }

    static let show = Command(
        name: "show", synopsis: "KEY | --hash HASH",
        summary: "Show everything stored about one entry except its body. Exits 1 on a miss.",
        options: [(.flag("--hash"), "the argument is a 64-digit key hash, not a key")]
    ) { invocation in
        let target = try invocation.positional(1...1, invocation.arguments.has("--hash") ? "HASH" : "KEY")[0]
        let hash: KeyHash
        if invocation.arguments.has("--hash") {
            guard let parsed = KeyHash(hex: target) else { throw UsageError("\(target) is not a 64-digit hex hash") }
            hash = parsed
        } else {
            hash = KeyHash(key: target)
        }
        guard let entry = try invocation.cache().listedEntry(hash: hash) else {
            invocation.terminal.warn("not in the cache: \(target)")
            return .notFound
        }
        if invocation.json {
            invocation.terminal.printJSON(entry)
        } else {
            let rows: [(String, String)] = [
                ("key", entry.key), ("hash", entry.hash), ("size", "\(entry.size) bytes"),
                ("etag", entry.etag ?? "-"), ("last-modified", entry.lastModified ?? "-"),
                ("stored", formatDate(entry.storedAt)), ("expires", entry.expiresAt.map(formatDate) ?? "never"),
                ("last access", formatDate(entry.lastAccess)), ("blob", entry.path),
            ]
            for (name, value) in rows {
                invocation.terminal.print(
                    "\(name.padding(toLength: 14, withPad: " ", startingAt: 0))\(value.escapingControlCharacters)")
            }
        }
        return .success
    }
}

/// What `put --json` prints.
struct EntryJSON: Encodable {
    var key: String
    var hash: String
    var size: UInt64
    var etag: String?
    var lastModified: String?
    var storedAt: Date
    var expiresAt: Date?

    init(_ entry: CacheEntry) {
        key = entry.key
        hash = entry.hash.hex
        size = entry.size
        etag = entry.etag
        lastModified = entry.lastModified
        storedAt = entry.storedAt
        expiresAt = entry.expiresAt
    }
}

/// `2026-11-22 09:15:02` in UTC: sortable, and the same on every machine.
func formatDate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
    return formatter.string(from: date)
}
