import Dispatch
import Foundation

/// Checks `condition` every few milliseconds until it holds or `timeout` passed; returns
/// whether it held. The bounded wait for a signal another process or thread leaves (a file it
/// creates, a record it journals), never a guess at how long that takes.
func eventually(within timeout: Duration = .seconds(5), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.002)
    }
}
