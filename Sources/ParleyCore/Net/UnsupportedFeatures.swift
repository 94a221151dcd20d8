// Parameters the commercial guides name that Parley does not take as given. Code ported from
// those guides may pass them: it is told why, by name, instead of "unknown key" or, where
// parameters pass through to the server, having them silently ignored (docs/C-API.md,
// "Push notifications and translation").

enum UnsupportedFeatures {
    /// Parameter → why it is refused, in every send and every catalog operation.
    static let parameters: [String: String] = [
        "translation_target_languages": "not this spelling: give the languages as target_languages",
        "push_option": "the older SDK's push option is not supported: give push_notification_delivery_option " +
            "(default or suppress)",
    ]

    /// Parameters only sends take (and `target_languages`, translate_message): any other
    /// operation refuses them rather than have the server ignore them.
    static let sendParameters: [String: String] = [
        WireField.targetLanguages: "message translation",
        WireField.pushNotificationDeliveryOption: "push notifications",
        WireField.appleCriticalAlertOptions: "push notifications",
    ]

    /// Throws `invalidArgument` naming the first such parameter in `fields` (in key order);
    /// `accepted`: the send parameters the caller takes.
    static func reject(_ fields: [String: JSONValue], in subject: String, accepted: Set<String> = []) throws(ParleyError) {
        for key in fields.keys.sorted() {
            if let why = parameters[key] { throw .invalidArgument("\(subject).\(key): \(why)") }
            if let feature = sendParameters[key], !accepted.contains(key) {
                throw .invalidArgument("\(subject).\(key): \(feature) parameters apply to sends only " +
                    "(send_user_message, send_file_message\(key == WireField.targetLanguages ? ", translate_message" : ""))")
            }
        }
    }

    /// `push_notification_delivery_option` (`default` or `suppress`) and
    /// `apple_critical_alert_options` (`{"name", "volume"}`, volume 0 to 1), where given.
    static func checkPushParameters(_ reader: JSONReader) throws(ParleyError) {
        if let option = try reader.optionalString(WireField.pushNotificationDeliveryOption), option != "default", option != "suppress" {
            throw reader.error(WireField.pushNotificationDeliveryOption, "expected default or suppress, got '\(option)'")
        }
        if let alert = try reader.optionalObject(WireField.appleCriticalAlertOptions) {
            try alert.rejectUnknownKeys(allowed: ["name", "volume"])
            if let name = try alert.optionalString("name"), name.isEmpty { throw alert.error("name", "must not be empty") }
            _ = try alert.optionalDouble("volume", in: 0...1)
        }
    }

    /// `target_languages`: a list of language tags such as `fr` (at most 10).
    static func checkTargetLanguages(_ reader: JSONReader) throws(ParleyError) {
        guard let languages = try reader.optionalStrings(WireField.targetLanguages) else { return }
        if languages.count > 10 { throw reader.error(WireField.targetLanguages, "at most 10 languages, got \(languages.count)") }
        if languages.contains(where: \.isEmpty) { throw reader.error(WireField.targetLanguages, "a language tag is empty") }
    }
}
