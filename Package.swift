// swift-tools-version:6.0
// The Parley client library. No package dependencies: only the system libraries
// SQLite, libcurl, jansson and libsodium (the cache's encryption at rest). The reference server is a separate package (server/).
import PackageDescription

let versionScript = Context.packageDirectory + "/Sources/Parley/exports.map"
// scripts/sanitize.sh builds libparley against the toolchain's shared runtime: statically
// linked, libdispatch's calls would stay inside the library, out of ThreadSanitizer's sight.
let runtimeLinking: [String] = Context.environment["PARLEY_SHARED_SWIFT_RUNTIME"] == nil ? ["-static-stdlib"] : []

let package = Package(
    name: "Parley",
    products: [
        .library(name: "parley", type: .dynamic, targets: ["Parley"]),
        .library(name: "ParleyCore", targets: ["ParleyCore"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CJansson", pkgConfig: "jansson", providers: [.apt(["libjansson-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CParleySystem"),
        .systemLibrary(name: "CParleyABI"),
        // The SQLite VFS that seals the cache's pages (C: SQLite's VFS is a C interface).
        .target(name: "CParleyCipher", dependencies: ["CSQLite", "CSodium"]),
        .target(
            name: "ParleyCore",
            dependencies: ["CSQLite", "CCurl", "CJansson", "CParleySystem", "CParleyCipher"]
        ),
        .target(
            name: "Parley",
            dependencies: ["ParleyCore", "CParleyABI"],
            exclude: ["exports.map"],
            linkerSettings: [
                // Link the Swift runtime into libparley.so so that it loads without the toolchain,
                // export only the C API, and give the library its soname.
                .unsafeFlags(runtimeLinking + [
                    "-Xlinker", "--version-script=\(versionScript)",
                    "-Xlinker", "-soname=libparley.so.0",
                ]),
            ]
        ),
        .testTarget(name: "ParleyCoreTests", dependencies: ["ParleyCore"]),
    ],
    swiftLanguageModes: [.v6]
)
