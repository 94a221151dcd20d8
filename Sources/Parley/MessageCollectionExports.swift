import CParleyABI
import Glibc
import ParleyCore

// include/parley/message_collection.h: the message collection.

let messageCollections = HandleTable<MessageCollection>(kind: "message collection")

@_cdecl("parley_message_collection_handler_init")
public func exportMessageCollectionHandlerInit(_ handler: UnsafeMutablePointer<parley_message_collection_handler>?, _ version: Int32) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let handler else { throw .invalidArgument("handler is NULL") }
        guard (1...PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION).contains(version) else {
            throw .invalidArgument("handler version \(version) is not supported (this library: 1 to \(PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION))")
        }
        let defaults = parley_message_collection_handler(version: version, event: nil, error: nil, user_data: nil, freshness_changed: nil)
        // A version 1 struct ends before freshness_changed: write only its bytes.
        withUnsafeBytes(of: defaults) { bytes in
            UnsafeMutableRawPointer(handler).copyMemory(from: bytes.baseAddress!, byteCount: messageHandlerSize(version: version))
        }
    }
}

/// The size of the handler struct of `version` (1: everything before `freshness_changed`).
private func messageHandlerSize(version: Int32) -> Int {
    version >= 2
        ? MemoryLayout<parley_message_collection_handler>.size
        : MemoryLayout<parley_message_collection_handler>.offset(of: \.freshness_changed)!
}

/// Copies the caller's handler, reading only the fields its version has.
private func readMessageHandler(_ handler: UnsafePointer<parley_message_collection_handler>) throws(ParleyError)
    -> parley_message_collection_handler
{
    let version = UnsafeRawPointer(handler).load(as: Int32.self)
    guard (1...PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION).contains(version) else {
        throw .invalidArgument("handler.version is \(version); set it with PARLEY_MESSAGE_COLLECTION_HANDLER_INIT")
    }
    var copy = parley_message_collection_handler(version: version, event: nil, error: nil, user_data: nil, freshness_changed: nil)
    withUnsafeMutableBytes(of: &copy) { bytes in
        bytes.baseAddress!.copyMemory(from: UnsafeRawPointer(handler), byteCount: messageHandlerSize(version: version))
    }
    return copy
}

/// Hands one event to the C callback, every string borrowed for the call.
private func sendEvent(
    _ callback: CCallback<parley_message_event_fn>, kind: Int32, context: MessageEventContext, channelURL: String,
    channel: JSONText, messages: MessageList
) {
    let channelText = channel.text
    let messagesText = messages.jsonText
    context.source.name.withCString { sourceName in
        context.detail.withCString { detail in
            channelURL.withCString { url in
                channelText.withCString { channelJSON in
                    messagesText.withCString { messagesJSON in
                        var event = parley_message_event(
                            kind: kind, source: context.source.code, source_name: sourceName, detail: detail,
                            sending_status: context.sendingStatus.rawValue, channel_url: url, channel_json: channelJSON,
                            messages_json: messagesJSON)
                        withUnsafePointer(to: &event) { callback.function(callback.userData, $0) }
                    }
                }
            }
        }
    }
}

@_cdecl("parley_message_collection_create")
public func exportMessageCollectionCreate(
    _ outCollection: UnsafeMutablePointer<OpaquePointer?>?, _ client: OpaquePointer?, _ channelURL: UnsafePointer<CChar>?,
    _ startingPoint: Int64, _ paramsJSON: UnsafePointer<CChar>?, _ handler: UnsafePointer<parley_message_collection_handler>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outCollection else { throw .invalidArgument("out_collection is NULL") }
        outCollection.pointee = nil
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        var params = MessageListParams()
        if let paramsJSON, paramsJSON.pointee != 0 {
            guard let value = try optionalJSON(paramsJSON, "params_json") else { throw .invalidArgument("params_json is NULL") }
            params = try MessageListParams(json: value)
        }
        var swiftHandler = MessageCollectionHandler()
        if let handler {
            let copy = try readMessageHandler(handler)
            if let event = copy.event {
                let fn = CCallback(function: event, userData: copy.user_data)
                swiftHandler.added = { context, channel, messages in
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_ADDED, context: context, channelURL: url, channel: channel, messages: messages)
                }
                swiftHandler.updated = { context, channel, messages in
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_UPDATED, context: context, channelURL: url, channel: channel, messages: messages)
                }
                swiftHandler.deleted = { context, channel, messages in
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_DELETED, context: context, channelURL: url, channel: channel, messages: messages)
                }
                swiftHandler.channelUpdated = { context, channel in
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_CHANNEL_UPDATED, context: context, channelURL: url, channel: channel, messages: [])
                }
                swiftHandler.channelDeleted = { context, _ in
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_CHANNEL_DELETED, context: context, channelURL: url, channel: .null, messages: [])
                }
                swiftHandler.hugeGapDetected = {
                    let context = MessageEventContext(source: .messageFill, detail: "", sendingStatus: .none)
                    sendEvent(fn, kind: PARLEY_MESSAGE_EVENT_HUGE_GAP_DETECTED, context: context, channelURL: url, channel: .null, messages: [])
                }
            }
            if let error = copy.error {
                let fn = CCallback(function: error, userData: copy.user_data)
                swiftHandler.error = { failure in withCError(failure) { fn.function(fn.userData, $0) } }
            }
            if let changed = freshnessCallback(copy.freshness_changed, copy.user_data) { swiftHandler.freshnessChanged = changed }
        }
        let collection = try object.messageCollection(channelURL: url, startingPoint: startingPoint, params: params, handler: swiftHandler)
        outCollection.pointee = messageCollections.insert(collection)
    }
}

/// A C result callback as a Swift completion (NULL: nothing is called).
private func messagesCompletion(_ function: parley_messages_result_fn?, _ userData: UnsafeMutableRawPointer?) -> MessagesCompletion {
    guard let function else { return { _ in } }
    let callback = CCallback(function: function, userData: userData)
    return { result in
        switch result {
        case .success(let messages):
            messages.jsonText.withCString { callback.function(callback.userData, nil, $0) }
        case .failure(let error):
            withCError(error) { callback.function(callback.userData, $0, nil) }
        }
    }
}

private func liveCollection(_ handle: OpaquePointer?) throws(ParleyError) -> MessageCollection {
    let object = try messageCollections.lookup(handle)
    guard !object.isDisposed else { throw .invalidState("the collection is disposed (its client was destroyed)") }
    return object
}

@_cdecl("parley_message_collection_start")
public func exportMessageCollectionStart(
    _ collection: OpaquePointer?, _ cacheFunction: parley_messages_result_fn?, _ apiFunction: parley_messages_result_fn?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        try liveCollection(collection).start(
            cacheResult: messagesCompletion(cacheFunction, userData), apiResult: messagesCompletion(apiFunction, userData))
    }
}

@_cdecl("parley_message_collection_load_previous")
public func exportMessageCollectionLoadPrevious(
    _ collection: OpaquePointer?, _ function: parley_messages_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try liveCollection(collection)
        guard function != nil else { throw .invalidArgument("fn is NULL") }
        object.loadPrevious(completion: messagesCompletion(function, userData))
    }
}

@_cdecl("parley_message_collection_load_next")
public func exportMessageCollectionLoadNext(
    _ collection: OpaquePointer?, _ function: parley_messages_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try liveCollection(collection)
        guard function != nil else { throw .invalidArgument("fn is NULL") }
        object.loadNext(completion: messagesCompletion(function, userData))
    }
}

@_cdecl("parley_message_collection_has_previous")
public func exportMessageCollectionHasPrevious(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let out else { throw .invalidArgument("out_has_previous is NULL") }
        out.pointee = try messageCollections.lookup(collection).hasPrevious ? 1 : 0
    }
}

@_cdecl("parley_message_collection_has_next")
public func exportMessageCollectionHasNext(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let out else { throw .invalidArgument("out_has_next is NULL") }
        out.pointee = try messageCollections.lookup(collection).hasNext ? 1 : 0
    }
}

@_cdecl("parley_message_collection_messages")
public func exportMessageCollectionMessages(_ collection: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        outJSON.pointee = try ownedCString(try messageCollections.lookup(collection).messagesJSON)
    }
}

@_cdecl("parley_message_collection_dispose")
public func exportMessageCollectionDispose(_ collection: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try messageCollections.remove(collection).dispose()
    }
}
