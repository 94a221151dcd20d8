import CParleyABI
import ParleyCore

// include/parley/sync_view.h: the SyncManager-style message view.

let syncViews = HandleTable<SyncView>(kind: "sync view")

@_cdecl("parley_sync_view_handler_init")
public func exportSyncViewHandlerInit(_ handler: UnsafeMutablePointer<parley_sync_view_handler>?, _ version: Int32) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let handler else { throw .invalidArgument("handler is NULL") }
        guard (1...PARLEY_SYNC_VIEW_HANDLER_VERSION).contains(version) else {
            throw .invalidArgument("handler version \(version) is not supported (this library: 1 to \(PARLEY_SYNC_VIEW_HANDLER_VERSION))")
        }
        let defaults = parley_sync_view_handler(version: version, action: nil, error: nil, user_data: nil, freshness_changed: nil)
        // A version 1 struct ends before freshness_changed: write only its bytes.
        withUnsafeBytes(of: defaults) { bytes in
            UnsafeMutableRawPointer(handler).copyMemory(from: bytes.baseAddress!, byteCount: syncViewHandlerSize(version: version))
        }
    }
}

/// The size of the handler struct of `version` (1: everything before `freshness_changed`).
private func syncViewHandlerSize(version: Int32) -> Int {
    version >= 2
        ? MemoryLayout<parley_sync_view_handler>.size
        : MemoryLayout<parley_sync_view_handler>.offset(of: \.freshness_changed)!
}

/// Copies the caller's handler, reading only the fields its version has.
private func readSyncViewHandler(_ handler: UnsafePointer<parley_sync_view_handler>) throws(ParleyError) -> parley_sync_view_handler {
    let version = UnsafeRawPointer(handler).load(as: Int32.self)
    guard (1...PARLEY_SYNC_VIEW_HANDLER_VERSION).contains(version) else {
        throw .invalidArgument("handler.version is \(version); set it with PARLEY_SYNC_VIEW_HANDLER_INIT")
    }
    var copy = parley_sync_view_handler(version: version, action: nil, error: nil, user_data: nil, freshness_changed: nil)
    withUnsafeMutableBytes(of: &copy) { bytes in
        bytes.baseAddress!.copyMemory(from: UnsafeRawPointer(handler), byteCount: syncViewHandlerSize(version: version))
    }
    return copy
}

@_cdecl("parley_sync_view_create")
public func exportSyncViewCreate(
    _ outView: UnsafeMutablePointer<OpaquePointer?>?, _ client: OpaquePointer?, _ channelURL: UnsafePointer<CChar>?,
    _ viewpoint: Int64, _ optionsJSON: UnsafePointer<CChar>?, _ handler: UnsafePointer<parley_sync_view_handler>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outView else { throw .invalidArgument("out_view is NULL") }
        outView.pointee = nil
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        var options = SyncViewOptions()
        if let optionsJSON, optionsJSON.pointee != 0 {
            guard let value = try optionalJSON(optionsJSON, "options_json") else { throw .invalidArgument("options_json is NULL") }
            options = try SyncViewOptions(json: value)
        }
        var swiftHandler = SyncViewHandler()
        if let handler {
            let copy = try readSyncViewHandler(handler)
            if let action = copy.action {
                let fn = CCallback(function: action, userData: copy.user_data)
                swiftHandler.action = { action, list, messages in
                    JSONValue.array(messages).canonicalText.withCString {
                        fn.function(fn.userData, action.rawValue, list.rawValue, $0)
                    }
                }
            }
            if let error = copy.error {
                let fn = CCallback(function: error, userData: copy.user_data)
                swiftHandler.error = { failure in withCError(failure) { fn.function(fn.userData, $0) } }
            }
            if let changed = freshnessCallback(copy.freshness_changed, copy.user_data) { swiftHandler.freshnessChanged = changed }
        }
        let view = try object.syncView(channelURL: url, viewpoint: viewpoint, options: options, handler: swiftHandler)
        outView.pointee = syncViews.insert(view)
    }
}

/// A C fetch callback as a Swift completion (NULL: nothing is called).
private func fetchCompletion(_ function: parley_sync_fetch_fn?, _ userData: UnsafeMutableRawPointer?) -> SyncFetchCompletion {
    guard let function else { return { _ in } }
    let callback = CCallback(function: function, userData: userData)
    return { result in
        switch result {
        case .success(let outcome):
            callback.function(callback.userData, nil, outcome.hasMore ? 1 : 0, outcome.offline ? 1 : 0)
        case .failure(let error):
            withCError(error) { callback.function(callback.userData, $0, 0, 0) }
        }
    }
}

private func liveView(_ handle: OpaquePointer?) throws(ParleyError) -> SyncView {
    let object = try syncViews.lookup(handle)
    guard !object.isDisposed else { throw .invalidState("the sync view is disposed (its client was destroyed)") }
    return object
}

@_cdecl("parley_sync_view_fetch")
public func exportSyncViewFetch(
    _ view: OpaquePointer?, _ direction: Int32, _ function: parley_sync_fetch_fn?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try liveView(view)
        guard let way = SyncViewDirection(rawValue: direction) else {
            throw .invalidArgument("direction: expected PARLEY_SYNC_DIRECTION_PREVIOUS (1) or PARLEY_SYNC_DIRECTION_NEXT (2), got \(direction)")
        }
        object.fetch(way, completion: fetchCompletion(function, userData))
    }
}

@_cdecl("parley_sync_view_fetch_all_next")
public func exportSyncViewFetchAllNext(_ view: OpaquePointer?, _ function: parley_sync_fetch_fn?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try liveView(view).fetchAllNext(completion: fetchCompletion(function, userData))
    }
}

@_cdecl("parley_sync_view_reset_viewpoint")
public func exportSyncViewResetViewpoint(_ view: OpaquePointer?, _ viewpoint: Int64) -> Int32 {
    withStatus { () throws(ParleyError) in
        try liveView(view).resetViewpoint(viewpoint)
    }
}

@_cdecl("parley_sync_view_viewpoint")
public func exportSyncViewViewpoint(_ view: OpaquePointer?, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let out else { throw .invalidArgument("out_viewpoint is NULL") }
        out.pointee = try syncViews.lookup(view).viewpoint
    }
}

@_cdecl("parley_sync_view_messages")
public func exportSyncViewMessages(_ view: OpaquePointer?, _ list: Int32, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let object = try syncViews.lookup(view)
        guard let which = SyncViewList(rawValue: list) else {
            throw .invalidArgument("list: expected PARLEY_SYNC_LIST_SUCCEEDED (1), _PENDING (2) or _FAILED (3), got \(list)")
        }
        outJSON.pointee = try ownedCString(JSONValue.array(object.messages(which)).canonicalText)
    }
}

@_cdecl("parley_sync_view_dispose")
public func exportSyncViewDispose(_ view: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try syncViews.remove(view).dispose()
    }
}
