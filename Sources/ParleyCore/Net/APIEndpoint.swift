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
        case 404: .notFound
        default: .server
        }
        guard let body = try? JSONValue.parse(response.body), let message = body["message"]?.stringValue else {
            return .failure(ParleyError(code, "the server answered HTTP \(status) without a JSON error body", httpStatus: status))
        }
        let serverCode = body["code"]?.int64Value.map { Int(clamping: $0) } ?? 0
        return .failure(ParleyError(code, message, httpStatus: status, serverCode: serverCode))
    }
}
