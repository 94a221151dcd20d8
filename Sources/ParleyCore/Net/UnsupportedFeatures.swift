// Parameters the commercial guides name for services the reference server does not have
// (message translation, push notifications). Code ported from those guides may pass them:
// it is told the feature is not supported, by name, instead of "unknown key" or, where
// parameters pass through to the server, having them silently ignored (docs/C-API.md,
// "Not supported").

enum UnsupportedFeatures {
    /// Parameter → the feature it asks for.
    static let parameters: [String: String] = [
        "target_languages": "message translation",
        "translation_target_languages": "message translation",
        "push_notification_delivery_option": "push notifications",
        "push_option": "push notifications",
    ]

    /// Throws `invalidArgument` naming the first such parameter in `fields` (in key order).
    static func reject(_ fields: [String: JSONValue], in subject: String) throws(ParleyError) {
        for key in fields.keys.sorted() {
            guard let feature = parameters[key] else { continue }
            throw .invalidArgument(
                "\(subject).\(key): \(feature) is not supported (the reference server has no \(feature) service)")
        }
    }
}
