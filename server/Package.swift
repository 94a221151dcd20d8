// swift-tools-version:6.0
// The Parley reference server: a separate package so that building the client library
// never resolves the server's dependency graph. It shares no Swift code with the client.
import PackageDescription

let package = Package(
    name: "ParleyServer",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "parley-server", targets: ["ParleyServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        // Outgoing calls to operator-configured endpoints (webhooks, OutgoingCalls/HookDeliveries.swift).
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        // HMAC-SHA256 signatures of those calls.
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CParleySQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // Thumbnails of uploaded images and the check of uploaded channel covers (Images.swift).
        // No pkg-config: its flags for libvips carry `-pthread`, which SwiftPM warns about, and
        // the shim needs none of them (Sources/CParleyVips/shim.h).
        .systemLibrary(
            name: "CParleyVips",
            providers: [.apt(["libvips-dev"])]
        ),
        // The PostgreSQL client (Storage/Postgres/PQConnection.swift).
        .systemLibrary(
            name: "CParleyPQ",
            providers: [.apt(["libpq-dev"])]
        ),
        .executableTarget(
            name: "ParleyServer",
            dependencies: [
                "CParleySQLite",
                "CParleyVips",
                "CParleyPQ",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: [
                // Swift 6.3.1's SIL loop-invariant code motion does not finish on this module in
                // an optimized build (measured: still running after 40 min, sampled stacks all in
                // that pass; docs/SERVER.md "Build and install"). Without the pass the release
                // build takes minutes. Other optimizations stay on.
                .unsafeFlags(["-Xllvm", "-sil-disable-pass=loop-invariant-code-motion"], .when(configuration: .release)),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
