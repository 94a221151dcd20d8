import CParleyABI
import ParleyCore

// include/parley/search.h: the live message search.

let messageSearches = HandleTable<MessageSearch>(kind: "message search")

@_cdecl("parley_message_search_handler_init")
public func exportMessageSearchHandlerInit(_ handler: UnsafeMutablePointer<parley_message_search_handler>?, _ version: Int32) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let handler else { throw .invalidArgument("handler is NULL") }
        guard version == PARLEY_MESSAGE_SEARCH_HANDLER_VERSION else {
            throw .invalidArgument("handler version \(version) is not supported (this library: \(PARLEY_MESSAGE_SEARCH_HANDLER_VERSION))")
        }
        handler.pointee = parley_message_search_handler(
            version: version, added: nil, updated: nil, deleted: nil, error: nil, user_data: nil, freshness_changed: nil)
    }
}

/// A results callback as a Swift closure (NULL: nothing is called).
private func resultsCallback(_ function: parley_search_results_fn?, _ userData: UnsafeMutableRawPointer?)
    -> @Sendable ([MessageSearchResult]) -> Void
{
    guard let function else { return { _ in } }
    let callback = CCallback(function: function, userData: userData)
    return { results in JSONText.arrayText(results.map(\.json)).withCString { callback.function(callback.userData, $0) } }
}

@_cdecl("parley_message_search_create")
public func exportMessageSearchCreate(
    _ outSearch: UnsafeMutablePointer<OpaquePointer?>?, _ client: OpaquePointer?, _ paramsJSON: UnsafePointer<CChar>?,
    _ handler: UnsafePointer<parley_message_search_handler>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outSearch else { throw .invalidArgument("out_search is NULL") }
        outSearch.pointee = nil
        let object = try clients.lookup(client)
        guard let value = try optionalJSON(paramsJSON, "params_json") else { throw .invalidArgument("params_json is NULL") }
        let params = try MessageSearchParams(json: value)
        var swiftHandler = MessageSearchHandler()
        if let handler {
            let copy = handler.pointee
            guard copy.version == PARLEY_MESSAGE_SEARCH_HANDLER_VERSION else {
                throw .invalidArgument("handler.version is \(copy.version); set it with PARLEY_MESSAGE_SEARCH_HANDLER_INIT")
            }
            swiftHandler.added = resultsCallback(copy.added, copy.user_data)
            swiftHandler.updated = resultsCallback(copy.updated, copy.user_data)
            swiftHandler.deleted = resultsCallback(copy.deleted, copy.user_data)
            if let error = copy.error {
                let fn = CCallback(function: error, userData: copy.user_data)
                swiftHandler.error = { failure in withCError(failure) { fn.function(fn.userData, $0) } }
            }
            if let changed = freshnessCallback(copy.freshness_changed, copy.user_data) { swiftHandler.freshnessChanged = changed }
        }
        outSearch.pointee = messageSearches.insert(try object.messageSearch(params: params, handler: swiftHandler))
    }
}

private func liveSearch(_ handle: OpaquePointer?) throws(ParleyError) -> MessageSearch {
    let object = try messageSearches.lookup(handle)
    guard !object.isDisposed else { throw .invalidState("the message search is disposed (its client was destroyed)") }
    return object
}

/// A load's completion as a Swift closure (NULL: nothing is called).
private func loadCompletion(_ function: parley_search_load_fn?, _ userData: UnsafeMutableRawPointer?) -> MessageSearchCompletion {
    guard let function else { return { _ in } }
    let callback = CCallback(function: function, userData: userData)
    return { result in
        switch result {
        case .success(let results):
            JSONText.arrayText(results.map(\.json)).withCString { callback.function(callback.userData, nil, $0) }
        case .failure(let error):
            withCError(error) { callback.function(callback.userData, $0, nil) }
        }
    }
}

@_cdecl("parley_message_search_load_more")
public func exportMessageSearchLoadMore(_ search: OpaquePointer?, _ function: parley_search_load_fn?, _ userData: UnsafeMutableRawPointer?)
    -> Int32
{
    withStatus { () throws(ParleyError) in
        try liveSearch(search).loadMore(completion: loadCompletion(function, userData))
    }
}

@_cdecl("parley_message_search_load_older")
public func exportMessageSearchLoadOlder(_ search: OpaquePointer?, _ function: parley_search_load_fn?, _ userData: UnsafeMutableRawPointer?)
    -> Int32
{
    withStatus { () throws(ParleyError) in
        try liveSearch(search).loadOlder(completion: loadCompletion(function, userData))
    }
}

@_cdecl("parley_message_search_relevance_window")
public func exportMessageSearchRelevanceWindow(
    _ search: OpaquePointer?, _ outRankedMatches: UnsafeMutablePointer<Int64>?, _ outOlderMatchesExist: UnsafeMutablePointer<Int32>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outRankedMatches else { throw .invalidArgument("out_ranked_matches is NULL") }
        guard let outOlderMatchesExist else { throw .invalidArgument("out_older_matches_exist is NULL") }
        let edge = try messageSearches.lookup(search).relevanceWindowEdge
        outRankedMatches.pointee = Int64(edge.rankedMatches)
        outOlderMatchesExist.pointee = edge.olderMatchesExist ? 1 : 0
    }
}

@_cdecl("parley_message_search_has_more")
public func exportMessageSearchHasMore(_ search: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let out else { throw .invalidArgument("out_has_more is NULL") }
        out.pointee = try messageSearches.lookup(search).hasMore ? 1 : 0
    }
}

@_cdecl("parley_message_search_freshness")
public func exportMessageSearchFreshness(_ search: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeFreshness(out) { () throws(ParleyError) in try messageSearches.lookup(search).freshness }
    }
}

@_cdecl("parley_message_search_last_page_origin")
public func exportMessageSearchLastPageOrigin(_ search: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try writeOrigin(out) { () throws(ParleyError) in try messageSearches.lookup(search).lastLoadOrigin }
    }
}

@_cdecl("parley_message_search_results")
public func exportMessageSearchResults(_ search: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outJSON else { throw .invalidArgument("out_json is NULL") }
        outJSON.pointee = nil
        outJSON.pointee = try ownedCString(try messageSearches.lookup(search).resultsJSON)
    }
}

@_cdecl("parley_message_search_dispose")
public func exportMessageSearchDispose(_ search: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in
        try messageSearches.remove(search).dispose()
    }
}
