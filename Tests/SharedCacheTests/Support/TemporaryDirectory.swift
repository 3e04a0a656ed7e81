import Foundation
import SharedCacheCLI

/// A fresh directory under the system's temporary directory, removed when the test is done.
final class TemporaryDirectory {
    let path: String

    init() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("sharedcache-tests")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.appendingPathComponent(UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    /// A path inside the directory.
    func callAsFunction(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        // Undo any chmod a test left behind so the directory can be removed.
        _ = try? ChildProcess.run(URL(fileURLWithPath: "/bin/chmod"), arguments: ["-R", "u+rwx", path])
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Runs `body` and returns the code of the ``SharedCacheError`` it throws, or `nil`.
func errorCode<T>(_ body: () throws -> T) -> String? {
    do {
        _ = try body()
        return nil
    } catch let error as SharedCacheError {
        return error.code.description
    } catch {
        return "unexpected \(type(of: error)): \(error)"
    }
}

import SharedCache
