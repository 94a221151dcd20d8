import CParleyABI
import Glibc
import ParleyCore

// include/parley/cache.h: reading the cache.

@_cdecl("parley_client_cached_channels")
public func exportCachedChannels(
    _ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ order: UnsafePointer<CChar>?,
    _ limit: Int32
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let object = try clients.lookup(client)
        let order = try order.map { p throws(ParleyError) in try validatedString(p, "order") } ?? "latest_last_message"
        outJSON.pointee = try ownedCString(try object.cachedChannels(order: order, limit: Int(limit)))
    }
}

@_cdecl("parley_client_cached_channel")
public func exportCachedChannel(
    _ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ channelURL: UnsafePointer<CChar>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        guard let json = try object.cachedChannel(url: url) else { throw ParleyError(.notFound, "channel '\(url)' is not cached") }
        outJSON.pointee = try ownedCString(json)
    }
}

@_cdecl("parley_client_cached_messages")
public func exportCachedMessages(
    _ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ channelURL: UnsafePointer<CChar>?,
    _ beforeTs: Int64, _ limit: Int32
) -> Int32 {
    cachedMessages(client, outJSON, channelURL, beforeTs, limit) { object, url, before, count throws(ParleyError) in
        try object.cachedMessagesJSON(channelURL: url, beforeTs: before, limit: count)
    }
}

@_cdecl("parley_client_cached_message_page")
public func exportCachedMessagePage(
    _ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ channelURL: UnsafePointer<CChar>?,
    _ beforeTs: Int64, _ limit: Int32
) -> Int32 {
    cachedMessages(client, outJSON, channelURL, beforeTs, limit) { object, url, before, count throws(ParleyError) in
        try object.cachedMessagePageJSON(channelURL: url, beforeTs: before, limit: count)
    }
}

/// The argument checks the two cached message reads share; `read` makes the JSON.
private func cachedMessages(
    _ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ channelURL: UnsafePointer<CChar>?,
    _ beforeTs: Int64, _ limit: Int32,
    _ read: (ParleyClient, String, Int64?, Int) throws(ParleyError) -> [UInt8]
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        let object = try clients.lookup(client)
        let url = try requiredString(channelURL, "channel_url")
        guard beforeTs >= -1 else { throw .invalidArgument("before_ts must be a timestamp in ms, or -1 for the newest") }
        outJSON.pointee = try ownedCString(bytes: try read(object, url, beforeTs == -1 ? nil : beforeTs, Int(limit)))
    }
}

@_cdecl("parley_client_clear_cached_data")
public func exportClearCachedData(_ client: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in try clients.lookup(client).clearCachedData() }
}

@_cdecl("parley_client_rekey_cache")
public func exportRekeyCache(_ client: OpaquePointer?, _ keyJSON: UnsafePointer<CChar>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        let object = try clients.lookup(client)
        let json = try keyJSON.map { p throws(ParleyError) in try validatedString(p, "key_json") } ?? "{}"
        try object.rekeyCache(json: json)
    }
}
