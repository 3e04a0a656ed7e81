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

    @Test(arguments: ["armv8-a", "armv8-a+crc+crypto"])
    func theInstructionsAgreeWithTheReferences(architecture: String) throws {
        let directory = try TemporaryDirectory()
        let executable = directory("check")
        let (compiled, compilerOutput) = try ChildProcess.run(
            URL(fileURLWithPath: Arm64.compiler),
            arguments: [
                "-march=\(architecture)", "-O2", "-static", "-Wall", "-Wextra", "-Werror",
                "-I", "\(Arm64.sources)/include",
                "\(Arm64.sources)/crc32c.c", "\(Arm64.sources)/sha256.c", Arm64.harness, "-o", executable,
            ])
        try #require(compiled == .exited(0), "\(compilerOutput)")
        // qemu's "max" CPU has both extensions, so the run-time check must find them.
        let (ran, printed) = try ChildProcess.run(
            URL(fileURLWithPath: Arm64.emulator), arguments: ["-cpu", "max", executable, "1"])
        #expect(ran == .exited(0), "\(printed)")
    }
}

/// The cross compiler, the emulator, and what they build.
private enum Arm64 {
    static let compiler = "/usr/bin/aarch64-linux-gnu-gcc"
    static let emulator = "/usr/bin/qemu-aarch64-static"
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../Sources/CSharedCacheSupport").standardized.path
    static let harness = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Helpers/arm64-checksums/check.c").standardized.path
}
