import CParleyABI
import Glibc
import ParleyCore

// include/parley/sending.h: sending through the outbox.

/// Wraps an optional C progress callback (called on the callback context).
private func progressHandler(_ function: parley_progress_fn?, _ userData: UnsafeMutableRawPointer?, reqID: @escaping @Sendable () -> String) -> HTTPUploadProgress? {
    guard let function else { return nil }
    let callback = CCallback(function: function, userData: userData)
    return { sent, total in
        reqID().withCString { callback.function(callback.userData, $0, sent, total) }
    }
}

private func sendMessage(
    _ client: OpaquePointer?, _ outPending: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ outOperationID: UnsafeMutablePointer<UInt64>?, _ channelURL: UnsafePointer<CChar>?, _ paramsJSON: UnsafePointer<CChar>?,
    _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?,
    send: (ParleyClient, String, JSONValue, @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) throws(ParleyError) -> AcceptedSend
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outPending?.pointee = nil
        outOperationID?.pointee = 0
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        guard let params = try optionalJSON(paramsJSON, "params_json") else { throw .invalidArgument("params_json is NULL") }
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        let accepted = try send(object, url, params) { deliver($0, to: callback) }
        outOperationID?.pointee = accepted.operationID
        if let outPending { outPending.pointee = try ownedCString(accepted.pendingMessage) }
    }
}

@_cdecl("parley_client_send_user_message")
public func exportSendUserMessage(
    _ client: OpaquePointer?, _ outPending: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ outOperationID: UnsafeMutablePointer<UInt64>?, _ channelURL: UnsafePointer<CChar>?, _ paramsJSON: UnsafePointer<CChar>?,
    _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    sendMessage(client, outPending, outOperationID, channelURL, paramsJSON, function, userData) { object, url, params, completion throws(ParleyError) in
        try object.sendUserMessage(channelURL: url, params: params, completion: completion)
    }
}

@_cdecl("parley_client_send_file_message")
public func exportSendFileMessage(
    _ client: OpaquePointer?, _ outPending: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ outOperationID: UnsafeMutablePointer<UInt64>?, _ channelURL: UnsafePointer<CChar>?, _ paramsJSON: UnsafePointer<CChar>?,
    _ progress: parley_progress_fn?, _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    sendMessage(client, outPending, outOperationID, channelURL, paramsJSON, function, userData) { object, url, params, completion throws(ParleyError) in
        // The progress callback names the message, so the req_id is fixed before sending.
        var params = params
        if case .object(var fields) = params, fields["req_id"] == nil {
            fields["req_id"] = .string(ParleyClient.newRequestID())
            params = .object(fields)
        }
        let reqID = params["req_id"]?.stringValue ?? ""
        return try object.sendFileMessage(
            channelURL: url, params: params, progress: progressHandler(progress, userData) { reqID }, completion: completion)
    }
}

/// One file's outcome to a `parley_file_sent_fn`.
private func deliverFileSent(index: Int, reqID: String, _ result: Result<JSONValue, ParleyError>,
                             to callback: CCallback<parley_file_sent_fn>) {
    reqID.withCString { cReqID in
        switch result {
        case .success(let message):
            message.canonicalText.withCString { callback.function(callback.userData, Int32(index), cReqID, nil, $0) }
        case .failure(let error):
            withCError(error) { callback.function(callback.userData, Int32(index), cReqID, $0, nil) }
        }
    }
}

@_cdecl("parley_client_send_file_messages")
public func exportSendFileMessages(
    _ client: OpaquePointer?, _ outPending: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ channelURL: UnsafePointer<CChar>?, _ paramsJSON: UnsafePointer<CChar>?,
    _ progress: parley_progress_fn?, _ function: parley_file_sent_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outPending?.pointee = nil
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        guard let params = try optionalJSON(paramsJSON, "params_json") else { throw .invalidArgument("params_json is NULL") }
        guard case .array(let files) = params else {
            throw .invalidArgument("params_json: expected a JSON array of file message params, got \(params.typeName)")
        }
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        var reportProgress: (@Sendable (String, Int64, Int64) -> Void)?
        if let progress {
            let report = CCallback(function: progress, userData: userData)
            reportProgress = { reqID, sent, total in reqID.withCString { report.function(report.userData, $0, sent, total) } }
        }
        let accepted = try object.sendFileMessages(channelURL: url, params: files, progress: reportProgress) { index, reqID, result in
            deliverFileSent(index: index, reqID: reqID, result, to: callback)
        }
        // The pending messages are JSON texts already: the array is their list.
        if let outPending { outPending.pointee = try ownedCString("[" + accepted.map(\.pendingMessage).joined(separator: ",") + "]") }
    }
}

@_cdecl("parley_client_resend_message")
public func exportResendMessage(
    _ client: OpaquePointer?, _ outOperationID: UnsafeMutablePointer<UInt64>?, _ reqID: UnsafePointer<CChar>?,
    _ progress: parley_progress_fn?, _ function: parley_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outOperationID?.pointee = 0
        let object = try clients.lookup(client)
        let id = try requiredString(reqID, "req_id")
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        // Not `outOperationID?.pointee = try ...`: optional chaining would skip the call when NULL.
        let operationID = try object.resendMessage(reqID: id, progress: progressHandler(progress, userData) { id }) {
            deliver($0, to: callback)
        }
        outOperationID?.pointee = operationID
    }
}

@_cdecl("parley_client_cancel_message")
public func exportCancelMessage(_ client: OpaquePointer?, _ reqID: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        try object.cancelMessage(reqID: try requiredString(reqID, "req_id"))
    }
}

@_cdecl("parley_client_remove_failed_messages")
public func exportRemoveFailedMessages(
    _ client: OpaquePointer?, _ outReqIDs: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ channelURL: UnsafePointer<CChar>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outReqIDs?.pointee = nil
        let object = try clients.lookup(client)
        let removed = try object.removeFailedMessages(channelURL: try requiredString(channelURL, "channel_url"))
        if let outReqIDs { outReqIDs.pointee = try ownedCString(JSONValue.array(removed.map { .string($0) }).canonicalText) }
    }
}
