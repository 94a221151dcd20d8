/// The server's REST endpoint as a client calls it: building requests (URL, timeouts,
/// credential, JSON body) and reading answers (JSON on 2xx, the protocol's error body
/// otherwise).
struct APIEndpoint: Sendable {
    enum Credential: Sendable {
        case apiToken(String)
        case session(String)
    }

    var serverURL: String?
    var timeoutMs: Int
    var connectTimeoutMs: Int

    /// The HTTP request of a REST call (nil without a server URL).
    func request(method: String, pathAndQuery: String, body: JSONValue?, credential: Credential?) -> HTTPRequest? {
        guard let serverURL else { return nil }
        var request = HTTPRequest(method: method, url: serverURL + pathAndQuery)
        request.timeoutMs = timeoutMs
        request.connectTimeoutMs = connectTimeoutMs
        request.headers.append(HTTPHeader("Accept", "application/json"))
        switch credential {
        case .apiToken(let token): request.headers.append(HTTPHeader("Api-Token", token))
        case .session(let token): request.headers.append(HTTPHeader("Session-Key", token))
        case nil: break
        }
        if let body {
            request.headers.append(HTTPHeader("Content-Type", "application/json; charset=utf-8"))
            request.body = Array(body.canonicalText.utf8)
        }
        return request
    }

    /// Maps an HTTP answer to the protocol's result: JSON on 2xx, the error body otherwise.
    static func decodeAnswer(_ response: HTTPResponse) -> Result<JSONValue, ParleyError> {
        let status = response.status
        if (200..<300).contains(status) {
            if response.body.isEmpty { return .success(.object([:])) }
            do {
                return .success(try JSONValue.parse(response.body))
            } catch {
                return .failure(ParleyError(.protocolViolation, "HTTP \(status) answer is not valid JSON: \(error.message)", httpStatus: status))
            }
        }
        let code: ParleyErrorCode = switch status {
        case 400: .invalidArgument
        case 401: .unauthorized
        case 403: .forbidden
        case 404, 410: .notFound
        default: .server
        }
        var error: ParleyError
        if let body = (try? JSONValue.parse(response.body)).map(WireError.init), let message = body.message {
            let serverCode = body.code.map { Int(clamping: $0) } ?? 0
            error = ParleyError(code, message, httpStatus: status, serverCode: serverCode)
        } else {
            error = ParleyError(code, "the server answered HTTP \(status) without a JSON error body", httpStatus: status)
        }
        error.retryAfterMs = retryAfterMs(response.header("retry-after"))
        return .failure(error)
    }

    /// The longest `Retry-After` followed: a server's advice, not a reason to stall for hours.
    static let maxRetryAfterMs = 300_000

    /// A `Retry-After` of delay-seconds, in milliseconds (0 when absent, a date, or invalid).
    static func retryAfterMs(_ value: String?) -> Int {
        guard let value else { return 0 }
        let text = value.utf8.drop { $0 == 32 || $0 == 9 }.reversed().drop { $0 == 32 || $0 == 9 }.reversed()
        guard !text.isEmpty, text.count <= 7, text.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              let seconds = Int(String(decoding: text, as: UTF8.self))
        else { return 0 }
        return min(seconds * 1000, maxRetryAfterMs)
    }
}
