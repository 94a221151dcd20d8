import ParleyCore

// include/parley/runtime.h: the process-wide runtime that all clients share.

@_cdecl("parley_runtime_configure")
public func exportRuntimeConfigure(_ configJSON: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let configJSON else { throw .invalidArgument("config_json is NULL") }
        let text = try validatedString(configJSON, "config_json")
        let configuration: RuntimeConfiguration
        do throws(ParleyError) {
            configuration = try RuntimeConfiguration(json: text)
        } catch {
            throw error.code == .invalidJSON ? ParleyError(.invalidJSON, "config_json: \(error.message)") : error
        }
        try configuration.apply()
    }
}

@_cdecl("parley_runtime_info")
public func exportRuntimeInfo(_ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let pool = CallbackPool.runningCoreWorkers.map { _ in CallbackPool.shared.statistics }
        let info: JSONValue = [
            "network_threads": .int(Int64(NetworkRuntime.runningThreads)),
            "default_network_threads": .int(Int64(NetworkRuntime.defaultThreadCount)),
            "callback_threads": .int(Int64(CallbackPool.runningCoreWorkers ?? 0)),
            "callback_extra_threads": .int(Int64(pool?.extraWorkers ?? 0)),
            "default_callback_threads": .int(Int64(CallbackPool.defaultWorkerCount)),
        ]
        outJSON.pointee = try ownedCString(info.canonicalText)
    }
}
