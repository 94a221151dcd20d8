import CParleyABI
import Glibc
import ParleyCore

// include/parley/query.h: stateful list queries.

let queries = HandleTable<Query>(kind: "query")

@_cdecl("parley_query_create")
public func exportQueryCreate(
    _ outQuery: UnsafeMutablePointer<OpaquePointer?>?, _ client: OpaquePointer?, _ kind: Int32, _ optionsJSON: UnsafePointer<CChar>?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let outQuery else { throw .invalidArgument("out_query is NULL") }
        outQuery.pointee = nil
        let object = try clients.lookup(client)
        guard let queryKind = QueryKind(rawValue: kind) else {
            throw .invalidArgument("kind \(kind) is not a PARLEY_QUERY_* constant (1 to \(QueryKind.allCases.count))")
        }
        var options: JSONValue = .object([:])
        if let optionsJSON, optionsJSON.pointee != 0, let value = try optionalJSON(optionsJSON, "options_json") {
            options = value
        }
        let query = try Query(client: object, kind: queryKind, options: options)
        outQuery.pointee = queries.insert(query)
    }
}

@_cdecl("parley_query_load_next_page")
public func exportQueryLoadNextPage(
    _ query: OpaquePointer?, _ outOperationID: UnsafeMutablePointer<UInt64>?, _ function: parley_result_fn?,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    withStatus { () throws(ParleyError) in
        outOperationID?.pointee = 0
        let object = try queries.lookup(query)
        guard let function else { throw .invalidArgument("fn is NULL") }
        let callback = CCallback(function: function, userData: userData)
        let operationID = try object.loadNextPage { result in deliver(result.map(JSONValue.array), to: callback) }
        outOperationID?.pointee = operationID
    }
}

/// A yes/no state of a query into `*out` (1 or 0; 0 on failure).
private func queryFlag(_ query: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?, _ name: String,
                       _ read: (Query) -> Bool) -> Int32 {
    withStatus { () throws(ParleyError) in
        guard let out else { throw .invalidArgument("\(name) is NULL") }
        out.pointee = 0
        out.pointee = read(try queries.lookup(query)) ? 1 : 0
    }
}

@_cdecl("parley_query_has_next")
public func exportQueryHasNext(_ query: OpaquePointer?, _ outHasNext: UnsafeMutablePointer<Int32>?) -> Int32 {
    queryFlag(query, outHasNext, "out_has_next") { $0.hasNext }
}

@_cdecl("parley_query_is_loading")
public func exportQueryIsLoading(_ query: OpaquePointer?, _ outIsLoading: UnsafeMutablePointer<Int32>?) -> Int32 {
    queryFlag(query, outIsLoading, "out_is_loading") { $0.isLoading }
}

@_cdecl("parley_query_dispose")
public func exportQueryDispose(_ query: OpaquePointer?) -> Int32 {
    withStatus { () throws(ParleyError) in try queries.remove(query).dispose() }
}
