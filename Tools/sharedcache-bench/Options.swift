import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The command line: which tables to run, where, and with which peer.
struct Options {
    var quick = false
    var directory: String? = nil
    var json: String? = nil
    var compactionOnly = false
    var httpOnly = false
    var mixedOnly = false
    var operationsOnly = false
    var peer: String? = nil
    var floors: String? = nil

    init(_ arguments: ArraySlice<String>) {
        var arguments = arguments
        while let argument = arguments.popFirst() {
            let (name, inline) = argument.split(separator: "=", maxSplits: 1).map(String.init).pair
            func value() -> String {
                if let inline { return inline }
                guard let next = arguments.popFirst() else { usage("\(name) needs a value") }
                return next
            }
            switch name {
            case "--quick": quick = true
            case "--compaction-only": compactionOnly = true
            case "--http-only": httpOnly = true
            case "--mixed-only": mixedOnly = true
            case "--operations-only": operationsOnly = true
            case "--dir": directory = value()
            case "--json": json = value()
            case "--peer": peer = value()
            case "--floors": floors = value()
            case "-h", "--help": usage(nil)
            default: usage("unknown option \(argument)")
            }
        }
    }
}

extension Array where Element == String {
    var pair: (String, String?) { (self[0], count > 1 ? self[1] : nil) }
}

func usage(_ problem: String?) -> Never {
    let text =
        "usage: sharedcache-bench [--quick] [--compaction-only | --http-only | --mixed-only | --operations-only]\n"
        + "                         [--floors FLOORS] [--peer PYTHON] [--dir DIR] [--json FILE]\n"
    if let problem {
        FileHandle.standardError.write(Data("sharedcache-bench: \(problem)\n\(text)".utf8))
        exit(64)
    }
    print(text, terminator: "")
    exit(0)
}
