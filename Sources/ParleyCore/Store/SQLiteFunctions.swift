import CSQLite

/// SQL functions every connection of the cache has (the writer's and the reader's), so that
/// queries and migrations can order text as the collections do and searches rank as
/// `SearchRank` says.
enum SQLiteFunctions {
    /// Registers them on a connection just opened; on failure the connection is closed and
    /// the error thrown (a connection without them could not read the cache's orders).
    static func register(on handle: OpaquePointer, path: String) throws(ParleyError) {
        var code = registerTextOrderKey(on: handle)
        if code == SQLITE_OK { code = SearchRank.register(on: handle) }
        if code == SQLITE_OK { code = registerNameOrderKey(on: handle) }
        guard code == SQLITE_OK else {
            let error = SQLiteErrorText.error("register SQL functions on \(path)", handle: handle, code: code)
            sqlite3_close_v2(handle)
            throw error
        }
    }

    private static let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS

    /// `parley_text_order_key(text)`: `textOrderKey` of a text (metadata values); other values
    /// pass through unchanged (NULL stays NULL). Deterministic and innocuous, so usable anywhere.
    private static func registerTextOrderKey(on handle: OpaquePointer) -> Int32 {
        sqlite3_create_function_v2(handle, "parley_text_order_key", 1, flags, nil, { context, count, arguments in
            SQLiteFunctions.resultKey(context, count, arguments, textOrderKey)
        }, nil, nil, nil)
    }

    /// `parley_name_order_key(text)`: `nameOrderKey` of a text (channel names, `name_key`), as
    /// `parley_text_order_key` otherwise.
    private static func registerNameOrderKey(on handle: OpaquePointer) -> Int32 {
        sqlite3_create_function_v2(handle, "parley_name_order_key", 1, flags, nil, { context, count, arguments in
            SQLiteFunctions.resultKey(context, count, arguments, nameOrderKey)
        }, nil, nil, nil)
    }

    /// Sets the function's result: `key` of a text argument, any other value unchanged.
    private static func resultKey(
        _ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?,
        _ key: (String) -> String
    ) {
        guard count == 1, let argument = arguments?[0] else { return }
        guard sqlite3_value_type(argument) == SQLITE_TEXT, let text = sqlite3_value_text(argument) else {
            sqlite3_result_value(context, argument)
            return
        }
        let length = Int(sqlite3_value_bytes(argument))
        let original = String(decoding: UnsafeBufferPointer(start: text, count: length), as: UTF8.self)
        key(original).utf8CString.withUnsafeBufferPointer { bytes in
            // utf8CString ends with a NUL that is not part of the text.
            sqlite3_result_text(context, bytes.baseAddress, Int32(bytes.count - 1), parley_sqlite_transient())
        }
    }
}
