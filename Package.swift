// swift-tools-version:6.1
// SPDX-License-Identifier: Apache-2.0
//
// exponea-authd: one Bloomreach stream JWT per app group, held by a systemd service for every app of the
// group on a Linux device.
//
// Targets, with dependencies pointing one way (top depends on bottom):
//
//   exponea-authd (exe: the daemon; authctl when run by that name)      authctl (exe, for development)
//          |                            \                                  |
//   AuthDaemonCommand                    +------------------------- AuthCtlCommands (authctl's commands)
//          |                                                               |
//      AuthDaemon ----------------------+                           ExponeaAuth (the library apps link)
//      /    |     \           \         |                                  |
// AuthStore |   AuthTransport  Systemd  |                                  |
//      \    |     |             |       |                                  |
//       \   |   AuthProtocol (Varlink wire, no I/O) -----------------------+
//        \  |     |                                                        |
//         AuthCore (pure rules: no I/O, no clock of its own) --------------+
//
//   Systemd (sd-event loop, its executor for Swift concurrency, sd-bus, sd_notify, journal) -> CSystemdShim (loads
//   libsystemd at first use) -> CSystemd (its headers); Systemd -> CPidfd (pidfds: SO_PEERPIDFD, PIDFD_GET_INFO, for
//   the peer's unit);
//   AuthTransport (the Varlink server, sources of the loop) -> CEpoll (epoll.h, accept4);
//   AuthDaemon -> CTimerFD (timerfd.h), CMalloc (malloc.h), CProcessControl (prctl.h: the writers' thread name);
//   AuthDaemonCommand, AuthCtlCommands -> CProcessControl (prctl.h: no core dumps)
//   authd-bench (exe) -> exponea-authd (the daemon it measures), AuthDaemon (the store's writers) and AuthProtocol
//   (the per-hop costs in-process)
//   docs/architecture.md: the modules, who owns which thread, and how a GetToken and a SetToken travel through them
//
//   fuzz-varlink, fuzz-jwt, fuzz-config, fuzz-record (exe, Fuzz/): replay drivers over AuthProtocol, AuthCore,
//   AuthDaemon's access policy and AuthStore's records; libFuzzer targets when scripts/fuzz builds them

import PackageDescription

let package = Package(
    name: "exponea-authd",
    products: [
        .executable(name: "exponea-authd", targets: ["exponea-authd"]),
        .executable(name: "authctl", targets: ["authctl"]),
        .library(name: "ExponeaAuth", targets: ["ExponeaAuth"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // MARK: libsystemd

        // The headers only: CSystemdShim loads the library when the daemon first calls it (libsystemd.c).
        .systemLibrary(
            name: "CSystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .target(
            name: "CSystemdShim",
            dependencies: ["CSystemd"]
        ),
        .target(
            name: "Systemd",
            dependencies: [
                "CPidfd",
                "CSystemd",
                "CSystemdShim",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: glibc headers the Glibc module leaves out

        .systemLibrary(name: "CTimerFD"),
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(name: "CProcessControl"),
        .systemLibrary(name: "CPidfd"),

        // MARK: The product's own modules

        .target(name: "AuthCore"),
        .target(
            name: "AuthProtocol",
            dependencies: ["AuthCore"],
            resources: [.embedInCode("com.exponea.Auth.varlink"), .embedInCode("io.systemd.Metrics.varlink")]
        ),
        .target(
            name: "AuthTransport",
            dependencies: [
                "AuthCore",
                "AuthProtocol",
                "CEpoll",
                "Systemd",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "AuthStore",
            dependencies: [
                "AuthCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "AuthDaemon",
            dependencies: [
                "AuthCore",
                "AuthProtocol",
                "AuthStore",
                "AuthTransport",
                "CTimerFD",
                "CMalloc",
                "CProcessControl",
                "Systemd",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "ExponeaAuth",
            dependencies: [
                "AuthCore",
                "AuthProtocol",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "AuthDaemonCommand",
            dependencies: [
                "AuthDaemon",
                "AuthStore",
                "CProcessControl",
                "Systemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "AuthCtlCommands",
            dependencies: [
                "AuthCore",
                "CProcessControl",
                "ExponeaAuth",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The one binary installed: the daemon, and authctl when run by that name (/usr/bin/authctl is a symlink).
        .executableTarget(
            name: "exponea-authd",
            dependencies: ["AuthCtlCommands", "AuthDaemonCommand"]
        ),
        // authctl alone, for development (`swift run authctl`) and the tests.
        .executableTarget(
            name: "authctl",
            dependencies: ["AuthCtlCommands"]
        ),

        // MARK: Benchmarks (`swift run -c release authd-bench`)

        .executableTarget(
            name: "authd-bench",
            dependencies: [
                "AuthCore",
                "AuthDaemon",
                "AuthDaemonCommand",
                "AuthProtocol",
                "AuthStore",
                "CEpoll",
                "LoopHarness",
                "Systemd",
                "authd-test-app",
                "exponea-authd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The C clients of the client rows (by hand, and through libexponea-auth), compiled by the benchmark at
            // run time.
            resources: [
                .embedInCode("Resources/bench-client.h"), .embedInCode("Resources/c-client.c"),
                .embedInCode("Resources/c-lib-client.c"), .embedInCode("Resources/c-epoll-server.c"),
                .embedInCode("Resources/c-durable-server.c"),
                .embedInCode("Resources/bench-server.h"), .embedInCode("Resources/bench-set-work.h"),
            ]
        ),

        // MARK: Fuzzing (Fuzz/README.md): a replay driver each here, libFuzzer targets built by scripts/fuzz

        .systemLibrary(name: "CLibFuzzer", path: "Fuzz/Sources/CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], path: "Fuzz/Sources/FuzzSupport"),
        .executableTarget(
            name: "fuzz-varlink",
            dependencies: ["AuthCore", "AuthProtocol", "FuzzSupport"],
            path: "Fuzz/Sources/fuzz-varlink"
        ),
        .executableTarget(
            name: "fuzz-jwt",
            dependencies: ["AuthCore", "AuthProtocol", "FuzzSupport"],
            path: "Fuzz/Sources/fuzz-jwt"
        ),
        .executableTarget(
            name: "fuzz-config",
            dependencies: ["AuthCore", "AuthDaemon", "FuzzSupport"],
            path: "Fuzz/Sources/fuzz-config"
        ),
        .executableTarget(
            name: "fuzz-record",
            dependencies: ["AuthCore", "AuthStore", "FuzzSupport"],
            path: "Fuzz/Sources/fuzz-record"
        ),

        // MARK: Tests

        .target(
            name: "AuthTestKit",
            dependencies: [
                "AuthCore",
                "LoopHarness",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/AuthTestKit"
        ),
        // An sd-event loop with its executor on a thread of its own, for tests and the bench's in-process service.
        .target(name: "LoopHarness", dependencies: ["Systemd"], path: "Tests/LoopHarness"),
        .executableTarget(
            name: "authd-store-writer",
            dependencies: [
                "AuthCore",
                "AuthStore",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/authd-store-writer"
        ),
        .executableTarget(
            name: "authd-test-app",
            dependencies: [
                "AuthCore",
                "ExponeaAuth",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/authd-test-app"
        ),
        .executableTarget(
            name: "authd-listen-probe",
            dependencies: ["Systemd"],
            path: "Tests/authd-listen-probe"
        ),
        .testTarget(
            name: "AuthCoreTests",
            dependencies: ["AuthCore", "AuthTestKit"]
        ),
        .testTarget(
            name: "AuthProtocolTests",
            dependencies: ["AuthCore", "AuthProtocol", "AuthTestKit"]
        ),
        .testTarget(
            name: "AuthTransportTests",
            dependencies: [
                "AuthProtocol",
                "AuthTestKit",
                "AuthTransport",
                "Systemd",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "AuthStoreTests",
            dependencies: [
                "AuthCore",
                "AuthStore",
                "AuthTestKit",
                "authd-store-writer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            // The power-cut test compiles it (with libfuse3) when it runs.
            exclude: ["PowerCut/cutfs.c"]
        ),
        .testTarget(
            name: "SystemdTests",
            dependencies: [
                "Systemd",
                "AuthTestKit",
                "authd-listen-probe",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DaemonTests",
            dependencies: [
                "AuthCore",
                "AuthDaemon",
                "AuthDaemonCommand",
                "AuthStore",
                "AuthTestKit",
                "Systemd",
                "exponea-authd",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "ExponeaAuthTests",
            dependencies: [
                "AuthTestKit",
                "ExponeaAuth",
                "authd-test-app",
                "exponea-authd",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HTTPTypesFoundation", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "AuthCtlTests",
            dependencies: [
                "AuthTestKit", "authctl", "exponea-authd", .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // libexponea-auth (the C client library, built with its own Makefile) and its example apps against the
        // real daemon.
        .testTarget(
            name: "CLibraryTests",
            dependencies: ["AuthTestKit", "authd-test-app", "exponea-authd"]
        ),
        .testTarget(
            name: "FuzzReplayTests",
            dependencies: ["AuthTestKit", "fuzz-config", "fuzz-jwt", "fuzz-record", "fuzz-varlink"],
            path: "Fuzz/Tests/FuzzReplayTests"
        ),
        // The real daemon under faults: a crash mid-write, a full disk, many or misbehaving clients, another
        // user, and tokens that must never show in its output.
        .testTarget(
            name: "FaultTests",
            dependencies: ["AuthCore", "AuthProtocol", "AuthTestKit", "exponea-authd"]
        ),
    ]
)
