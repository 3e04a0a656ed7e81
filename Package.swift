// swift-tools-version:6.1
import PackageDescription


let package = Package(
    name: "swift-shared-cache",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "SharedCache", targets: ["SharedCache"]),
        .executable(name: "sharedcache", targets: ["sharedcache"]),
        .executable(name: "sharedcached", targets: ["sharedcached"]),
    ],
    targets: [
        // The layers, each depending only on those above it in this list; `grep` finds no import
        // of a later one in an earlier one, and the compiler refuses it.
        //
        // C: CRC32C and SHA-256 on the CPU's instructions, and the calls Swift's Glibc lacks.
        .target(name: "CSharedCacheSupport"),
        // The operating system, mirrored: every system call, one errno policy, owned file
        // descriptors, flock with a bounded wait, the directory handle files are opened through.
        .target(name: "SharedCachePlatform", dependencies: ["CSharedCacheSupport"]),
        // Bytes only: the on-disk records and their checksums. No I/O, no process state.
        .target(name: "SharedCacheFormat", dependencies: ["CSharedCacheSupport"]),
        // The storage engine: the directory's layout, the journal, the manifest, the locks, the
        // index that follows the journal, where bodies live, watching, compaction.
        .target(name: "SharedCacheEngine", dependencies: ["SharedCachePlatform", "SharedCacheFormat"]),
        // The public library: the `SharedCache` facade over the engine, and HTTP on top of it.
        .target(name: "SharedCache", dependencies: ["SharedCacheEngine", "SharedCachePlatform", "SharedCacheFormat"]),
        // What both command-line tools share: argument grammar, exit statuses, output, the
        // compactor loop (sharedcached runs it; sharedcache demo runs it as a child process), and
        // the child-process helper the demo, the benchmark, the stress run and the tests use.
        .target(
            name: "SharedCacheCLI",
            dependencies: ["SharedCache", "SharedCachePlatform", "CSharedCacheSupport"],
            path: "Tools/SharedCacheCLI"
        ),
        // Fixtures for the benchmark, the stress run, the fuzzer, the test worker and the tests,
        // kept out of the two shipped tools: nginx on loopback, verifiable bodies, seeded randomness.
        .target(
            name: "SharedCacheTestSupport",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/SharedCacheTestSupport"
        ),
        .executableTarget(
            name: "sharedcache",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI"],
            path: "Tools/sharedcache"
        ),
        .executableTarget(
            name: "sharedcached",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI"],
            path: "Tools/sharedcached"
        ),
        .executableTarget(
            name: "sharedcache-bench",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI", "SharedCacheTestSupport"],
            path: "Tools/sharedcache-bench"
        ),
        // A seeded mutation fuzzer of the decoders and the argument parser.
        .executableTarget(
            name: "sharedcache-fuzz",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI", "SharedCacheTestSupport"],
            path: "Tools/sharedcache-fuzz"
        ),
        // Many processes, crashes and a checker of the invariants.
        .executableTarget(
            name: "sharedcache-stress",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI", "SharedCacheTestSupport"],
            path: "Tools/sharedcache-stress"
        ),
        // Power loss: crash states built from recorded system calls, each opened and checked.
        .executableTarget(
            name: "sharedcache-crash",
            dependencies: [
                "SharedCache", "SharedCacheEngine", "SharedCacheFormat", "SharedCachePlatform", "SharedCacheCLI",
                "SharedCacheTestSupport",
            ],
            path: "Tools/sharedcache-crash"
        ),
        // Spawned by the multi-process and crash tests: one process doing scripted cache work.
        .executableTarget(
            name: "sharedcache-test-worker",
            dependencies: ["SharedCache", "SharedCachePlatform", "SharedCacheCLI", "SharedCacheTestSupport"],
            path: "Tests/Helpers/sharedcache-test-worker"
        ),
        .testTarget(
            name: "SharedCacheTests",
            dependencies: [
                "SharedCache", "SharedCacheEngine", "SharedCacheFormat", "SharedCachePlatform", "SharedCacheCLI",
                "SharedCacheTestSupport",
                "sharedcache-test-worker", "sharedcache", "sharedcached",
                "sharedcache-fuzz", "sharedcache-stress", "sharedcache-crash",
            ],
            // A directory of format version 1, made by that version, which the upgrade tests open.
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// One settings array for every Swift target, as swift-log applies its own: Swift 6 mode (strict
// concurrency) comes from `swiftLanguageModes` above; these add the checks we want on top.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
for target in package.targets where target.name != "CSharedCacheSupport" {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
