import CParleyABI
import Glibc
import ParleyCore

// include/parley/session.h: connecting, the connection and event handlers.

@_cdecl("parley_client_set_connection_handler")
public func exportSetConnectionHandler(
    _ client: OpaquePointer?, _ function: parley_connection_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        try clients.lookup(client).setConnectionHandler(function.map { connectionHandler($0, userData) })
    }
}

@_cdecl("parley_client_set_event_handler")
public func exportSetEventHandler(
    _ client: OpaquePointer?, _ function: parley_event_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        try clients.lookup(client).setEventHandler(function.map { eventHandler($0, userData) })
    }
}

@_cdecl("parley_client_add_connection_handler")
public func exportAddConnectionHandler(
    _ client: OpaquePointer?, _ id: UnsafePointer<CChar>?, _ function: parley_connection_fn?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        let id = try requiredString(id, "id")
        guard let function else { throw .invalidArgument("fn is NULL (parley_client_remove_connection_handler removes)") }
        try object.addConnectionHandler(id: id, connectionHandler(function, userData))
    }
}

@_cdecl("parley_client_remove_connection_handler")
public func exportRemoveConnectionHandler(_ client: OpaquePointer?, _ id: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        try object.removeConnectionHandler(id: try requiredString(id, "id"))
    }
}

@_cdecl("parley_client_add_event_handler")
public func exportAddEventHandler(
    _ client: OpaquePointer?, _ id: UnsafePointer<CChar>?, _ function: parley_event_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        let id = try requiredString(id, "id")
        guard let function else { throw .invalidArgument("fn is NULL (parley_client_remove_event_handler removes)") }
        try object.addEventHandler(id: id, eventHandler(function, userData))
    }
}

@_cdecl("parley_client_remove_event_handler")
public func exportRemoveEventHandler(_ client: OpaquePointer?, _ id: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        try object.removeEventHandler(id: try requiredString(id, "id"))
    }
}

@_cdecl("parley_connection_event_name")
public func exportConnectionEventName(_ event: Int32) -> UnsafePointer<CChar> {
    staticStrings.pointer(for: ConnectionEvent(rawValue: event)?.name ?? "unknown")
}

/// A C connection callback as the client's handler.
private func connectionHandler(
    _ function: parley_connection_fn, _ userData: UnsafeMutableRawPointer?
) -> @Sendable (ConnectionEvent, ParleyError?) -> Void {
    let callback = CCallback(function: function, userData: userData)
    return { event, error in
        if let error {
            withCError(error) { callback.function(callback.userData, event.rawValue, $0) }
        } else {
            callback.function(callback.userData, event.rawValue, nil)
        }
    }
}

/// A C event callback as the client's handler.
private func eventHandler(
    _ function: parley_event_fn, _ userData: UnsafeMutableRawPointer?
) -> @Sendable (String, String, String) -> Void {
    let callback = CCallback(function: function, userData: userData)
    return { category, channelURL, payload in
        category.withCString { category in
            channelURL.withCString { url in
                payload.withCString { callback.function(callback.userData, category, url, $0) }
            }
        }
    }
}

@_cdecl("parley_client_reconnect")
public func exportReconnect(_ client: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in try clients.lookup(client).reconnect() }
}

@_cdecl("parley_client_set_session_token")
public func exportSetSessionToken(_ client: OpaquePointer?, _ token: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        try object.setSessionToken(try requiredString(token, "session_token"))
    }
}

@_cdecl("parley_client_connection_state")
public func exportConnectionState(_ client: OpaquePointer?, _ outState: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outState else { throw .invalidArgument("out_state is NULL") }
        outState.pointee = PARLEY_STATE_CLOSED
        outState.pointee =
            switch try clients.lookup(client).connectionState {
            case .closed: PARLEY_STATE_CLOSED
            case .connecting: PARLEY_STATE_CONNECTING
            case .open: PARLEY_STATE_OPEN
            case .reconnecting: PARLEY_STATE_RECONNECTING
            }
    }
}

@_cdecl("parley_client_connect")
public func exportClientConnect(
    _ client: OpaquePointer?, _ outOperationID: UnsafeMutablePointer<UInt64>?, _ userID: UnsafePointer<CChar>?,
    _ sessionToken: UnsafePointer<CChar>?, _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outOperationID?.pointee = 0
        let object = try clients.lookup(client)
        let userID = try requiredString(userID, "user_id")
        let token = try requiredString(sessionToken, "session_token")
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        // Not `outOperationID?.pointee = try ...`: optional chaining would skip the call when NULL.
        let operationID = try object.connect(userID: userID, sessionToken: token) { deliver($0, to: callback) }
        outOperationID?.pointee = operationID
    }
}

@_cdecl("parley_client_disconnect")
public func exportClientDisconnect(_ client: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in try clients.lookup(client).disconnect() }
}

@_cdecl("parley_client_current_user_id")
public func exportClientCurrentUserID(_ client: OpaquePointer?, _ outUserID: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outUserID else { throw .invalidArgument("out_user_id is NULL") }
        outUserID.pointee = nil
        let object = try clients.lookup(client)
        guard let userID = object.currentUserID else { throw .invalidState("not connected") }
        outUserID.pointee = try ownedCString(userID)
    }
}
