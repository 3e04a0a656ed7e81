package import SharedCacheFormat
import SharedCachePlatform

extension Remover {
    /// The calling process, as it names itself in removal records: its ID and the last
    /// component of its executable's path.
    package static let current: Remover = {
        let path = CommandLine.arguments.first ?? "?"
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return Remover(processID: UInt32(UniqueNames.processID), name: name)
    }()
}
