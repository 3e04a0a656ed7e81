// A scripted cache client for the multi-process and crash tests.
//
//   sharedcache-test-worker mixed DIR WORKER-ID OPERATIONS KEYS SEED
//       put / get / remove at random over KEYS shared keys; checks every get against the
//       body generator and prints one summary line: "puts=N gets=N hits=N removes=N violations=N".
//   sharedcache-test-worker writer DIR SEED
//       puts and removes until killed (the crash test's victim); prints "ready" once open.
//   sharedcache-test-worker put DIR KEY VALUE  /  get DIR KEY  /  remove DIR KEY  /  compact DIR
//       one operation; get prints the body, or exits 1 on a miss; compact runs one compaction
//       pass and prints "evicted=N". SHAREDCACHE_TEST_SHARING=group opens with Sharing.group;
//       SHAREDCACHE_TEST_UMASK=022 sets the umask first.
//   sharedcache-test-worker hold-lock FILE
//       takes an exclusive flock on FILE, prints "holding", and holds it until killed or until
//       its standard input ends: a stopped or hung process that holds one of the cache's locks.
//   sharedcache-test-worker subscribe DIR events|polling [MILLISECONDS]
//       subscribes to removals and prints one line per removal, "SEQUENCE HASH REASON" (sequence
//       "-" when learned by resynchronising), until the removal of the key "__end__"; then
//       prints "resynchronizations=N" and exits. Prints "ready" once subscribed. MILLISECONDS
//       is the re-check (events) or polling interval: 1000 and 20 unless given.
//   sharedcache-test-worker remover DIR
//       a scripted series of puts, removes, clears and checkpoints in four phases; after each
//       of the first three it prints "phase N" and waits for a line on stdin; in the third, its
//       clock runs two minutes ahead, so checkpoints retire every older segment. Each phase ends
//       with the removal of a marker key "__phase N__", so a test can wait until a subscriber
//       has heard the phase out. Finally prints the removals it caused, one "HASH REASON" line
//       each, then "end".
//   sharedcache-test-worker flood DIR WORKER-ID SECONDS SIZE [PUTS-PER-SECOND]
//       puts new keys of SIZE bytes for SECONDS, as fast as it can or at PUTS-PER-SECOND,
//       reading back recent ones;
//       prints "puts=N hits=N misses=N violations=N". Which keys it reads back follows the
//       worker ID, or SHAREDCACHE_TEST_SEED where set.
//   sharedcache-test-worker fetch DIR URL [on-go]
//       one fetch through the cache; waits for any background revalidation it started; prints
//       "source=S status=N bytes=N sha=HASH". With on-go, it prints "ready" once the cache is
//       open and fetches when a line arrives on stdin, so that several workers start together.
//       With SHAREDCACHE_TEST_SEND_DELAY_MS (milliseconds) or SHAREDCACHE_TEST_HOLD_SEND (until a
//       line on stdin), says "sending" on standard error as it starts holding a request back.
//       With SHAREDCACHE_TEST_RANGE, the request asks for that `Range` (a value such as
//       "bytes=0-99"). The library's debug hooks SHAREDCACHE_TEST_SAY_WHEN_WAITING ("waiting" on
//       standard error when the URL's fetch lock is taken) and SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK
//       (milliseconds, or "line": "paused", then a line on stdin) apply.
//   sharedcache-test-worker session-fetch DIR URL [on-go]
//       one GET through a URLSession made from a configuration the cache was installed in
//       (`install(in:)`), on a line on stdin with on-go, as `fetch`; prints "status=N bytes=N"
//       and the Cache-Status.
//   sharedcache-test-worker fetch-series DIR URL-PREFIX COUNT
//       prints "ready" once the cache is open, then COUNT fetches, of URL-PREFIX0.txt,
//       URL-PREFIX1.txt, …, each on a line on stdin, so that several workers race on each URL in
//       turn; prints one "source=S status=N" line per fetch. SHAREDCACHE_TEST_SEND_DELAY_MS
//       delays every request this worker sends (in both fetch commands), so that the others find
//       it under way.
//   sharedcache-test-worker faults DIR
//       a fixed script of durable puts, rounds of gets, a remove and a checkpoint, run with a failpoint
//       armed (SHAREDCACHE_FAILPOINT); prints one "OPERATION KEY RESULT" line each, the result
//       being ok, hit, miss, or the error code, then "failpoint - fired|idle". Exits 2 if even
//       opening the cache failed.
//   sharedcache-test-worker descriptors DIR
//       counts its open descriptors (/proc/self/fd), opens two caches on DIR, puts, gets,
//       removes, subscribes and hears removals, cancels, checkpoints, compacts, verifies and
//       clears, releases everything, and counts again: prints "baseline=N after=N" and one
//       "leaked FD -> TARGET" line for each descriptor left open.
//   sharedcache-test-worker bus-error DIR sent|fault PREVIOUS with-cache|without-cache
//       sets SIGBUS's disposition to PREVIOUS; with-cache, then puts an entry and reads it back
//       (so the cache's guarded copies from its pack segment's mapping are in place). Then
//       raises a SIGBUS the cache has no part in: sent to itself, or a fault touching a mapped
//       page past the end of a file of its own. Exits 0 only if it survived the SIGBUS. PREVIOUS:
//       default, ignore, default-siginfo, ignore-siginfo (SIG_DFL / SIG_IGN, with SA_SIGINFO
//       set or not); handler (exits 42); masking-handler (sa_mask holds SIGUSR1: exits 44 if
//       SIGUSR1 is blocked while it runs, 45 if not); nodefer-handler (SA_SIGINFO | SA_NODEFER:
//       faults again, and exits 43 from the nested call); resethand-handler (SA_RESETHAND,
//       returns). An alarm ends it after 20 s, should a SIGBUS come back for ever.
//   sharedcache-test-worker mapped-size DIR limited|unlimited
//       limited: first limits its address space (RLIMIT_AS) to what it uses now and 1 GiB more.
//       Puts 3 entries of 1000 bytes, reads them back, and prints the bytes its pack segment
//       takes in the address space (/proc/self/maps) and the segment's size: "mapped=N size=N".
//   sharedcache-test-worker blocked-read DIR new-thread|after-handler
//       puts 32 entries of 1000 bytes and reads them back (five times, so that the reads
//       that follow would copy from the mapping), cuts their pack segment short after
//       the first, and reads the last with SIGBUS blocked: new-thread, on a new thread that
//       blocks it before its first read (a thread's mask is asked at its first copy);
//       after-handler, on this thread, once a SIGBUS sent to it has gone through the cache's
//       handler to one installed before the cache, which leaves SIGBUS blocked (as a handler
//       that leaves by longjmp does). Exits 0 on a miss, 1 on a hit.
//   sharedcache-test-worker verify DIR KEYS
//       reads every key; exits 0 and prints "entries=N damaged=N" if every body is one the
//       generator makes (damaged counts indexed entries whose blob was missing or failed a check).
//
// Bodies encode their key, writer and version, and are padded with bytes derived from them,
// so any reader can tell a genuine body from a mix, a truncation or another key's body.

import Dispatch
import Foundation
import SharedCache
import SharedCacheEngine
import SharedCachePlatform
import SharedCacheTestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(CDispatch)
// The fields of `ucontext_t`: Glibc's module leaves <sys/ucontext.h> out, Dispatch's includes it.
import CDispatch
#endif

func body(key: String, writer: Int, version: Int, size: Int) -> Data {
    VerifiableBody.make(key: key, writer: writer, version: version, size: size)
}

func isGenuine(_ data: Data, key: String) -> Bool { VerifiableBody.origin(of: data, key: key) != nil }

func keyName(_ index: Int) -> String { "https://example.com/item/\(index)" }

/// `SHAREDCACHE_TEST_SEED` mixed with `salt` where a test set it (to replay a run), else `salt`.
func seed(default salt: UInt64) -> UInt64 {
    guard let text = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_SEED"], let seed = UInt64(text) else {
        return salt
    }
    return seed ^ salt
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("sharedcache-test-worker: \(message)\n".utf8))
    exit(2)
}

/// The handshake that starts several workers together: the test starts every worker, waits for
/// each one's "ready", then writes a line to each; no guess at how long starting takes.
func sayReady() {
    print("ready")
    fflush(nil)
}

/// Waits for the test's line ("go").
func awaitGo() {
    guard readLine() != nil else { fail("stdin closed before the go") }
}

/// URLSession, with every request held back first: SHAREDCACHE_TEST_SEND_DELAY_MS milliseconds,
/// or with SHAREDCACHE_TEST_HOLD_SEND until a line arrives on stdin. Says "sending" on standard
/// error as it starts holding one back (the URL's fetch lock is held then).
struct DelayedTransport: HTTPTransport {
    let delay = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_SEND_DELAY_MS"].flatMap(Int.init) ?? 0
    let holds = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_HOLD_SEND"] != nil

    func send(_ request: URLRequest) async throws -> TransportResponse {
        try await holdBack()
        return try await URLSessionTransport().send(request)
    }

    func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
    {
        try await holdBack()
        return try await URLSessionTransport().send(request, streamingTo: receive)
    }

    private func holdBack() async throws {
        guard delay > 0 || holds else { return }
        FileHandle.standardError.write(Data("sending\n".utf8))
        if holds { awaitGo() }
        try await Task.sleep(for: .milliseconds(delay))
    }
}

/// This process's peak resident memory so far, in kilobytes (VmHWM), and its current (VmRSS).
func residentKilobytes() -> (peak: Int, now: Int) {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
        let line = status.split(separator: "\n").first { $0.hasPrefix(name) } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return (field("VmHWM:"), field("VmRSS:"))
}

#if canImport(Glibc)
/// The SIGBUS dispositions of the `bus-error` command, and the page past the end of a file it
/// touches to fault.
enum BusErrorWorker {
    nonisolated(unsafe) static var pastTheEnd: UnsafeRawPointer?
    nonisolated(unsafe) static var entries = 0

    static func touchPastTheEnd() -> UInt8 { pastTheEnd!.load(as: UInt8.self) }

    static func setDisposition(_ name: String) {
        var action = sigaction()
        sigemptyset(&action.sa_mask)
        switch name {
        case "default", "default-siginfo":
            action.__sigaction_handler.sa_handler = SIG_DFL
            if name == "default-siginfo" { action.sa_flags = SA_SIGINFO }
        case "ignore", "ignore-siginfo":
            action.__sigaction_handler.sa_handler = SIG_IGN
            if name == "ignore-siginfo" { action.sa_flags = SA_SIGINFO }
        case "handler":
            action.__sigaction_handler.sa_handler = { _ in _exit(42) }
        case "masking-handler":
            sigaddset(&action.sa_mask, SIGUSR1)
            action.__sigaction_handler.sa_handler = { _ in
                var current = sigset_t()
                pthread_sigmask(SIG_BLOCK, nil, &current)
                _exit(sigismember(&current, SIGUSR1) == 1 ? 44 : 45)
            }
        case "nodefer-handler":
            action.sa_flags = SA_SIGINFO | SA_NODEFER
            action.__sigaction_handler.sa_sigaction = { _, _, _ in
                BusErrorWorker.entries += 1
                if BusErrorWorker.entries > 1 { _exit(43) }
                _ = BusErrorWorker.touchPastTheEnd()
            }
        case "blocking-handler":
            // Returns with SIGBUS added to the mask the thread goes back to.
            action.sa_flags = SA_SIGINFO
            action.__sigaction_handler.sa_sigaction = { _, _, context in
                guard let context = context?.assumingMemoryBound(to: ucontext_t.self) else { return }
                sigaddset(&context.pointee.uc_sigmask, SIGBUS)
            }
        case "resethand-handler":
            action.sa_flags = Int32(bitPattern: UInt32(SA_RESETHAND))
            action.__sigaction_handler.sa_handler = { _ in BusErrorWorker.entries += 1 }
        default:
            fail("unknown disposition \(name)")
        }
        guard sigaction(SIGBUS, &action, nil) == 0 else { fail("sigaction refused \(name)") }
    }
}
#endif

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: sharedcache-test-worker COMMAND DIR ...") }
let directory = arguments[2]
var configuration = Configuration(lockTimeout: .seconds(30))
if let milliseconds = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_RECENCY_MS"].flatMap(Int.init) {
    configuration.recencyInterval = .milliseconds(milliseconds)
}
if ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_SHARING"] == "group" { configuration.sharing = .group }
if let mask = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_UMASK"].flatMap({ mode_t($0, radix: 8) }) {
    umask(mask)
}

do {
    switch arguments[1] {
    case "mixed":
        let worker = Int(arguments[3])!, operations = Int(arguments[4])!, keys = Int(arguments[5])!
        var random = SplitMix64(seed: UInt64(arguments[6])!)
        let cache = try SharedCache(directory: directory, configuration: configuration)
        var puts = 0, gets = 0, hits = 0, removes = 0, violations = 0
        for version in 0..<operations {
            let key = keyName(Int.random(in: 0..<keys, using: &random))
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let size =
                    [40, 700, 3000, 200_000].randomElement(using: &random)! + Int.random(in: 0..<100, using: &random)
                try cache.put(key: key, data: body(key: key, writer: worker, version: version, size: size))
                puts += 1
            case 4..<9:
                gets += 1
                if let hit = try cache.get(key: key) {
                    hits += 1
                    if !isGenuine(hit.data, key: key) || hit.entry.key != key {
                        violations += 1
                        let head = String(decoding: hit.data.prefix(80), as: UTF8.self)
                        FileHandle.standardError.write(
                            Data(
                                "violation: \(hit.data.count) wrong bytes for \(key) [\(hit.entry.key)]: \(head)\n".utf8
                            ))
                    }
                }
            default:
                if try cache.remove(key: key) { removes += 1 }
            }
        }
        print("puts=\(puts) gets=\(gets) hits=\(hits) removes=\(removes) violations=\(violations)")

    case "writer":
        var random = SplitMix64(seed: UInt64(arguments[3])!)
        let cache = try SharedCache(directory: directory, configuration: configuration)
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        var version = 0
        while true {
            version += 1
            let key = keyName(Int.random(in: 0..<16, using: &random))
            if Int.random(in: 0..<8, using: &random) == 0 {
                try cache.remove(key: key)
            } else if Int.random(in: 0..<50, using: &random) == 0 {
                try cache.checkpoint()
            } else {
                let size = [100, 5000, 300_000].randomElement(using: &random)!
                try cache.put(key: key, data: body(key: key, writer: 0, version: version, size: size))
            }
        }

    case "puts":
        // WORKER COUNT KEYS SEED: COUNT puts over KEYS keys, packed and blob-sized bodies mixed.
        let worker = Int(arguments[3])!, count = Int(arguments[4])!, keys = Int(arguments[5])!
        var random = SplitMix64(seed: UInt64(arguments[6])!)
        let cache = try SharedCache(directory: directory, configuration: configuration)
        for version in 0..<count {
            let key = keyName(Int.random(in: 0..<keys, using: &random))
            let size = [100, 2000, 150_000].randomElement(using: &random)!
            try cache.put(key: key, data: body(key: key, writer: worker, version: version, size: size))
        }
        print("puts=\(count)")

    case "put":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        try cache.put(key: arguments[3], data: Data(arguments[4].utf8))
    case "get":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        guard let hit = try cache.get(key: arguments[3]) else { exit(1) }
        FileHandle.standardOutput.write(hit.data)
    case "remove":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        exit(try cache.remove(key: arguments[3]) ? 0 : 1)
    case "compact":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        let report = try cache.compact()
        print("evicted=\(report.expiredCount + report.evictedForSpaceCount)")

    case "hold-lock":
        // FILE is the "DIR" argument: a lock of the cache's (`lock`, a journal segment).
        let file = open(directory, O_RDWR)
        guard file >= 0, flock(file, LOCK_EX) == 0 else { fail("could not lock \(directory): errno \(errno)") }
        FileHandle.standardOutput.write(Data("holding\n".utf8))
        // Hung: it lets go only when it ends (killed, or its standard input closed).
        while FileHandle.standardInput.availableData.count > 0 {}

    case "subscribe":
        let interval = arguments.count > 4 ? Int(arguments[4]).map { Duration.milliseconds($0) } : nil
        let watching: JournalWatching =
            arguments[3] == "polling"
            ? .polling(every: interval ?? .milliseconds(20)) : .fileEvents(recheckEvery: interval ?? .seconds(1))
        let cache = try SharedCache(directory: directory, configuration: Configuration(journalWatching: watching))
        let end = KeyHash(key: "__end__")
        let done = DispatchSemaphore(value: 0)
        let subscription = cache.onRemovals { batch in
            var lines = ""
            for removal in batch {
                lines += "\(removal.sequence.map(String.init) ?? "-") \(removal.hash.hex) \(removal.reason)\n"
            }
            FileHandle.standardOutput.write(Data(lines.utf8))
            if batch.contains(where: { $0.hash == end }) { done.signal() }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        done.wait()
        subscription.cancel()
        print("resynchronizations=\(try cache.statistics().resynchronizations)")

    case "remover":
        // Its own clock, which it moves past the journal's retention once the test said every
        // running subscriber has read on: the checkpoints after that retire the segments the
        // stopped one needs, and no running subscriber ever falls behind a retired segment.
        let clockOffset = Locked<Int64>(0)
        var removerConfiguration = configuration
        removerConfiguration.journalRetention = .seconds(60)
        removerConfiguration.clock = WallClock { Clock.nowMilliseconds() + clockOffset.withLock { $0 } }
        let cache = try SharedCache(directory: directory, configuration: removerConfiguration)
        var live = Set<Int>()
        var expected: [String] = []
        func put(_ index: Int) throws {
            if live.contains(index) { expected.append("\(KeyHash(key: keyName(index)).hex) superseded") }
            try cache.put(key: keyName(index), data: body(key: keyName(index), writer: 9, version: index, size: 100))
            live.insert(index)
        }
        func remove(_ index: Int) throws {
            if try cache.remove(key: keyName(index)) {
                expected.append("\(KeyHash(key: keyName(index)).hex) manual")
                live.remove(index)
            }
        }
        func clear() throws {
            for index in live.sorted() { expected.append("\(KeyHash(key: keyName(index)).hex) cleared") }
            try cache.clear()
            live = []
        }
        func pause(_ phase: Int) throws {
            let marker = "__phase \(phase)__"
            try cache.put(key: marker, data: Data())
            try cache.remove(key: marker)
            expected.append("\(KeyHash(key: marker).hex) manual")
            print("phase \(phase)")
            fflush(nil)
            _ = readLine()
        }
        for index in 0..<30 { try put(index) }
        for index in 0..<5 { try remove(index) }
        for index in 0..<10 { try put(index) }
        try cache.checkpoint()
        try pause(1)
        for round in 0..<4 {
            for index in stride(from: round, to: 30, by: 3) { try put(index) }
            for index in stride(from: round + 1, to: 30, by: 4) { try remove(index) }
            try cache.checkpoint()
        }
        try pause(2)
        clockOffset.withLock { $0 = 120_000 }
        try clear()
        for index in 0..<10 { try put(index) }
        try remove(3)
        try cache.checkpoint()
        try cache.checkpoint()
        clockOffset.withLock { $0 = 0 }
        try pause(3)
        try remove(4)
        try put(5)
        try cache.checkpoint()
        try cache.put(key: "__end__", data: Data())
        try cache.remove(key: "__end__")
        expected.append("\(KeyHash(key: "__end__").hex) manual")
        print(expected.joined(separator: "\n"))
        print("end")

    case "flood":
        let worker = Int(arguments[3])!, seconds = Double(arguments[4])!, size = Int(arguments[5])!
        let rate = arguments.count > 6 ? Double(arguments[6])! : nil
        let cache = try SharedCache(directory: directory, configuration: configuration)
        // Which recent key to read back: seeded, so a run can be replayed.
        var random = SplitMix64(seed: seed(default: UInt64(worker)))
        let start = Date(), deadline = start.addingTimeInterval(seconds)
        var puts = 0, hits = 0, misses = 0, violations = 0
        // A paced writer makes every put of its schedule however late it runs; a flood writes
        // until the deadline.
        let scheduled = rate.map { Int(seconds * $0) }
        while scheduled.map({ puts < $0 }) ?? (Date() < deadline) {
            // A paced writer's n-th put is due n / rate seconds in; a late one catches up at once.
            let wait = rate.map { start.addingTimeInterval(Double(puts) / $0).timeIntervalSinceNow } ?? 0
            if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
            let key = "flood-\(worker)-\(puts)"
            try cache.put(key: key, data: body(key: key, writer: worker, version: puts, size: size))
            puts += 1
            let recent = "flood-\(worker)-\(Int.random(in: max(0, puts - 50)..<puts, using: &random))"
            if let hit = try cache.get(key: recent) {
                hits += 1
                if !isGenuine(hit.data, key: recent) { violations += 1 }
            } else {
                misses += 1
            }
        }
        print("puts=\(puts) hits=\(hits) misses=\(misses) violations=\(violations)")

    case "verify":
        let keys = Int(arguments[3])!
        let cache = try SharedCache(directory: directory, configuration: configuration)
        var entries = 0
        for index in 0..<keys {
            let key = keyName(index)
            guard let hit = try cache.get(key: key) else { continue }
            guard isGenuine(hit.data, key: key) else { fail("wrong bytes for \(key)") }
            entries += 1
        }
        // A live index entry whose blob is missing or bad would show up as a discarded blob.
        print("entries=\(entries) damaged=\(try cache.statistics().damagedBlobs)")

    case "read-back":
        // A put that another process's put (and, with `checkpoint`, checkpoint) lands inside,
        // after its catch-up: it reads its record back (and finds it after the seal, and appends
        // it again). Prints whether the other process's work was done, then the put's outcome.
        let configuration = Configuration(durability: .synchronized, memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory, configuration: configuration)
        let other = try SharedCache(directory: directory, configuration: configuration)
        let key = keyName(0)
        let landed = Locked(false)
        let now = cache.engine.now()
        let outcome: String
        do {
            try cache.engine.store(
                // A blob: a body reclaimed while a record in effect names it would be missed.
                key: key, data: body(key: key, writer: 9, version: 0, size: 200_000), metadata: EntryMetadata(),
                storedAt: now, expiresAt: now + 86_400_000
            ) {
                try other.put(key: keyName(1), data: body(key: keyName(1), writer: 9, version: 1, size: 2000))
                if arguments.count > 3, arguments[3] == "checkpoint" { try other.checkpoint() }
                landed.withLock { $0 = true }
            }
            outcome = "ok"
        } catch {
            outcome = error.code.description
        }
        print("landed \(landed.withLock { $0 })\nput \(key) \(outcome)")
        #if DEBUG
        print("failpoint \(Failpoint.hasFired ? "fired" : "idle")")
        #endif

    case "faults":
        // No memory tier: the gets read from the directory, through the calls under test.
        let cache = try SharedCache(
            directory: directory, configuration: Configuration(durability: .synchronized, memoryCostLimit: 0))
        func outcome(_ body: () throws -> String) -> String {
            do { return try body() } catch let error as SharedCacheError { return error.code.description } catch {
                return "unexpected"
            }
        }
        func line(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
        for index in 0..<4 {
            let key = keyName(index)
            // Key 1, removed below, is past the pack threshold: its removal unlinks a blob file.
            // Key 2 is packed but too big to be read with its record in one `pread`: a `preadv`.
            let size = [2000, 200_000, 8000, 2000][index]
            line(
                "put \(key) "
                    + outcome {
                        try cache.put(key: key, data: body(key: key, writer: 9, version: index, size: size));
                        return "ok"
                    })
        }
        // Round after round: a region of a pack segment is read with `pread` at first, and
        // copied from the segment's mapping once read often.
        for _ in 0...GrowingFileMapping.preadsBeforeMapping {
            for index in 0..<4 {
                let key = keyName(index)
                line("get \(key) " + outcome { try cache.get(key: key) == nil ? "miss" : "hit" })
            }
        }
        line("remove \(keyName(1)) " + outcome { try cache.remove(key: keyName(1)) ? "ok" : "miss" })
        line(
            "checkpoint - "
                + outcome {
                    try cache.checkpoint(); return "ok"
                })
        // Past the pack threshold: a blob file (the other small puts pack records).
        line(
            "put \(keyName(4)) "
                + outcome {
                    try cache.put(key: keyName(4), data: body(key: keyName(4), writer: 9, version: 4, size: 200_000));
                    return "ok"
                })
        #if DEBUG
        line("failpoint - \(Failpoint.hasFired ? "fired" : "idle")")
        #endif

    case "fetch":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        if arguments.count > 4, arguments[4] == "on-go" {
            sayReady()
            awaitGo()
        }
        var request = URLRequest(url: URL(string: arguments[3])!)
        request.setValue(ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_RANGE"], forHTTPHeaderField: "Range")
        let result = try await cache.fetch(request, transport: DelayedTransport())
        await cache.waitForBackgroundRevalidations()
        // The Cache-Status last: it holds spaces.
        print(
            "source=\(result.source) status=\(result.status) bytes=\(result.data.count) sha=\(KeyHash(key: String(decoding: result.data, as: UTF8.self))) cache-status=\(result.cacheStatus ?? "")"
        )

    case "fetch-memory":
        // A fetch of a small URL first loads URLSession and libcurl; the peak resident memory
        // of the large fetch that follows is then measured from what is resident after it.
        let cache = try SharedCache(directory: directory, configuration: configuration)
        _ = try await cache.fetch(URLRequest(url: URL(string: arguments[4])!))
        // With "download", the body goes to a file (download(for:)) instead.
        let before = residentKilobytes().now
        let url = URL(string: arguments[3])!
        let (source, body, grown): (String, Data, Int)
        if arguments.count > 6, arguments[6] == "download" {
            let (file, response) = try await cache.download(from: url)
            defer { try? FileManager.default.removeItem(at: file) }
            let hit = response.value(forHTTPHeaderField: "Cache-Status")?.contains("hit") == true
            (source, grown) = (hit ? "fresh" : "downloaded", residentKilobytes().peak - before)
            body = try Data(contentsOf: file, options: .alwaysMapped)
        } else {
            let result = try await cache.fetch(URLRequest(url: url))
            (source, body, grown) = ("\(result.source)", result.data, residentKilobytes().peak - before)
        }
        // Only now is the body touched, to check it against the file the origin serves.
        let expected = try Data(contentsOf: URL(fileURLWithPath: arguments[5]), options: .alwaysMapped)
        print("source=\(source) bytes=\(body.count) intact=\(body == expected) grown_kb=\(grown)")

    case "session-fetch":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        cache.install(in: sessionConfiguration)
        let session = URLSession(configuration: sessionConfiguration)
        if arguments.count > 4, arguments[4] == "on-go" {
            sayReady()
            awaitGo()
        }
        let (data, response) = try await session.data(from: URL(string: arguments[3])!)
        let http = response as? HTTPURLResponse
        print(
            "status=\(http?.statusCode ?? 0) bytes=\(data.count) \(http?.value(forHTTPHeaderField: "Cache-Status") ?? "-")"
        )

    case "fetch-series":
        let cache = try SharedCache(directory: directory, configuration: configuration)
        sayReady()
        for index in 0..<Int(arguments[4])! {
            awaitGo()
            let result = try await cache.fetch(
                URLRequest(url: URL(string: "\(arguments[3])\(index).txt")!), transport: DelayedTransport())
            print("source=\(result.source) status=\(result.status)")
            fflush(nil)  // the test waits for each trial's line before the next go
        }

    case "descriptors":
        /// This process's open descriptors, each with what it refers to, but for timers: the
        /// library makes none, and the concurrency runtime makes one per clock when a timer of
        /// that clock is first armed, whoever arms it (a later one appeared under the address
        /// sanitizer, 1 run in ~3).
        func openDescriptors() -> [String] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return names.compactMap { name in
                let target =
                    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) ?? "?"
                return target == "anon_inode:[timerfd]" ? nil : "\(name) -> \(target)"
            }.sorted()
        }
        // The concurrency runtime's own (an epoll, an eventfd), made at its first use and kept,
        // are in the baseline: they are not the cache's.
        _ = await Task.detached { 0 }.value
        let baseline = openDescriptors()
        do {
            let cache = try SharedCache(directory: directory, configuration: configuration)
            let other = try SharedCache(directory: directory, configuration: configuration)
            let heard = DispatchSemaphore(value: 0)
            let subscription = cache.onRemovals { batch in for _ in batch { heard.signal() } }
            for index in 0..<20 {
                try cache.put(
                    key: keyName(index), data: body(key: keyName(index), writer: 1, version: index, size: index * 5000))
                _ = try other.get(key: keyName(index))
            }
            for index in 0..<5 { try other.remove(key: keyName(index)) }
            for _ in 0..<5 where heard.wait(timeout: .now() + 10) == .timedOut { fail("a removal was not heard") }
            subscription.cancel()
            let stream = cache.removals()
            _ = stream
            try cache.put(key: keyName(0), data: Data("again".utf8), metadata: EntryMetadata(expiry: .after(.zero)))
            try cache.checkpoint()
            _ = try cache.compact()
            _ = try other.verify()
            _ = try cache.statistics()
            try other.clear()
            _ = try cache.get(key: keyName(7))
            // A fetch lock let go keeps its file open for the next fetch of its URL, until the
            // cache goes.
            let (lock, _) = try await cache.engine.fetchLocks.acquire(
                KeyHash(key: keyName(1)), timeout: .seconds(5), describing: keyName(1))
            lock?.release()
        }
        // Released: every descriptor is closed again (a watcher thread may take a moment).
        let deadline = Date().addingTimeInterval(5)
        var after = openDescriptors()
        while after != baseline && Date() < deadline {
            usleep(10_000)
            after = openDescriptors()
        }
        print("baseline=\(baseline.count) after=\(after.count)")
        for leaked in Set(after).subtracting(baseline).sorted() { print("leaked \(leaked)") }

    #if canImport(Glibc)  // Linux system calls, for the mapped reads of pack segments
    case "bus-error":
        alarm(20)
        let (how, previous) = (arguments[3], arguments[4])
        let scratch = open("\(directory)-scratch", O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard scratch >= 0, ftruncate(scratch, 8192) == 0,
            let mapped = mmap(nil, 8192, PROT_READ, MAP_SHARED, scratch, 0), mapped != MAP_FAILED,
            ftruncate(scratch, 0) == 0
        else { fail("could not map a scratch file") }
        BusErrorWorker.pastTheEnd = UnsafeRawPointer(mapped) + 4096
        BusErrorWorker.setDisposition(previous)
        if arguments[5] == "with-cache" {
            let cache = try SharedCache(directory: directory, configuration: Configuration(memoryCostLimit: 0))
            try cache.put(key: "k", data: Data(repeating: 7, count: 1000))
            guard try cache.get(key: "k")?.data == Data(repeating: 7, count: 1000) else {
                fail("the entry did not read back")
            }
        }
        if how == "sent" {
            kill(getpid(), SIGBUS)
        } else {
            print(BusErrorWorker.touchPastTheEnd())
        }

    case "mapped-size":
        if arguments[3] == "limited" {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmSize:") } ?? ""
            guard let kilobytes = UInt64(line.split(separator: " ").dropFirst().first ?? "") else {
                fail("no VmSize")
            }
            var limit = rlimit(rlim_cur: rlim_t((kilobytes << 10) + (1 << 30)), rlim_max: rlim_t.max)
            guard setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0 else { fail("setrlimit refused") }
        }
        let cache = try SharedCache(directory: directory, configuration: Configuration(memoryCostLimit: 0))
        for index in 0..<3 { try cache.put(key: "k\(index)", data: Data(repeating: 7, count: 1000)) }
        for index in 0..<3 where try cache.get(key: "k\(index)") == nil { fail("k\(index) did not read back") }
        let packs = try FileManager.default.contentsOfDirectory(atPath: "\(directory)/packs")
        guard packs.count == 1 else { fail("expected one pack segment") }
        let segment = "\(directory)/packs/\(packs[0])"
        let mapped = fileMappings().filter { $0.path == segment }.map(\.bytes).reduce(0, +)
        let size = try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int ?? -1
        print("mapped=\(mapped) size=\(size)")
        withExtendedLifetime(cache) {}

    case "stats-cut":
        // Holds the cache open, its counters mapped, while the test cuts `stats` short; then a
        // count (a hit) touches the mapping past the file's end. Another cache opened after
        // that (as another process would) makes `stats` whole again and stores: the first must
        // see it at once, not trusting counters that now go nowhere, and within a look at the
        // journal (50 ms) count with the others again, its puts raising the end they read.
        // Twenty more caches open in the process, each with its own mapping of the counters.
        let configuration = Configuration(memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory, configuration: configuration)
        let more = try (0..<20).map { _ in try SharedCache(directory: directory, configuration: configuration) }
        try cache.put(key: "before", data: Data("b".utf8))
        guard try cache.get(key: "before") != nil else { fail("before did not read back") }
        sayReady()
        awaitGo()
        // The last opened first: the first to fault maps `stats` again at once, making it whole.
        for each in more.reversed() where try each.get(key: "before") == nil { fail("before was lost to a cache") }
        guard try cache.get(key: "before")?.data == Data("b".utf8) else { fail("before was lost") }
        let other = try SharedCache(directory: directory, configuration: configuration)
        try other.put(key: "other", data: Data("o".utf8))
        let seen = try cache.get(key: "other") != nil
        try cache.put(key: "after", data: Data("a".utf8))
        guard try cache.get(key: "after")?.data == Data("a".utf8) else { fail("after did not read back") }
        let deadline = Date().addingTimeInterval(10)
        while try cache.statistics().directory == nil, Date() < deadline {
            _ = try cache.contains(key: "after")  // a call, whose refresh looks every 50 ms
            usleep(1000)
        }
        let rejoined = try cache.statistics().directory != nil
        try cache.put(key: "last", data: Data("l".utf8))
        let announced =
            other.engine.sharedCounters?.value(.journalSequence) == (try cache.statistics()).journalSequence
        print("seen=\(seen ? 1 : 0) rejoined=\(rejoined ? 1 : 0) announced=\(announced ? 1 : 0)")

    case "blocked-read":
        let afterHandler = arguments[3] == "after-handler"
        // Installed before the cache's, so that the cache passes what is not its own on to it.
        if afterHandler { BusErrorWorker.setDisposition("blocking-handler") }
        let cache = try SharedCache(directory: directory, configuration: Configuration(memoryCostLimit: 0))
        let keys = (0..<32).map { "k\($0)" }
        for key in keys { try cache.put(key: key, data: Data(repeating: 7, count: 1000)) }
        // Often enough that the last key's region is copied from the mapping, not read.
        for _ in 0...GrowingFileMapping.preadsBeforeMapping {
            for key in keys where try cache.get(key: key) == nil { fail("\(key) did not read back") }
        }
        let packs = try FileManager.default.contentsOfDirectory(atPath: "\(directory)/packs")
        guard packs.count == 1, let first = try cache.engine.currentEntry(KeyHash(key: keys[0])) else {
            fail("expected one pack segment")
        }
        let cut = off_t(first.location.position) + off_t(first.location.length)
        guard truncate("\(directory)/packs/\(packs[0])", cut) == 0 else { fail("could not cut the segment short") }
        if afterHandler {
            pthread_kill(pthread_self(), SIGBUS)
            var current = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &current)
            guard sigismember(&current, SIGBUS) == 1 else { fail("the handler left SIGBUS unblocked") }
            exit(try cache.get(key: keys[31]) != nil ? 1 : 0)
        }
        // Read on the thread, exit here: an exit from another thread would leave this one's
        // frames unscanned, and LeakSanitizer would call what they hold leaked.
        let read = Locked<Result<Bool, SharedCacheError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            var bus = sigset_t()
            sigemptyset(&bus)
            sigaddset(&bus, SIGBUS)
            pthread_sigmask(SIG_BLOCK, &bus, nil)
            let found = Result { () throws(SharedCacheError) in try cache.get(key: keys[31]) != nil }
            read.withLock { $0 = found }
            done.signal()
        }.start()
        done.wait()
        switch read.withLock({ $0 }) {
        case .success(let hit)?: exit(hit ? 1 : 0)
        case .failure(let error)?: fail("\(error)")
        case nil: fail("the reading thread said nothing")
        }
    #endif

    default:
        fail("unknown command \(arguments[1])")
    }
} catch let error as SharedCacheError {
    fail("\(error.code): \(error)")
} catch {
    fail("\(error)")
}
