import Foundation

/// A built executable of this package (`sharedcache`, `sharedcached`), run as a real process.
struct Tool {
    let name: String

    var executable: URL { Worker.executable.deletingLastPathComponent().appendingPathComponent(name) }

    /// Runs the tool to completion with `arguments`, feeding it `input`.
    func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) throws -> Worker.Result {
        let (process, output, errors) = try start(arguments, environment: environment, input: input)
        return Worker.Result(finishing: process, output: output, errors: errors)
    }

    func start(_ arguments: [String], environment: [String: String] = [:], input: Data? = nil) throws
        -> (Process, Pipe, Pipe)
    {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        if let input {
            let pipe = Pipe()
            process.standardInput = pipe
            try process.run()
            pipe.fileHandleForWriting.write(input)
            try pipe.fileHandleForWriting.close()
        } else {
            process.standardInput = FileHandle.nullDevice
            try process.run()
        }
        return (process, output, errors)
    }
}

extension Tool {
    static let daemon = Tool(name: "sharedcached")
    static let admin = Tool(name: "sharedcache")
}
