import CParleyABI
import Glibc
import ParleyCore

/// Returns a malloc'd copy of `text` for the caller to `parley_free`.
func ownedCString(_ text: String) throws(ParleyError) -> UnsafeMutablePointer<CChar> {
    guard let copy = strdup(text) else { throw ParleyError(.noMemory, "out of memory copying a result") }
    return copy
}

/// A malloc'ed, NUL-terminated copy of UTF-8 `bytes` for the caller to `parley_free`.
func ownedCString(bytes: [UInt8]) throws(ParleyError) -> UnsafeMutablePointer<CChar> {
    guard let copy = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else {
        throw ParleyError(.noMemory, "out of memory copying a result")
    }
    bytes.withUnsafeBytes { source in
        if let base = source.baseAddress { memcpy(copy, base, source.count) }
    }
    copy[bytes.count] = 0
    return copy
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

@_cdecl("parley_client_perform")
public func exportClientPerform(
    _ client: OpaquePointer?, _ outOperationID: UnsafeMutablePointer<UInt64>?, _ operation: UnsafePointer<CChar>?,
    _ paramsJSON: UnsafePointer<CChar>?, _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outOperationID?.pointee = 0
        let object = try clients.lookup(client)
        let operation = try requiredString(operation, "operation")
        let params = try optionalJSON(paramsJSON, "params_json") ?? .object([:])
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        let operationID = try object.perform(operation, params: params) { deliver($0, to: callback) }
        outOperationID?.pointee = operationID
    }
}

@_cdecl("parley_operations")
public func exportOperations(_ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        let catalog: JSONValue = .array(OperationCatalog.all.map { spec in
            ["name": .string(spec.name), "method": .string(spec.method), "path": .string(spec.path),
             "required": .array(spec.required.map { .string($0) })]
        })
        outJSON.pointee = try ownedCString(catalog.canonicalText)
    }
}

@_cdecl("parley_event_categories")
public func exportEventCategories(_ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        let categories: JSONValue = .array(EventCategory.allCases.map { category in
            ["name": .string(category.name), "source": .string(category.source)]
        })
        outJSON.pointee = try ownedCString(categories.canonicalText)
    }
}
