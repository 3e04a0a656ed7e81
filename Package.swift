// swift-tools-version:6.1
import PackageDescription

// One settings array for every Swift target: Swift 6 mode (strict concurrency) comes from
// `swiftLanguageModes` below; these add the checks we want on top.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-shared-cache",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "SharedCache", targets: ["SharedCache"]),
        .executable(name: "sharedcache", targets: ["sharedcache"]),
        .executable(name: "sharedcached", targets: ["sharedcached"]),
        .executable(name: "sharedcache-bench", targets: ["sharedcache-bench"]),
        .executable(name: "sharedcache-fuzz", targets: ["sharedcache-fuzz"]),
        .executable(name: "sharedcache-stress", targets: ["sharedcache-stress"]),
    ],
    targets: [
        // Checksums, the key hash and the one syscall Swift's Glibc does not import (renameat2).
        .target(name: "CSharedCacheSupport"),
        .target(
            name: "SharedCache",
            dependencies: ["CSharedCacheSupport"],
            swiftSettings: swiftSettings
        ),
        // What both command-line tools share: argument grammar, exit statuses, output, and the
        // compactor loop (sharedcached runs it; sharedcache demo runs it as a child process).
        .target(
            name: "SharedCacheCLI",
            dependencies: ["SharedCache"],
            path: "Tools/SharedCacheCLI",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sharedcache",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/sharedcache",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sharedcached",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/sharedcached",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sharedcache-bench",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/sharedcache-bench",
            swiftSettings: swiftSettings
        ),
        // A seeded mutation fuzzer of the decoders and the argument parser.
        .executableTarget(
            name: "sharedcache-fuzz",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/sharedcache-fuzz",
            swiftSettings: swiftSettings
        ),
        // Many processes, crashes and a checker of the invariants.
        .executableTarget(
            name: "sharedcache-stress",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tools/sharedcache-stress",
            swiftSettings: swiftSettings
        ),
        // Spawned by the multi-process and crash tests: one process doing scripted cache work.
        .executableTarget(
            name: "sharedcache-test-worker",
            dependencies: ["SharedCache", "SharedCacheCLI"],
            path: "Tests/Helpers/sharedcache-test-worker",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SharedCacheTests",
            dependencies: [
                "SharedCache", "SharedCacheCLI", "sharedcache-test-worker", "sharedcache", "sharedcached",
                "sharedcache-fuzz", "sharedcache-stress",
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
