/// The process-wide settings of the runtime that all clients share (`parley_runtime_configure`):
/// given before the first client starts the threads they set.
public struct RuntimeConfiguration: Sendable, Equatable {
    public var networkThreads: Int?

    public static let keys: Set<String> = ["network_threads"]

    public init(json text: String) throws(ParleyError) {
        let document = try JSONValue.parse(text)
        let reader = try JSONReader(document, path: "runtime")
        try reader.rejectUnknownKeys(allowed: Self.keys)
        if let value = try reader.optionalInt("network_threads", in: 1...Int64(NetworkRuntime.maxThreads)) {
            networkThreads = Int(value)
        }
    }

    /// Applies the settings given; none is applied unless all can be.
    public func apply() throws(ParleyError) {
        if let networkThreads { try NetworkRuntime.configure(threads: networkThreads) }
    }
}
