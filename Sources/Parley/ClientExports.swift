import CParleyABI
import Glibc
import ParleyCore

// include/parley/client.h: creating and destroying clients, dispatch, logging, raw requests.

let clients = HandleTable<ParleyClient>(kind: "client")

@_cdecl("parley_client_create")
public func exportClientCreate(_ outClient: UnsafeMutablePointer<OpaquePointer?>?, _ configJSON: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outClient else { throw .invalidArgument("out_client is NULL") }
        outClient.pointee = nil
        let text = try configJSON.map { pointer throws(ParleyError) in try validatedString(pointer, "config_json") } ?? ""
        let configuration: ClientConfiguration
        do throws(ParleyError) {
            configuration = try ClientConfiguration(json: text)
        } catch {
            throw error.code == .invalidJSON ? ParleyError(.invalidJSON, "config_json: \(error.message)") : error
        }
        outClient.pointee = clients.insert(try ParleyClient(configuration: configuration))
    }
}

@_cdecl("parley_configuration_keys")
public func exportConfigurationKeys(_ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        let table: JSONValue = .array(ClientConfiguration.keys.map { key in
            ["name": .string(key.name), "type": .string(key.type), "default": key.defaultValue,
             "values": .string(key.values), "summary": .string(key.summary)]
        })
        outJSON.pointee = try ownedCString(table.canonicalText)
    }
}

@_cdecl("parley_client_destroy")
public func exportClientDestroy(_ client: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try clients.remove(client).close()
    }
}

@_cdecl("parley_client_event_fd")
public func exportClientEventFD(_ client: OpaquePointer?, _ outFD: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        guard let outFD else { throw .invalidArgument("out_fd is NULL") }
        guard object.dispatcher.mode == .manual else {
            throw .invalidState("the client is in thread dispatch mode: it has no event fd")
        }
        outFD.pointee = object.dispatcher.eventFD
    }
}

@_cdecl("parley_client_dispatch")
public func exportClientDispatch(_ client: OpaquePointer?, _ maxCallbacks: Int32, _ outDispatched: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        outDispatched?.pointee = 0
        let object = try clients.lookup(client)
        guard maxCallbacks >= 0 else { throw .invalidArgument("max_callbacks must be >= 0, got \(maxCallbacks)") }
        let ran = try object.dispatcher.dispatch(max: Int(maxCallbacks))
        outDispatched?.pointee = Int32(clamping: ran)
    }
}

// Dispatch groups: one fd and one dispatch for many manual-mode clients.

let dispatchGroups = HandleTable<CallbackGroup>(kind: "dispatch group")

@_cdecl("parley_dispatch_group_create")
public func exportDispatchGroupCreate(_ outGroup: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outGroup else { throw .invalidArgument("out_group is NULL") }
        outGroup.pointee = nil
        outGroup.pointee = dispatchGroups.insert(try CallbackGroup())
    }
}

@_cdecl("parley_dispatch_group_event_fd")
public func exportDispatchGroupEventFD(_ group: OpaquePointer?, _ outFD: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try dispatchGroups.lookup(group)
        guard let outFD else { throw .invalidArgument("out_fd is NULL") }
        outFD.pointee = object.eventFD
    }
}

@_cdecl("parley_dispatch_group_dispatch")
public func exportDispatchGroupDispatch(
    _ group: OpaquePointer?, _ maxCallbacks: Int32, _ outDispatched: UnsafeMutablePointer<Int32>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outDispatched?.pointee = 0
        let object = try dispatchGroups.lookup(group)
        guard maxCallbacks >= 0 else { throw .invalidArgument("max_callbacks must be >= 0, got \(maxCallbacks)") }
        // Not in the optional chain: with out_dispatched NULL the dispatch must still run.
        let ran = object.dispatch(max: Int(maxCallbacks))
        outDispatched?.pointee = Int32(clamping: ran)
    }
}

@_cdecl("parley_dispatch_group_destroy")
public func exportDispatchGroupDestroy(_ group: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        // Closed first, so that a group with clients stays valid; of two destroys, the second finds it closed.
        try dispatchGroups.lookup(group).close()
        _ = try? dispatchGroups.remove(group)
    }
}

@_cdecl("parley_client_set_dispatch_group")
public func exportClientSetDispatchGroup(_ client: OpaquePointer?, _ group: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        try object.dispatcher.setGroup(group == nil ? nil : try dispatchGroups.lookup(group))
    }
}

@_cdecl("parley_client_set_log_callback")
public func exportClientSetLogCallback(
    _ client: OpaquePointer?, _ function: parley_log_fn?, _ userData: UnsafeMutableRawPointer?, _ maxLevel: Int32
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        guard let level = LogLevel(rawValue: maxLevel) else {
            throw .invalidArgument("max_level must be PARLEY_LOG_OFF..PARLEY_LOG_TRACE (0...5), got \(maxLevel)")
        }
        guard let function else {
            object.setLogHandler(level: .off, nil)
            return
        }
        let callback = CCallback(function: function, userData: userData)
        object.setLogHandler(level: level) { level, message in
            message.withCString { callback.function(callback.userData, level.rawValue, $0) }
        }
    }
}

@_cdecl("parley_client_post")
public func exportClientPost(_ client: OpaquePointer?, _ function: parley_callback_fn?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        try object.post { callback.function(callback.userData) }
    }
}

@_cdecl("parley_client_request")
public func exportClientRequest(
    _ client: OpaquePointer?, _ outOperationID: UnsafeMutablePointer<UInt64>?, _ method: UnsafePointer<CChar>?,
    _ path: UnsafePointer<CChar>?, _ bodyJSON: UnsafePointer<CChar>?, _ function: parley_result_fn?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outOperationID?.pointee = 0
        let object = try clients.lookup(client)
        let method = try requiredString(method, "method")
        let path = try requiredString(path, "path")
        let body = try optionalJSON(bodyJSON, "body_json")
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        let id = try object.request(method: method, path: path, body: body) { result in
            deliver(result, to: callback)
        }
        outOperationID?.pointee = id
    }
}

@_cdecl("parley_client_metrics")
public func exportClientMetrics(_ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let object = try clients.lookup(client)
        outJSON.pointee = try ownedCString(try object.metrics().json.canonicalText)
    }
}

@_cdecl("parley_client_cancel")
public func exportClientCancel(_ client: OpaquePointer?, _ operationID: UInt64) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        guard object.cancel(operation: operationID) else {
            throw ParleyError(.notFound, "operation \(operationID) is not in flight (completed, cancelled, or unknown)")
        }
    }
}

/// Hands a JSON result or an error to a `parley_result_fn`.
func deliver(_ result: Result<JSONValue, ParleyError>, to callback: CCallback<parley_result_fn>) {
    switch result {
    case .success(let value):
        value.canonicalText.withCString { callback.function(callback.userData, nil, $0) }
    case .failure(let error):
        withCError(error) { callback.function(callback.userData, $0, nil) }
    }
}
