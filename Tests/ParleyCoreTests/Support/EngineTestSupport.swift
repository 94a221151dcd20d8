import Glibc
@testable import ParleyCore

// Shared by the engine tests: the real reference server and small waiting helpers.

/// The reference server for engine tests: `parley-server --port 0` on a temp database,
/// binary from PARLEY_SERVER_BIN or the package's server/.build/release.
final class EngineTestServer: Sendable {
    let url: String
    let apiToken = "engine-test-token"
    let directory: String
    private let pid: pid_t
    /// On PostgreSQL, the command that drops the server's database once it stopped.
    private let dropDatabase: String?

    init() throws {
        var template = Array("/tmp/parley-engine-test-XXXXXX".utf8CString)
        let made: String? = template.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        guard let directory = made else { throw ParleyError(.io, "mkdtemp failed") }
        self.directory = directory
        let root = String(#filePath.split(separator: "/").dropLast(3).joined(separator: "/"))
        let binary = getenv("PARLEY_SERVER_BIN").map { String(cString: $0) } ?? "/\(root)/server/.build/release/parley-server"
        guard access(binary, X_OK) == 0 else {
            throw ParleyError(.io, "parley-server not found at \(binary): build it or set PARLEY_SERVER_BIN")
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw ParleyError(.io, "pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], STDOUT_FILENO)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        let (database, drop) = try Self.database(in: directory)
        dropDatabase = drop
        // No balancer watches a test's server: its stop closes the port at once.
        let arguments = [binary, "--port", "0", "--database", database, "--api-token", apiToken, "--shutdown-drain-seconds", "0"]
        var cArguments: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, binary, &actions, nil, &cArguments, environ)
        close(pipeFDs[1])
        guard spawned == 0 else {
            close(pipeFDs[0])
            throw ParleyError(.io, "posix_spawn failed: \(spawned)")
        }
        pid = child
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(pipeFDs[0], &byte, 1) == 1 && byte != 10 { line.append(byte) }
        close(pipeFDs[0])
        let text = String(decoding: line, as: UTF8.self)
        let prefix = "parley-server listening on "
        guard text.hasPrefix(prefix) else {
            kill(child, SIGKILL)
            throw ParleyError(.io, "parley-server did not start: '\(text)'")
        }
        url = String(text.dropFirst(prefix.count))
    }

    /// A SQLite file in `directory`, or with PARLEY_TEST_BACKEND=postgres a new database in the
    /// cluster of scripts/pg-test-cluster.sh and the command that drops it.
    private static func database(in directory: String) throws -> (String, drop: String?) {
        func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        guard env("PARLEY_TEST_BACKEND") == "postgres" else { return (directory + "/server.sqlite", nil) }
        guard let base = env("PARLEY_TEST_PG"), let bin = env("PARLEY_PG_BIN"), let port = env("PARLEY_PG_PORT") else {
            throw ParleyError(.io, "PARLEY_TEST_BACKEND=postgres needs PARLEY_TEST_PG, PARLEY_PG_BIN and PARLEY_PG_PORT")
        }
        // The temporary directory's unique suffix names the database.
        let name = "parley_swift_" + (directory.split(separator: "-").last.map(String.init) ?? "x").lowercased()
        guard system("'\(bin)/createdb' -h 127.0.0.1 -p '\(port)' -U parley \(name)") == 0 else {
            throw ParleyError(.io, "createdb \(name) failed")
        }
        return (base + "/" + name, "'\(bin)/dropdb' -h 127.0.0.1 -p '\(port)' -U parley --if-exists --force \(name)")
    }

    /// A client that authenticates raw requests with the admin token.
    func adminClient() throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = url
        configuration.apiToken = apiToken
        configuration.cacheMode = .memory
        return try ParleyClient(configuration: configuration)
    }

    /// Creates the users (nickname = id) and returns a session token of each, by id.
    func createUsers(_ ids: [String], admin: ParleyClient) throws -> [String: String] {
        var tokens: [String: String] = [:]
        for id in ids {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/users", body: ["user_id": .string(id), "nickname": .string(id)], completion: done)
            }
            tokens[id] = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/users/\(id)/token", body: [:], completion: done)
            }["token"]?.stringValue ?? ""
        }
        return tokens
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = system("rm -rf '\(directory)'")
        // In the background: the next test need not wait for the drop.
        if let dropDatabase { _ = system(dropDatabase + " >/dev/null 2>&1 &") }
    }
}

final class Box<Value: Sendable>: Sendable {
    private let storage: Locked<Value>
    init(_ value: Value) { storage = Locked(value) }
    func update(_ change: (inout Value) -> Void) { storage.withLock { change(&$0) } }
    var value: Value { storage.withLock { $0 } }
}

func engineWaitUntil(timeoutMs: Int = 20_000, _ condition: () -> Bool) -> Bool {
    // Returns at the first true answer: a `for … where !condition()` loop would go on asking
    // (without sleeping) until the timeout's count of turns ran out.
    for _ in 0..<(timeoutMs / 10) {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Runs an async client call and waits for its completion.
func waitFor(_ start: (@escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) throws(ParleyError) -> UInt64) throws -> JSONValue {
    let outcome = Box<Result<JSONValue, ParleyError>?>(nil)
    _ = try start { result in outcome.update { $0 = result } }
    guard engineWaitUntil({ outcome.value != nil }), let result = outcome.value else {
        throw ParleyError(.timeout, "no completion")
    }
    return try result.get()
}

extension ParleyClient {
    /// The engine itself, for tests that look below the facade's calls (Sync/ClientEngine.swift).
    var syncEngine: Engine { engine as! Engine }
}
