import Foundation
import Testing

@testable import SharedCache

/// sharedcache(5), Counters: what every process using a directory adds to `stats`, read by
/// `statistics().directory` and `sharedcache stat`. Two instances stand for two processes: they
/// share nothing but the directory.
@Suite("The directory's activity counters")
struct DirectoryActivityTests {
    @Test func everyRemovalIsCountedByItsReason() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let other = try SharedCache(directory: directory("cache"))
        for key in ["a", "b", "c"] { try cache.put(key: key, data: Data(key.utf8)) }
        try other.put(key: "a", data: Data("again".utf8))  // supersedes cache's "a"
        #expect(try other.remove(key: "b"))
        try cache.clear()  // "a" and "c"
        let activity = try #require(try cache.statistics().directory)
        #expect(activity.stores == 4)
        #expect(activity.removals[.superseded] == 1)
        #expect(activity.removals[.manual] == 1)
        #expect(activity.removals[.cleared] == 2)
        #expect(try other.statistics().directory?.removals == activity.removals)
    }
}
