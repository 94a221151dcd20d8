import Glibc
import Testing
@testable import ParleyCore

// The shared operations scenario (Tests/scenarios/operations.json) through the Swift API.
// The C and Python suites run the same file; the format is described in the file itself.

func readTextFile(_ path: String) throws -> String {
    guard let file = fopen(path, "rb") else { throw ParleyError(.io, "cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Replaces `$name` with saved values: a string that is exactly `$name` takes the value
/// itself (keeping its type), other strings get its text.
private func substitute(_ value: JSONValue, _ saved: [String: JSONValue]) -> JSONValue {
    switch value {
    case .string(let text):
        if text.first == "$", let whole = saved[String(text.dropFirst())] { return whole }
        var result = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            result += rest[..<dollar]
            let name = rest[rest.index(after: dollar)...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            switch saved[String(name)] {
            case .string(let saved)?: result += saved
            case .int(let number)?: result += String(number)
            default: result += "$" + name
            }
            rest = rest[rest.index(after: dollar)...].dropFirst(name.count)
        }
        return .string(result + rest)
    case .array(let items):
        return .array(items.map { substitute($0, saved) })
    case .object(let fields):
        return .object(fields.mapValues { substitute($0, saved) })
    default:
        return value
    }
}

private func lookup(_ value: JSONValue, _ path: String) -> JSONValue? {
    var current: JSONValue? = value
    for part in path.split(separator: ".") {
        if let index = Int(part), case .array(let items)? = current {
            current = index < items.count ? items[index] : nil
        } else {
            current = current?[String(part)]
        }
    }
    return current
}

@Suite struct EngineScenarioTests {
    @Test func sharedOperationsScenario() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let scenario = try JSONValue.parse(try readTextFile(root + "/Tests/scenarios/operations.json"))

        var clients: [String: ParleyClient] = [:]
        defer { clients.values.forEach { $0.close() } }
        for user in scenario["users"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/users", body: ["user_id": .string(user), "nickname": .string(user)], completion: done)
            }
            let token = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/users/\(user)/token", body: [:], completion: done)
            }["token"]?.stringValue ?? ""
            var configuration = ClientConfiguration()
            configuration.serverURL = server.url
            configuration.cacheMode = .memory
            let client = try ParleyClient(configuration: configuration)
            clients[user] = client
            _ = try waitFor { done throws(ParleyError) in try client.connect(userID: user, sessionToken: token, completion: done) }
        }

        var saved: [String: JSONValue] = [:]
        var exercised: Set<String> = []
        for (number, step) in (scenario["steps"]?.arrayValue ?? []).enumerated() {
            let context = Comment(rawValue: "step \(number): \(step.canonicalText)")
            let answer: JSONValue
            if let method = step["admin"]?.stringValue {
                let path = substitute(step["path"] ?? "", saved).stringValue ?? ""
                let body = step["body"].map { substitute($0, saved) }
                answer = try waitFor { done throws(ParleyError) in
                    try admin.request(method: method, path: path, body: body, completion: done)
                }
            } else {
                let operation = step["op"]?.stringValue ?? ""
                exercised.insert(operation)
                let client = try #require(clients[step["as"]?.stringValue ?? ""], context)
                let params = substitute(step["params"] ?? .object([:]), saved)
                let outcome = Result { () throws -> JSONValue in
                    try waitFor { done throws(ParleyError) in try client.perform(operation, params: params, completion: done) }
                }
                if let expectedError = step["error"]?.stringValue {
                    guard case .failure(let failure) = outcome, let error = failure as? ParleyError else {
                        Issue.record(Comment(rawValue: "expected \(expectedError) at \(context.rawValue)"))
                        continue
                    }
                    #expect(error.code.name == expectedError, context)
                    if let serverCode = step["server_code"]?.int64Value {
                        #expect(Int64(error.serverCode) == serverCode, context)
                    }
                    continue
                }
                answer = try outcome.get()
            }
            for (name, path) in step["save"]?.objectValue ?? [:] {
                saved[name] = lookup(answer, path.stringValue ?? "")
            }
            for (path, expected) in step["expect"]?.objectValue ?? [:] {
                #expect(lookup(answer, path) == substitute(expected, saved), context)
            }
            for (path, count) in step["expect_count"]?.objectValue ?? [:] {
                let value = lookup(answer, path)
                let length = value?.arrayValue?.count ?? value?.objectValue?.count
                #expect(length.map(Int64.init) == count.int64Value, context)
            }
        }
        let missing = Set(OperationCatalog.all.map(\.name)).subtracting(exercised)
        #expect(missing.isEmpty, "operations the scenario does not cover: \(missing.sorted())")
    }
}
