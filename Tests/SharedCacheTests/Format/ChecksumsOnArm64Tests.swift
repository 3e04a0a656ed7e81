import Foundation
import SharedCacheCLI
import Testing

/// The ARMv8 CRC32 and SHA-2 paths, which no test on this x86-64 machine runs natively: the C
/// sources cross-compiled for aarch64 and run under qemu-user (`Tests/Helpers/arm64-checksums`).
/// Built for plain ARMv8-A, the code asks the CPU for the instructions at run time (as generic
/// Linux builds and Apple's arm64 iOS builds, which target the A7, must); built for a CPU that
/// has them, it uses them outright.
@Suite(
    "CRC32C and SHA-256 on arm64, under qemu",
    .enabled(
        if: Requirements.isInstalled(Arm64.compiler) && Requirements.isInstalled(Arm64.emulator),
        "needs gcc-aarch64-linux-gnu and qemu-user-static"))
struct ChecksumsOnArm64Tests {
    /// Built by the cross compiler, or compiled by the toolchain's clang (what SwiftPM builds
    /// the C with) and linked by the cross compiler, which has the aarch64 C library.
    @Test(arguments: ["gcc", "clang"], ["armv8-a", "armv8-a+crc+crypto"])
    func theInstructionsAgreeWithTheReferences(compiler: String, architecture: String) async throws {
        let directory = try TemporaryDirectory()
        let executable = directory("check")
        let flags = ["-march=\(architecture)", "-O2", "-Wall", "-Wextra", "-Werror", "-I", "\(Arm64.sources)/include"]
        let sources = ["\(Arm64.sources)/crc32c.c", "\(Arm64.sources)/sha256.c", Arm64.harness]
        var objects = sources
        if compiler == "clang" {
            let clang = try #require(Arm64.clang, "no clang on PATH")
            // A loop, not a map, so that each compile can be awaited in turn.
            for (index, source) in sources.enumerated() {
                let object = directory("\(index).o")
                let (compiled, output) = try await offThePool {
                    try ChildProcess.run(
                        URL(fileURLWithPath: clang),
                        arguments: ["--target=aarch64-linux-gnu", "--sysroot=/usr/aarch64-linux-gnu"] + flags
                            + ["-c", source, "-o", object])
                }
                try #require(compiled == .exited(0), "\(output)")
                objects[index] = object
            }
        }
        let (linked, output) = try await offThePool { [objects] in
            try ChildProcess.run(
                URL(fileURLWithPath: Arm64.compiler), arguments: flags + ["-static"] + objects + ["-o", executable])
        }
        try #require(linked == .exited(0), "\(output)")
        // qemu's "max" CPU has both extensions, so the run-time check must find them.
        let (ran, printed) = try await offThePool {
            try ChildProcess.run(URL(fileURLWithPath: Arm64.emulator), arguments: ["-cpu", "max", executable, "1"])
        }
        #expect(ran == .exited(0), "\(printed)")
    }
}

/// The cross compiler, the emulator, and what they build.
private enum Arm64 {
    static let compiler = "/usr/bin/aarch64-linux-gnu-gcc"
    static let emulator = "/usr/bin/qemu-aarch64-static"
    /// The toolchain's clang: on `PATH`, or beside the file `swift` on `PATH` resolves to
    /// (SwiftPM compiles the package's C with it, so it is there).
    static let clang: String? = {
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let beside = folders.map { URL(fileURLWithPath: "\($0)/swift").resolvingSymlinksInPath() }
            .filter { FileManager.default.isExecutableFile(atPath: $0.path) }
            .map { $0.deletingLastPathComponent().path }
        return (folders + beside).map { "\($0)/clang" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../Sources/CSharedCacheSupport").standardized.path
    static let harness = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Helpers/arm64-checksums/check.c").standardized.path
}
