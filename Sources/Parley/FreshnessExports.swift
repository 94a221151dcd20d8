import CParleyABI
import ParleyCore

// Freshness and page origin for every view (include/parley/group_channel_collection.h,
// "Freshness"): the states' names, the getters, and the handlers' freshness_changed callback
// as a Swift closure.
// A new view adopts them with `freshnessCallback` in its handler mapping and one getter each.

/// The handler's freshness_changed as a Swift closure (NULL: nothing is called).
func freshnessCallback(_ function: parley_freshness_fn?, _ userData: UnsafeMutableRawPointer?) -> (@Sendable (ViewFreshness) -> Void)? {
    guard let function else { return nil }
    let callback = CCallback(function: function, userData: userData)
    return { freshness in callback.function(callback.userData, freshness.rawValue) }
}

/// Writes a view's freshness to a caller's out-parameter.
func writeFreshness(_ out: UnsafeMutablePointer<Int32>?, _ read: () throws(ParleyError) -> ViewFreshness) throws(ParleyError) {
    guard let out else { throw .invalidArgument("out_freshness is NULL") }
    out.pointee = PARLEY_FRESHNESS_OFFLINE
    out.pointee = try read().rawValue
}

/// Writes a result's origin (`PARLEY_PAGE_ORIGIN_NONE` for none) to a caller's out-parameter.
func writeOrigin(_ out: UnsafeMutablePointer<Int32>?, _ read: () throws(ParleyError) -> PageOrigin?) throws(ParleyError) {
    guard let out else { throw .invalidArgument("out_origin is NULL") }
    out.pointee = PARLEY_PAGE_ORIGIN_NONE
    out.pointee = try read()?.rawValue ?? PARLEY_PAGE_ORIGIN_NONE
}

@_cdecl("parley_freshness_name")
public func exportFreshnessName(_ freshness: Int32) -> UnsafePointer<CChar> {
    staticStrings.pointer(for: ViewFreshness(rawValue: freshness)?.name ?? "unknown")
}

@_cdecl("parley_group_channel_collection_freshness")
public func exportGroupChannelCollectionFreshness(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeFreshness(out) { () throws(ParleyError) in try groupChannelCollections.lookup(collection).freshness }
    }
}

@_cdecl("parley_group_channel_collection_last_page_origin")
public func exportGroupChannelCollectionLastPageOrigin(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeOrigin(out) { () throws(ParleyError) in try groupChannelCollections.lookup(collection).lastLoadOrigin }
    }
}

@_cdecl("parley_message_collection_freshness")
public func exportMessageCollectionFreshness(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeFreshness(out) { () throws(ParleyError) in try messageCollections.lookup(collection).freshness }
    }
}

@_cdecl("parley_message_collection_last_page_origin")
public func exportMessageCollectionLastPageOrigin(_ collection: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeOrigin(out) { () throws(ParleyError) in try messageCollections.lookup(collection).lastLoadOrigin }
    }
}

@_cdecl("parley_sync_view_freshness")
public func exportSyncViewFreshness(_ view: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeFreshness(out) { () throws(ParleyError) in try syncViews.lookup(view).freshness }
    }
}

@_cdecl("parley_sync_view_last_fetch_origin")
public func exportSyncViewLastFetchOrigin(_ view: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeOrigin(out) { () throws(ParleyError) in try syncViews.lookup(view).lastFetchOrigin }
    }
}
