import Testing
@testable import ParleyCore

@Suite struct ErrorTests {
    @Test func codesAreUniqueAndNegative() {
        let raw = ParleyErrorCode.allCases.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        #expect(raw.allSatisfy { $0 < 0 })
        #expect(Set(ParleyErrorCode.allCases.map(\.name)).count == raw.count)
    }

    /// Retrying may help after the connection's failures and the server's own trouble, never
    /// after a refusal.
    @Test func retryableErrors() {
        #expect(ParleyError(.network, "refused").isRetryable)
        #expect(ParleyError(.timeout, "slow").isRetryable)
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(ParleyError(.server, "busy", httpStatus: status).isRetryable, "\(status)")
        }
        for status in [0, 409, 413, 422] {
            #expect(!ParleyError(.server, "refused", httpStatus: status).isRetryable, "\(status)")
        }
        #expect(!ParleyError(.invalidArgument, "bad", httpStatus: 400).isRetryable)
        #expect(!ParleyError(.unauthorized, "who", httpStatus: 401).isRetryable)
        #expect(!ParleyError(.notFound, "gone", httpStatus: 404).isRetryable)
        for code in ParleyErrorCode.allCases where code != .network && code != .timeout && code != .server {
            #expect(!ParleyError.isRetryable(code: code, httpStatus: 503), "\(code.name)")
        }
    }

    @Test func descriptionCarriesHTTPDetails() {
        let error = ParleyError(.forbidden, "not an operator", httpStatus: 403, serverCode: 400108)
        #expect(error.description == "forbidden: not an operator (HTTP 403, code 400108)")
        #expect(ParleyError.cancelled().code == .cancelled)
    }
}
