import Foundation
import SharedCacheCLI
import SharedCacheTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `put` and `get` stream bodies a megabyte at a time: a body over 2 GiB comes back byte for
/// byte, memory stays small, and an output file appears only when its body is whole and checked.
@Suite("sharedcache, bodies streamed through put and get")
struct BodyStreamingTests {
    let directory: TemporaryDirectory
    var cache: String { directory("cache") }
    /// How much more memory than a put or get of one byte a large one may take: the budget is
    /// 64 MB in all, and a sanitizer's runtime and shadow memory add the same to both.
    static let growthLimitKilobytes = 32 * 1024

    init() throws {
        directory = try TemporaryDirectory()
    }

    func run(_ arguments: String..., input: Data? = nil) async throws -> Worker.Result {
        try await Tool.admin.run(arguments, input: input, environment: ["SHAREDCACHE_DIR": cache])
    }

    /// Runs the tool asking it to report its peak memory on its way out.
    func measured(_ arguments: String..., input: Data? = nil) async throws -> Worker.Result {
        try await Tool.admin.run(
            arguments, input: input, environment: ["SHAREDCACHE_DIR": cache, "SHAREDCACHE_REPORT_PEAK_MEMORY": "1"])
    }

    /// The peak resident memory the tool reported on its way out, in kilobytes.
    func peakKilobytes(_ result: Worker.Result) -> Int? {
        peakKilobytes(result.errors)
    }

    /// How much more memory a measured run of the tool took than a put and a get of one byte
    /// (whichever peaked higher); `Int.max` when it did not say.
    func growthKilobytes(_ errors: String) async throws -> Int {
        let baseline =
            try await [
                peakKilobytes(measured("put", "baseline", input: Data("x".utf8))),
                peakKilobytes(measured("get", "baseline")),
            ].map { $0 ?? 0 }.max() ?? 0
        guard let peak = peakKilobytes(errors) else { return .max }
        return peak - baseline
    }

    func peakKilobytes(_ errors: String) -> Int? {
        errors.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: "peak-resident-kilobytes=") else { return nil }
            return Int(line[range.upperBound...])
        }.last
    }

    /// Bytes that are not zeros anywhere (so no run of them is left as a hole), different in
    /// every megabyte.
    static func body(megabytes: Int, seed: UInt64) -> Data {
        var generator = SplitMix64(seed: seed)
        var block = Data((0..<(1 << 20)).map { _ in UInt8.random(in: 1...255, using: &generator) })
        var data = Data(capacity: megabytes << 20)
        for index in 0..<megabytes {
            block[0] = UInt8(truncatingIfNeeded: index) | 1
            block[1] = UInt8(truncatingIfNeeded: index >> 8) | 1
            data.append(block)
        }
        return data
    }

    /// Issue 18: a body over 2 GiB came back with its tail replaced by its head (a short
    /// write(2) restarted from the start of the buffer) and exit 0.
    @Test func aBodyOver2GiBComesBackByteForByte() async throws {
        let size: UInt64 = (2 << 30) + 4
        let source = directory("big.bin")
        #expect(FileManager.default.createFile(atPath: source, contents: Data("HEAD".utf8)))
        let handle = try #require(FileHandle(forWritingAtPath: source))
        try handle.seek(toOffset: size - 4)
        try handle.write(contentsOf: Data("TAIL".utf8))
        try handle.close()

        let put = try await measured("put", "big", source)
        #expect(put.status == 0, "\(put.errors)")
        #expect(try await growthKilobytes(put.errors) < Self.growthLimitKilobytes)
        let show = try await run("show", "big", "--json")
        let entry = try #require(JSONSerialization.jsonObject(with: Data(show.output.utf8)) as? [String: Any])
        #expect((entry["size"] as? NSNumber)?.uint64Value == size)

        let copy = directory("copy.bin")
        let get = try await measured("get", "big", "-o", copy)
        #expect(get.status == 0, "\(get.errors)")
        #expect(try await growthKilobytes(get.errors) < Self.growthLimitKilobytes)
        #expect(
            try sparseContents(of: copy) == SparseContents(size: size, head: "HEAD", tail: "TAIL", zerosBetween: true))
    }

    struct SparseContents: Equatable {
        var size: UInt64
        var head: String
        var tail: String
        /// Whether every byte between the first four and the last four is zero.
        var zerosBetween: Bool
    }

    /// What a large, mostly empty file holds, read without reading its holes (SEEK_DATA and
    /// SEEK_HOLE skip them; where the filesystem cannot tell, the whole file is data and read).
    func sparseContents(of path: String) throws -> SparseContents {
        // lseek(2)'s whences, which the Glibc module does not import (they need _GNU_SOURCE).
        #if os(Linux)
        let (seekData, seekHole): (Int32, Int32) = (3, 4)
        #else
        let (seekData, seekHole): (Int32, Int32) = (4, 3)
        #endif
        let file = open(path, O_RDONLY)
        #expect(file >= 0)
        defer { close(file) }
        var status = stat()
        #expect(fstat(file, &status) == 0)
        let size = Int64(status.st_size)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        func bytes(at offset: Int64, count: Int) -> [UInt8] {
            Array(
                buffer.withUnsafeMutableBytes { raw in raw.prefix(pread(file, raw.baseAddress, count, off_t(offset))) })
        }
        let head = String(decoding: bytes(at: 0, count: 4), as: UTF8.self)
        let tail = String(decoding: bytes(at: size - 4, count: 4), as: UTF8.self)
        var zerosBetween = true
        var offset: Int64 = 4
        while offset < size - 4 {
            let data = Int64(lseek(file, off_t(offset), seekData))
            if data < 0 || data >= size - 4 { break }
            let hole = min(Int64(lseek(file, off_t(data), seekHole)), size - 4)
            var position = data
            while position < hole {
                let chunk = bytes(at: position, count: Int(min(Int64(buffer.count), hole - position)))
                if chunk.isEmpty { break }
                zerosBetween = zerosBetween && !chunk.contains { $0 != 0 }
                position += Int64(chunk.count)
            }
            offset = hole
        }
        return SparseContents(size: UInt64(size), head: head, tail: tail, zerosBetween: zerosBetween)
    }

    /// Holes are skipped, not read, on the way in and out, and their zeros are still in the
    /// checksum: `verify` reads the blob whole and checks it as any get does.
    @Test func holesAreSkippedAndStillChecksummed() async throws {
        var seeds = TestSeed.generator("holesAreSkippedAndStillChecksummed")
        let seed = seeds.next()
        let data = Self.body(megabytes: 2, seed: seed)
        let source = directory("sparse.bin")
        #expect(FileManager.default.createFile(atPath: source, contents: data.prefix(1 << 20)))
        let handle = try #require(FileHandle(forWritingAtPath: source))
        try handle.seek(toOffset: 7 << 20)  // a 6 MiB hole
        try handle.write(contentsOf: data.suffix(1 << 20))
        try handle.truncate(atOffset: (10 << 20) + 12_345)  // and one to the end
        try handle.close()
        let expected = try Data(contentsOf: URL(fileURLWithPath: source))

        #expect(try await run("put", "sparse", source).status == 0)
        #expect(try await run("verify").status == 0)
        let stdout = try Tool.admin.start(["get", "sparse"], environment: ["SHAREDCACHE_DIR": cache])
        #expect(await offThePool { stdout.output?.remainingData() } == expected, "\(TestSeed.replay)")
        await stdout.wait()
        #expect(try await run("get", "sparse", "-o", directory("copy.bin")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("copy.bin"))) == expected, "\(TestSeed.replay)")
        // From a pipe, the zeros arrive as bytes and are written as holes all the same.
        #expect(try await run("put", "piped", input: expected).status == 0)
        #expect(try await run("verify").status == 0, "\(TestSeed.replay)")
        #expect(try await run("get", "piped", "-o", directory("piped.bin")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("piped.bin"))) == expected, "\(TestSeed.replay)")
    }

    /// A file that starts with a hole longer than the pack threshold: its zeros overflow the
    /// buffer that decides packing, and the blob must still get every zero past the buffer's
    /// (mutation: they were dropped, and the body stored short, with nothing noticing). (A
    /// hole after data is read as bytes up to there: `pread` reads through holes.)
    @Test func aHoleAcrossThePackThresholdKeepsEveryZero() async throws {
        let source = directory("hole.bin")
        #expect(FileManager.default.createFile(atPath: source, contents: Data()))
        let handle = try #require(FileHandle(forWritingAtPath: source))
        try handle.seek(toOffset: 1 << 20)  // a 1 MiB hole, across the 128 KiB threshold
        try handle.write(contentsOf: Data("TAIL".utf8))
        try handle.close()
        let expected = try Data(contentsOf: URL(fileURLWithPath: source))

        #expect(try await run("put", "hole", source).status == 0)
        #expect(try await run("verify").status == 0)
        #expect(try await run("get", "hole", "-o", directory("copy.bin")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("copy.bin"))) == expected)
    }

    /// A streamed body is packed when it fits the pack threshold, as a body put whole is: one
    /// of exactly the threshold goes into a pack segment, one a byte longer into a blob file
    /// (mutation: the buffer that decides was a byte short, so a body at the threshold never
    /// showed its end there and went to a blob).
    @Test func aStreamedBodyAtThePackThresholdIsPacked() async throws {
        #expect(try await run("put", "small", input: Data("small".utf8)).status == 0)
        let stat = try await run("stat", "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(stat.output.utf8)) as? [String: Any])
        let threshold = try #require(report["packThreshold"] as? Int)
        let body = Data((0..<threshold).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) })

        #expect(try await run("put", "at the threshold", input: body).status == 0)
        #expect(try blobFiles(in: cache).isEmpty)
        #expect(try await run("put", "past the threshold", input: body + Data([1])).status == 0)
        #expect(try blobFiles(in: cache).count == 1)
        #expect(try await run("get", "at the threshold", "-o", directory("copy.bin")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("copy.bin"))) == body)
        #expect(try await run("verify").status == 0)
    }

    /// Standard input to the cache and the cache to standard output, in bounded memory.
    @Test func standardInputAndOutputStreamInBoundedMemory() async throws {
        var seeds = TestSeed.generator("standardInputAndOutputStreamInBoundedMemory")
        let seed = seeds.next()
        let body = Self.body(megabytes: 96, seed: seed)
        let put = try await measured("put", "piped", input: body)
        #expect(put.status == 0, "\(put.errors)")
        #expect(try await growthKilobytes(put.errors) < Self.growthLimitKilobytes)

        let get = try Tool.admin.start(
            ["get", "piped"], environment: ["SHAREDCACHE_DIR": cache, "SHAREDCACHE_REPORT_PEAK_MEMORY": "1"])
        let output = await offThePool { get.output?.remainingData() }
        let errors = await offThePool { get.errors?.remainingText() ?? "" }
        #expect(await get.wait() == .exited(0))
        #expect(output == body, "\(TestSeed.replay)")
        #expect(try await growthKilobytes(errors) < Self.growthLimitKilobytes)
    }

    /// A body that fails its checksum while being copied is a miss, and the output file is not
    /// published: no file, no temporary file left beside it. Standard output gets nothing.
    @Test func aDamagedBodyIsNeverWrittenOut() async throws {
        let body = Self.body(megabytes: 3, seed: 18)
        for target in ["file", "stdout"] {
            #expect(try await run("put", "damaged", input: body).status == 0)
            let blob = try #require(try blobFiles(in: cache).first)
            try flipByte(at: -100, inFileAt: "\(cache)/blobs/\(blob)")  // in the last megabyte
            try await expectNothingWrittenOut(of: "damaged", to: target)
        }
    }

    /// `get KEY` of a damaged body, to a file (`target` "file") or standard output: it exits 1,
    /// writes nothing, and the entry is journaled as corrupt.
    func expectNothingWrittenOut(of key: String, to target: String) async throws {
        let folder = directory("out-\(target)")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let result = target == "file" ? try await run("get", key, "-o", "\(folder)/body") : try await run("get", key)
        #expect(result.status == 1)
        #expect(result.output.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
        #expect(try await run("show", key).status == 1)  // journaled as corrupt
    }

    /// The same for a packed body, which is read whole and checked before any of it is handed
    /// on (mutation: a packed body streamed out unchecked, damaged bytes and all, exit 0).
    @Test func aDamagedPackedBodyIsNeverWrittenOut() async throws {
        let body = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        for target in ["file", "stdout"] {
            #expect(try await run("put", "damaged", input: body).status == 0)
            #expect(try blobFiles(in: cache).isEmpty)
            let segment = try #require(try packSegments(in: cache).first)
            let path = "\(cache)/packs/\(segment)"
            // The newest record of the body is the one the entry names.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let stored = try #require(bytes.range(of: body, options: .backwards))
            try flipByte(at: Int64(stored.lowerBound + 500), inFileAt: path)
            try await expectNothingWrittenOut(of: "damaged", to: target)
        }
    }

    /// Issue 18: `get -o DIRECTORY` said "NSCocoaErrorDomain error 512".
    @Test func anOutputThatCannotBeCreatedExits73() async throws {
        #expect(try await run("put", "k", input: Data("v".utf8)).status == 0)
        let folder = directory("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for destination in [folder, folder + "/", directory("missing/body")] {
            let result = try await run("get", "k", "-o", destination)
            #expect(result.status == 73)
            #expect(isOneHumanLine(result.errors), "\(result.errors)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }

    /// A FIFO (or device) named with -o is written as a stream, never replaced by a file. (An
    /// atomic write renames over it: run as root, `get -o /dev/null` replaced /dev/null with a
    /// regular file, so this test uses a FIFO of its own.)
    @Test func anOutputFIFOIsWrittenNotReplaced() async throws {
        #expect(try await run("put", "k", input: Data("through a fifo".utf8)).status == 0)
        let fifo = directory("out.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        // Held open for reading and writing (which never waits) so the tool's open does not wait
        // either, and so nothing hangs if the FIFO is replaced instead of written.
        let reader = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        #expect(reader >= 0)
        defer { close(reader) }
        #expect(try await run("get", "k", "-o", fifo).status == 0)
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(reader, &buffer, buffer.count)
        #expect(count > 0 && Data(buffer[..<count]) == Data("through a fifo".utf8))
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
    }

    /// Issue 18: `put k /dev/null` failed while `put k < /dev/null` worked. A device named as
    /// FILE is read as a stream.
    @Test(.enabled(if: isCharacterDevice("/dev/null"), "/dev/null is not a character device on this machine"))
    func putReadsADevice() async throws {
        #expect(try await run("put", "empty", "/dev/null").status == 0)
        let empty = try await run("get", "empty")
        #expect(empty.status == 0 && empty.output.isEmpty)
    }

    /// A FIFO named as FILE is read as a stream too.
    @Test func putReadsAFIFO() async throws {

        let fifo = directory("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let writer = Thread {
            // Opening a FIFO for writing waits for its reader: the tool.
            guard let handle = FileHandle(forWritingAtPath: fifo) else { return }
            handle.write(Data("through a fifo".utf8))
            try? handle.close()
        }
        writer.start()
        #expect(try await run("put", "fifo", fifo).status == 0)
        #expect(try await run("get", "fifo").output == "through a fifo")
        #expect(try await run("put", "k", directory("")).status == 66)  // a directory is not a body
    }
}

func isCharacterDevice(_ path: String) -> Bool {
    var status = stat()
    return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFCHR
}

/// One line on stderr, `sharedcache: …`, with no Swift or Foundation debug text in it.
func isOneHumanLine(_ errors: String) -> Bool {
    let lines = errors.split(separator: "\n", omittingEmptySubsequences: false)
    guard lines.count == 2, lines[1].isEmpty, lines[0].hasPrefix("sharedcache") else { return false }
    let debugText = ["NSCocoaErrorDomain", "Error Domain=", "invalidField(", "unsupportedVersion(", "SystemError("]
    return !debugText.contains { lines[0].contains($0) }
}
