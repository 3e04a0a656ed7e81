import Foundation

/// This process's mappings of files, one per line of /proc/self/maps: the file's path (followed
/// by " (deleted)" once its name is gone) and the bytes mapped. Empty where there is no /proc.
///
/// Read to its end: `String(contentsOfFile:)` stops at /proc's first short read, 4 KB in.
package func fileMappings() -> [(path: String, bytes: UInt64)] {
    let file = try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps"))
    let maps = String(decoding: (try? file?.readToEnd()) ?? Data(), as: UTF8.self)
    return maps.split(separator: "\n").compactMap { line in
        // start-end perms offset device inode path
        let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count == 6 else { return nil }
        let range = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
        guard range.count == 2 else { return nil }
        return (String(fields[5].drop { $0 == " " }), range[1] - range[0])
    }
}
