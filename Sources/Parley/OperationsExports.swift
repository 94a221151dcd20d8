import CParleyABI
import Glibc
import ParleyCore

// include/parley/operations.h: operations by name, the catalog, event categories.

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
             "required": .array(spec.required.map { .string($0) }), "defaults": .object(spec.defaults),
             "fixed": .object(spec.fixed), "value_names": .object(spec.valueNames.mapValues { .object($0) }),
             "summary": .string(spec.summary), "parameters": .array(spec.parameters.map(parameterJSON))]
        })
        outJSON.pointee = try ownedCString(catalog.canonicalText)
    }
}

/// One entry of an operation's `parameters`: `default` only when the library has one.
private func parameterJSON(_ parameter: OperationParameter) -> JSONValue {
    var fields: [String: JSONValue] = ["name": .string(parameter.name), "type": .string(parameter.type.rawValue),
                                       "required": .bool(parameter.required)]
    if let value = parameter.default { fields["default"] = value }
    return .object(fields)
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
