// swift-tools-version:6.0
// AppHost: the iOS background-execution model for Linux processes.
import PackageDescription

let package = Package(
    name: "AppHost",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "apphost", targets: ["apphost"]),
        .library(name: "AppKitLess", targets: ["AppKitLess"]),
        .library(name: "Host", targets: ["Host"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        // Scenario files (`apphost test`): YAML, with each node's line and column for errors.
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        // The push gateway's provider tokens (APNs token-based authentication: ES256 JWTs).
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
    ],
    targets: [
        // Mechanism: one small C file, prefixed aph_, returning 0 or an errno.
        .target(
            name: "CAppHostSys",
            linkerSettings: [.linkedLibrary("seccomp")]
        ),
        // What host and app both need: IPC messages, frames, manifest model, codes. Every
        // app links it: nothing that reads the host's own inputs (decision 0038).
        .target(name: "AppHostProtocol"),
        // The host's reader of app bundles: Info.plist (build settings expanded),
        // entitlements, .xcconfig files. Untrusted input, fuzzed (scripts/fuzz.sh).
        .target(name: "AppHostManifest", dependencies: ["AppHostProtocol"]),
        // The host's configuration file (`--config`): budgets, limits, identities, memory,
        // transfers; durations and sizes as text.
        .target(name: "HostConfig", dependencies: ["AppHostProtocol"]),
        // The run-loop stamp page's two words, stored and loaded atomically on a raw
        // pointer (shared memory): AppKitLess writes them, the host reads them.
        .target(name: "CAppHostStamp"),
        // OS wrappers: spawn, pidfd, reaper thread, /proc readers, file locks.
        .target(
            name: "AppHostSystem",
            dependencies: [
                "CAppHostSys",
                "CAppHostStamp",
                "AppHostProtocol",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The host daemon: registry, lifecycle, supervisor, storage, control server.
        .target(
            name: "Host",
            dependencies: [
                "AppHostProtocol",
                "AppHostManifest",
                "HostConfig",
                "Plugins",
                "AppHostSystem",
                "Snapshots",
                // The transfer daemon's command line, rendered to start it.
                "TransferOptions",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        // One plugin per background mode behind one protocol, and their host side.
        // AppHostManifest for the linter, HostConfig for durations as text.
        .target(name: "Plugins", dependencies: ["AppHostProtocol", "AppHostManifest", "HostConfig"]),
        // The SDK apps link. Nothing of the host here but the protocol (and the stamp
        // page's atomics, which are part of it).
        .target(name: "AppKitLess", dependencies: ["AppHostProtocol", "CAppHostStamp"]),
        // Policy tests as files (`apphost test`): the scenario model read from YAML/JSON,
        // the runner that drives a private in-process host on the virtual clock, and the
        // reports (text, JUnit, JSON, HTML with SVG timelines).
        .target(
            name: "Scenarios",
            dependencies: [
                "Host", "AppHostProtocol", "HostConfig", "AppHostSystem", "Plugins", "Snapshots",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The CLI.
        .executableTarget(
            name: "apphost",
            dependencies: [
                "Host",
                "Scenarios",
                "Plugins",
                "AppHostProtocol",
                "AppHostManifest",
                "HostConfig",
                "AppHostSystem",
                "Snapshots",
                // `demo` act 4: the loopback server the background download comes from.
                "LoopbackHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Sample apps (manifests in manifests/).
        .executableTarget(name: "PlainApp", dependencies: ["AppKitLess"], path: "Samples/PlainApp"),
        .executableTarget(name: "TaskHolderApp", dependencies: ["AppKitLess"], path: "Samples/TaskHolderApp"),
        // AppHostProtocol for `--raw-unread`, which speaks the IPC without AppKitLess.
        .executableTarget(name: "ProbeApp", dependencies: ["AppKitLess", "AppHostProtocol"], path: "Samples/ProbeApp"),
        .executableTarget(name: "RadioApp", dependencies: ["AppKitLess"], path: "Samples/RadioApp"),
        .executableTarget(name: "TrackerApp", dependencies: ["AppKitLess"], path: "Samples/TrackerApp"),
        .executableTarget(name: "PhoneApp", dependencies: ["AppKitLess"], path: "Samples/PhoneApp"),
        // One banking screen behind three bundles (Bank, BankLeaky, BankCover): app-switcher snapshots.
        .executableTarget(name: "BankApp", dependencies: ["AppKitLess"], path: "Samples/BankApp"),
        // An app that tries to escape its sandbox, one attempt at a time (the escape suite).
        // CAppHostSys for raw syscalls (ptrace, bpf, pidfd_getfd...), AppHostProtocol to
        // talk to the control socket if it reaches it.
        .executableTarget(name: "HostileApp", dependencies: ["AppKitLess", "AppHostProtocol", "CAppHostSys"], path: "Samples/HostileApp"),
        // Tests a sandboxed child runs to report what the sandbox allows.
        .executableTarget(name: "aph-sandbox-check", dependencies: ["CAppHostSys"], path: "Samples/SandboxCheck"),
        // Benchmarks: figures and ratios against a baseline in the same run.
        .executableTarget(
            name: "apphost-bench",
            dependencies: [
                "Host", "AppHostSystem", "AppHostProtocol", "HostConfig", "Plugins",
                // `transfers`: the loopback server the daemon and both baselines fetch from.
                "LoopbackHTTP",
                // `snapshot`: render + redact + PNG encode.
                "Snapshots",
                // `scenarios`: a private host's start + stop, and the scenarios/ios suite.
                "Scenarios",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Benchmarks/apphost-bench"
        ),
        // The transfer daemon's command line, typed (swift-argument-parser): the daemon
        // parses it, the host renders it (`arguments`). Not in AppHostProtocol, which apps
        // link (decision 0038).
        .target(
            name: "TransferOptions",
            dependencies: ["AppHostProtocol", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The shared background-transfer daemon (iOS's background URLSession).
        .target(
            name: "TransferCore",
            dependencies: [
                // AppHostSystem's wrappers (WriteBack, BeneathPath), never the C shim directly.
                "AppHostProtocol", "AppHostSystem",
                // Its configuration from its command line.
                "TransferOptions",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // A thin @main command over TransferCore.
        .executableTarget(
            name: "apphost-transferd",
            dependencies: [
                "TransferCore", "TransferOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // App-switcher snapshots (issue 7): render a view tree, redact, PNG, privacy checks.
        .systemLibrary(name: "CFreeType", pkgConfig: "freetype2", providers: [.apt(["libfreetype-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .target(name: "Snapshots", dependencies: ["AppHostProtocol", "CFreeType", "CPNG"]),
        // What every test target shares: the tags (`.process`, `.virtualClock`, `.network`).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // Literals for BundleID and the typed ids, for the tests that want them (not
        // AppHostProtocolTests, where `BundleID("a b")` must stay the failable init).
        .target(name: "TestIDLiterals", dependencies: ["AppHostProtocol", "TestNumericIDLiterals"], path: "Tests/TestIDLiterals"),
        // The typed ids' literals alone (numbers, session names): every test target's, through
        // TestIDLiterals, and AppHostProtocolTests' directly.
        .target(name: "TestNumericIDLiterals", dependencies: ["AppHostProtocol"], path: "Tests/TestNumericIDLiterals"),
        .testTarget(name: "SnapshotsTests", dependencies: ["Snapshots", "AppHostProtocol", "TestSupport"]),
        .testTarget(name: "AppHostProtocolTests", dependencies: ["AppHostProtocol", "TestSupport", "TestNumericIDLiterals"]),
        .testTarget(name: "AppHostManifestTests", dependencies: ["AppHostManifest", "AppHostProtocol", "TestSupport"]),
        .testTarget(name: "HostConfigTests", dependencies: ["HostConfig", "AppHostProtocol", "TestSupport", "TestIDLiterals"]),
        .testTarget(name: "TransferOptionsTests", dependencies: [
            "TransferOptions", "AppHostProtocol", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .testTarget(name: "AppHostSystemTests", dependencies: ["AppHostSystem", "AppHostProtocol", "TestSupport"]),
        .testTarget(name: "AppKitLessTests", dependencies: ["AppKitLess", "AppHostProtocol", "TestSupport", "TestIDLiterals"]),
        .testTarget(name: "HostTests", dependencies: ["Host", "AppHostProtocol", "AppHostManifest", "HostConfig", "AppHostSystem", "Plugins", "HTTPTestServer", "Snapshots", "TestSupport", "TestIDLiterals",
                                                  "TransferOptions",
                                                  // PrivacyStoreTests write rows as another host left them.
                                                  .product(name: "GRDB", package: "GRDB.swift"),
                                                  // PushGatewayHTTPClientTests: a real HTTP/2 client over TLS.
                                                  .product(name: "AsyncHTTPClient", package: "async-http-client"),
                                                  .product(name: "NIOSSL", package: "swift-nio-ssl"),
                                                  // PushGatewayAuthTests sign provider tokens.
                                                  .product(name: "JWTKit", package: "jwt-kit"),
                                                  // StepScopeTests keep frames for channels that need no socket.
                                                  .product(name: "NIOEmbedded", package: "swift-nio")]),
        .testTarget(name: "ScenariosTests", dependencies: [
            "Scenarios", "Host", "AppHostProtocol", "AppHostSystem", "Snapshots", "TestSupport", "TestIDLiterals",
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        .testTarget(name: "PluginsTests", dependencies: ["Plugins", "AppHostProtocol", "AppHostManifest", "TestSupport", "TestIDLiterals"]),
        // A small real HTTP/1.1 (and HTTPS) server on SwiftNIO: the demo's download and the
        // transfer tests' server (resources with Range/If-Range, faults, a request log).
        .target(
            name: "LoopbackHTTP",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // What tests add to it: a throwaway CA and the tests' tools; re-exports LoopbackHTTP.
        .target(
            name: "HTTPTestServer",
            dependencies: [
                "LoopbackHTTP",
                // Tool.run: the tests' openssl, curl and sha256sum through the project's own spawn.
                "AppHostSystem",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/HTTPTestServer"
        ),
        .testTarget(name: "HTTPTestServerTests", dependencies: ["HTTPTestServer", "TestSupport"]),
        .testTarget(
            name: "TransferTests",
            dependencies: [
                "TransferCore", "TransferOptions", "AppHostProtocol", "AppHostSystem", "HTTPTestServer", "TestSupport", "TestIDLiterals",
                .product(name: "SystemPackage", package: "swift-system"),
                // BodyWriterTests drive the writer from an event loop of their own.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // TransferStoreTests write rows as an older daemon left them.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
