import CParleyABI
import Glibc
import ParleyCore

// include/parley/group_channel_collection.h: the group channel collection and the table of
// collection event sources.

let groupChannelCollections = HandleTable<GroupChannelCollection>(kind: "group channel collection")

@_cdecl("parley_collection_sources")
public func exportCollectionSources(_ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        let table = JSONValue.array(CollectionEventSource.allCases.map { .object(["code": .int(Int64($0.code)), "name": .string($0.name)]) })
        outJSON.pointee = try ownedCString(table.canonicalText)
    }
}

@_cdecl("parley_group_channel_collection_handler_init")
public func exportGroupChannelCollectionHandlerInit(
    _ handler: UnsafeMutablePointer<parley_group_channel_collection_handler>?, _ version: Int32
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let handler else { throw .invalidArgument("handler is NULL") }
        guard (1...PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION).contains(version) else {
            throw .invalidArgument("handler version \(version) is not supported (this library: 1 to \(PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION))")
        }
        let defaults = parley_group_channel_collection_handler(
            version: version, added: nil, updated: nil, deleted: nil, error: nil, user_data: nil, deleted_channels: nil,
            freshness_changed: nil)
        // An older version's struct ends before the later fields: write only its bytes.
        withUnsafeBytes(of: defaults) { bytes in
            UnsafeMutableRawPointer(handler).copyMemory(from: bytes.baseAddress!, byteCount: groupChannelHandlerSize(version: version))
        }
    }
}

/// The size of the handler struct of `version` (1: everything before `deleted_channels`, 2:
/// before `freshness_changed`).
func groupChannelHandlerSize(version: Int32) -> Int {
    switch version {
    case 1: MemoryLayout<parley_group_channel_collection_handler>.offset(of: \.deleted_channels)!
    case 2: MemoryLayout<parley_group_channel_collection_handler>.offset(of: \.freshness_changed)!
    default: MemoryLayout<parley_group_channel_collection_handler>.size
    }
}

/// Copies the caller's handler, reading only the fields its version has.
func readGroupChannelHandler(_ handler: UnsafePointer<parley_group_channel_collection_handler>) throws(ParleyError)
    -> parley_group_channel_collection_handler
{
    let version = UnsafeRawPointer(handler).load(as: Int32.self)
    guard (1...PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION).contains(version) else {
        throw .invalidArgument("handler.version is \(version); set it with PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT")
    }
    var copy = parley_group_channel_collection_handler(
        version: version, added: nil, updated: nil, deleted: nil, error: nil, user_data: nil, deleted_channels: nil,
            freshness_changed: nil)
    withUnsafeMutableBytes(of: &copy) { bytes in
        bytes.baseAddress!.copyMemory(from: UnsafeRawPointer(handler), byteCount: groupChannelHandlerSize(version: version))
    }
    return copy
}

/// Calls `body` with a borrowed C context.
func withCContext(_ context: CollectionEventContext, _ body: (UnsafePointer<parley_collection_context>) -> Void) {
    context.source.name.withCString { name in
        context.detail.withCString { detail in
            var cContext = parley_collection_context(source: context.source.code, source_name: name, detail: detail)
            withUnsafePointer(to: &cContext) { body($0) }
        }
    }
}

@_cdecl("parley_group_channel_collection_create")
public func exportGroupChannelCollectionCreate(
    _ outCollection: UnsafeMutablePointer<OpaquePointer?>?, _ client: OpaquePointer?, _ queryJSON: UnsafePointer<CChar>?,
    _ handler: UnsafePointer<parley_group_channel_collection_handler>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outCollection else { throw .invalidArgument("out_collection is NULL") }
        outCollection.pointee = nil
        let object = try clients.lookup(client)
        var query = GroupChannelListQuery()
        if let queryJSON, queryJSON.pointee != 0 {
            guard let value = try optionalJSON(queryJSON, "query_json") else { throw .invalidArgument("query_json is NULL") }
            query = try GroupChannelListQuery(json: value)
        }
        var swiftHandler = GroupChannelCollectionHandler()
        if let handler {
            let copy = try readGroupChannelHandler(handler)
            if let added = copy.added {
                let fn = CCallback(function: added, userData: copy.user_data)
                swiftHandler.added = { context, channels in
                    let text = JSONText.arrayText(channels)
                    withCContext(context) { c in text.withCString { fn.function(fn.userData, c, $0) } }
                }
            }
            if let updated = copy.updated {
                let fn = CCallback(function: updated, userData: copy.user_data)
                swiftHandler.updated = { context, channels in
                    let text = JSONText.arrayText(channels)
                    withCContext(context) { c in text.withCString { fn.function(fn.userData, c, $0) } }
                }
            }
            if let deleted = copy.deleted {
                let fn = CCallback(function: deleted, userData: copy.user_data)
                swiftHandler.deleted = { context, urls in
                    let text = JSONValue.array(urls.map(JSONValue.string)).canonicalText
                    withCContext(context) { c in text.withCString { fn.function(fn.userData, c, $0) } }
                }
            }
            if let deletedChannels = copy.deleted_channels {
                let fn = CCallback(function: deletedChannels, userData: copy.user_data)
                swiftHandler.deletedChannels = { context, channels in
                    let text = JSONText.arrayText(channels)
                    withCContext(context) { c in text.withCString { fn.function(fn.userData, c, $0) } }
                }
            }
            if let error = copy.error {
                let fn = CCallback(function: error, userData: copy.user_data)
                swiftHandler.error = { failure in withCError(failure) { fn.function(fn.userData, $0) } }
            }
            if let changed = freshnessCallback(copy.freshness_changed, copy.user_data) { swiftHandler.freshnessChanged = changed }
        }
        let collection = try object.groupChannelCollection(query: query, handler: swiftHandler)
        outCollection.pointee = groupChannelCollections.insert(collection)
    }
}

@_cdecl("parley_group_channel_collection_load_more")
public func exportGroupChannelCollectionLoadMore(
    _ collection: OpaquePointer?, _ function: parley_channels_result_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try groupChannelCollections.lookup(collection)
        guard let function else { throw .invalidArgument("fn is NULL") }
        guard !object.isDisposed else { throw .invalidState("the collection is disposed (its client was destroyed)") }
        let callback = CCallback(function: function, userData: userData)
        object.loadMore { result in
            switch result {
            case .success(let channels):
                JSONText.arrayText(channels).withCString { callback.function(callback.userData, nil, $0) }
            case .failure(let error):
                withCError(error) { callback.function(callback.userData, $0, nil) }
            }
        }
    }
}

@_cdecl("parley_group_channel_collection_has_more")
public func exportGroupChannelCollectionHasMore(_ collection: OpaquePointer?, _ outHasMore: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outHasMore else { throw .invalidArgument("out_has_more is NULL") }
        outHasMore.pointee = try groupChannelCollections.lookup(collection).hasMore ? 1 : 0
    }
}

@_cdecl("parley_group_channel_collection_channels")
public func exportGroupChannelCollectionChannels(
    _ collection: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let channels = try groupChannelCollections.lookup(collection).channelTexts
        outJSON.pointee = try ownedCString(JSONText.arrayText(channels))
    }
}

@_cdecl("parley_group_channel_collection_dispose")
public func exportGroupChannelCollectionDispose(_ collection: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try groupChannelCollections.remove(collection).dispose()
    }
}
