/// The process-wide settings of the runtime that all clients share (`parley_runtime_configure`):
/// given before the first client starts the threads they set.
public struct RuntimeConfiguration: Sendable, Equatable {
    public var networkThreads: Int?
    public var callbackThreads: Int?

    public static let keys: Set<String> = ["network_threads", "callback_threads"]

    public init(json text: String) throws(ParleyError) {
        let document = try JSONValue.parse(text)
        let reader = try JSONReader(document, path: "runtime")
        try reader.rejectUnknownKeys(allowed: Self.keys)
        if let value = try reader.optionalInt("network_threads", in: 1...Int64(NetworkRuntime.maxThreads)) {
            networkThreads = Int(value)
        }
        if let value = try reader.optionalInt("callback_threads", in: 1...Int64(CallbackPool.maxConfigurableWorkers)) {
            callbackThreads = Int(value)
        }
    }

    /// Applies the settings given, all or none: a number that differs from the one already
    /// running is refused with `.invalidState` before anything changes.
    public func apply() throws(ParleyError) {
        let runningNetwork = NetworkRuntime.runningThreads
        if let networkThreads, runningNetwork > 0, runningNetwork != networkThreads {
            throw .invalidState("runtime.network_threads: \(runningNetwork) network threads already run; set their number before the first client")
        }
        let runningCallbacks = CallbackPool.runningCoreWorkers
        if let callbackThreads, let runningCallbacks, runningCallbacks != callbackThreads {
            throw .invalidState("runtime.callback_threads: the callback pool already runs \(runningCallbacks) threads; set their number before the first client in thread mode")
        }
        if let networkThreads, runningNetwork == 0 { try NetworkRuntime.configure(threads: networkThreads) }
        if let callbackThreads, runningCallbacks == nil { try CallbackPool.configure(workers: callbackThreads) }
    }
}
