// swift-tools-version:6.0
import PackageDescription

// The target list reads like ../shared/design/ARCHITECTURE.md: C shims at the bottom,
// value types in KilnCore, libav only in MediaEngine, the planner pure.

// The media child (`prep-artifact` and the targets under it) loads neither Foundation nor
// Dispatch, nor the concurrency and regex runtimes every Swift module imports implicitly:
// together ~5 MB of resident memory and ~2 ms of start-up in each child, which the remux
// benchmark measures against the ffmpeg command (docs/NOTES.md). A test checks the binary.
let mediaChild: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import",
                  "-Xfrontend", "-disable-implicit-concurrency-module-import"]),
]
let package = Package(
    name: "Kiln",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "prep-artifact", targets: ["prep-artifact"]),
        .executable(name: "kiln", targets: ["kiln"]),
    ],
    targets: [
        // All C lives here: libav headers, wrappers for the macros Swift cannot import,
        // the interrupt flag C reads atomically and the log ring buffer. libavfilter is not
        // linked: the shim dlopens it for the first filter graph, so probe and remux children
        // do not load it and its ~30 dependencies (dlopen is in glibc's libc since 2.34).
        .target(
            name: "CFFmpeg",
            linkerSettings: [
                .linkedLibrary("avformat"), .linkedLibrary("avcodec"), .linkedLibrary("avutil"),
                .linkedLibrary("swresample"), .linkedLibrary("swscale"),
            ]
        ),
        // libcrypto (OpenSSL) for SHA-256: artifact checksums, fingerprints, artifact keys.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "KilnCore", dependencies: ["CCrypto"], swiftSettings: mediaChild),
        .target(name: "MediaEngine", dependencies: ["CFFmpeg", "KilnCore"], swiftSettings: mediaChild),
        .target(name: "Planner", dependencies: ["KilnCore"], swiftSettings: mediaChild),
        // The farm: durable state (Store, SQLite behind a protocol) and the scheduler,
        // runners, retries, garbage collection and events over it (Farm).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "Store", dependencies: ["CSQLite", "KilnCore"]),
        .target(name: "Farm", dependencies: ["Store", "Planner", "KilnCore"]),
        // The daemon: its HTTP API over the farm (a library, so tests can run it in-process)
        // and the `kiln` command.
        .target(name: "KilnAPI", dependencies: ["Farm", "Store", "HTTPServer", "Planner", "KilnCore"]),
        .executableTarget(name: "kiln", dependencies: ["KilnAPI", "Farm", "Store", "HTTPServer", "Planner", "KilnCore"]),
        // The farm's and the daemon's own figures for `make bench` (fake child, no media).
        .executableTarget(name: "kiln-bench", dependencies: ["KilnAPI", "Farm", "Store", "HTTPServer", "Planner", "KilnCore",
                                                             "KilnTestSupport"]),
        // prctl and friends, for child processes that must not outlive the daemon.
        .target(name: "CProcess"),
        // libmicrohttpd (Debian's libmicrohttpd-dev) plus C wrappers for its variadic
        // functions (MHD_start_daemon, MHD_get_*_info), which Swift cannot call.
        .target(name: "CMicroHTTPD", linkerSettings: [.linkedLibrary("microhttpd")]),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"]),
        .executableTarget(name: "prep-artifact", dependencies: ["MediaEngine", "Planner", "KilnCore", "CProcess"],
                         swiftSettings: mediaChild),
        // Test helpers shared by the test targets: the real media, ffprobe, child processes.
        .target(name: "KilnTestSupport", dependencies: ["KilnCore"], path: "Tests/TestSupport"),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "KilnCoreTests", dependencies: ["KilnCore", "KilnTestSupport"]),
        .testTarget(name: "PlannerTests", dependencies: ["Planner", "KilnCore"]),
        .testTarget(name: "MediaEngineTests", dependencies: ["MediaEngine", "Planner", "KilnCore", "KilnTestSupport"]),
        .testTarget(name: "StoreTests", dependencies: ["Store", "KilnCore", "KilnTestSupport"]),
        .testTarget(name: "FarmTests", dependencies: ["Farm", "Store", "Planner", "KilnCore", "KilnTestSupport", "prep-artifact"]),
        .testTarget(name: "KilnAPITests", dependencies: ["KilnAPI", "Farm", "Store", "HTTPServer", "Planner", "KilnCore", "KilnTestSupport", "prep-artifact", "kiln"]),
        .testTarget(name: "PrepArtifactTests", dependencies: ["prep-artifact", "KilnCore", "KilnTestSupport"]),
    ]
)
