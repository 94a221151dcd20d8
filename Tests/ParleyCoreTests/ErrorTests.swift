import Testing
@testable import ParleyCore

@Suite struct ErrorTests {
    @Test func codesAreUniqueAndNegative() {
        let raw = ParleyErrorCode.allCases.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        #expect(raw.allSatisfy { $0 < 0 })
        #expect(Set(ParleyErrorCode.allCases.map(\.name)).count == raw.count)
    }

    @Test func descriptionCarriesHTTPDetails() {
        let error = ParleyError(.forbidden, "not an operator", httpStatus: 403, serverCode: 400108)
        #expect(error.description == "forbidden: not an operator (HTTP 403, code 400108)")
        #expect(ParleyError.cancelled().code == .cancelled)
    }
}
