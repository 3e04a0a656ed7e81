// sharedcache-stress: many processes on one cache directory for a set time — clients putting,
// getting, removing and fetching, removal subscribers, and the compactor — optionally killing
// one of them with SIGKILL at random moments and starting a new one; then a checker proves the
// invariants of DESIGN.md from what every process logged:
//
//   1. every get returned exactly the bytes some put stored for that key (bodies say which
//      writer and version they are, and every writer logged each put before making it), or a miss;
//   2. every removal reached every subscriber that ran throughout, exactly once and in journal
//      order; such subscribers saw the same removals;
//   3. every fetch served the origin's bytes (a 304 is never answered without its body);
//   4. the directory verifies clean at the end, but for at most one leftover per killed writer:
//      its temporary file (it died while writing) or an unjournaled blob (it died between
//      renaming its blob into place and journaling it); no put happened, and the compactor
//      sweeps both;
//   5. a process that followed the journal all along and one opened at the end hold the same
//      entries (checkpoints lose nothing).
//
//   sharedcache-stress [--seconds N] [--clients N] [--subscribers N] [--crash-rounds N]
//                      [--victims client,compactor,subscriber] [--seed N] [--dir DIR]
//
// Prints one summary line; exits 1 on any violation, listing them.
import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

resetSignalMask()

let arguments = CommandLine.arguments
if arguments.count >= 3, arguments[1] == "--role" {
    let rest = Array(arguments.dropFirst(3))
    do {
        switch arguments[2] {
        case "client": try await runClient(rest)
        case "subscriber": try runSubscriber(rest)
        default: fail("unknown role \(arguments[2])")
        }
    } catch {
        fail("\(arguments[2]): \(error)")
    }
    // Exit only once the client's frame is gone: what an async frame holds at exit(3) is
    // invisible to LeakSanitizer, which would report it as leaked.
    exit(0)
}
exit(try await runStress(parseOptions()))
