import Testing
@testable import ParleyCore

/// The catalog is the one description of the operations' parameters (the C reference and the
/// Python binding are generated from it), so every parameter it names must have a wire type.
@Suite struct OperationCatalogTests {
    private static let allowedTypes: Set<String> = ["string", "integer", "boolean", "string[]", "object",
                                                    "object<integer>", "object[]", "integer[]", "any"]

    @Test func everyParameterHasAType() {
        for spec in OperationCatalog.all {
            let named = spec.pathParameters + spec.required + spec.optional + spec.defaults.keys.sorted()
            for name in named {
                #expect(OperationCatalog.parameterTypes[name] != nil, "\(spec.name): \(name) has no type")
            }
            let listed = Set(spec.parameters.map(\.name))
            #expect(listed == Set(named), "\(spec.name): parameters \(listed.sorted()) vs \(Set(named).sorted())")
            #expect(listed.count == spec.parameters.count, "\(spec.name): a parameter is listed twice")
        }
    }

    @Test func everyTypeIsAWireType() {
        for type in ParameterType.allCases {
            #expect(Self.allowedTypes.contains(type.rawValue), "\(type.rawValue) is not a documented type")
        }
        for (name, type) in OperationCatalog.parameterTypes {
            #expect(Self.allowedTypes.contains(type.rawValue), "\(name): \(type.rawValue)")
        }
    }

    @Test func everyOperationHasASummary() {
        for spec in OperationCatalog.all {
            #expect(!spec.summary.isEmpty && !spec.summary.contains("\n"), "\(spec.name): summary")
        }
    }

    @Test func parametersAreRequiredOrOptionalWithDefaults() throws {
        let list = try #require(OperationCatalog.spec(named: "list_messages"))
        let include = try #require(list.parameters.first { $0.name == "include" })
        #expect(include == OperationParameter(name: "include", type: .boolean, required: false, default: false))
        #expect(list.parameters.first?.name == "channel_url" && list.parameters.first?.required == true)
        let user = try #require(OperationCatalog.spec(named: "get_current_user"))
        // `{user_id}` is the connected user unless given: optional.
        let userID = OperationParameter(name: "user_id", type: .string, required: false, default: nil)
        #expect(user.parameters.first == userID)
        let ban = try #require(OperationCatalog.spec(named: "ban_user"))
        #expect(ban.parameters.map(\.name) == ["channel_url", "user_id", "seconds", "description", "agent_id"])
        #expect(ban.parameters.map(\.required) == [true, true, false, false, false])
    }

    /// The guides' parameters Parley does not take as given are refused by name in every
    /// operation and every send; the send-only ones in every operation but the sends (and
    /// translate_message), not passed to a server that would ignore them.
    @Test func unsupportedFeaturesAreRefusedByName() throws {
        let update = try #require(OperationCatalog.spec(named: "update_message"))
        let params: JSONValue = .object(["channel_url": "c", "message_id": .int(1), "message": "x",
                                         "target_languages": .array(["de"])])
        do {
            _ = try update.prepare(params: params, currentUserID: "u")
            Issue.record("target_languages was not refused by update_message")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("target_languages: message translation parameters apply to sends only"))
        }
        let translate = try #require(OperationCatalog.spec(named: "translate_message"))
        let call = try translate.prepare(params: .object(["channel_url": "c", "message_id": .int(1), "target_languages": .array(["de"])]),
                                         currentUserID: "u")
        #expect(call.pathAndQuery == "/v3/group_channels/c/messages/1/translation")
        let plain: JSONValue = .object(["channel_url": "c", "message_id": .int(1), "message": "x"])
        #expect(throws: Never.self) { try update.prepare(params: plain, currentUserID: "u") }
        for key in UnsupportedFeatures.parameters.keys {
            #expect(throws: ParleyError.self) {
                try OutgoingMessage.user(channelURL: "c", params: .object(["message": "hi", key: "x"]))
            }
            #expect(throws: ParleyError.self) {
                try OutgoingMessage.file(channelURL: "c", params: .object(["url": "https://x/y", key: "x"]))
            }
            #expect(throws: ParleyError.self) { try update.prepare(params: .object(["channel_url": "c", "message_id": .int(1), key: "x"]), currentUserID: "u") }
        }
        let sent = try OutgoingMessage.user(channelURL: "c", params: .object([
            "message": "hi", "target_languages": .array(["fr"]), "push_notification_delivery_option": "suppress",
            "apple_critical_alert_options": .object(["name": "alarm", "volume": .double(0.5)]),
        ]))
        #expect(sent.request["target_languages"] == .array(["fr"]))
        #expect(throws: ParleyError.self) {
            try OutgoingMessage.user(channelURL: "c", params: .object(["message": "hi", "push_notification_delivery_option": "never"]))
        }
    }

    /// A local cover file turns the call into a multipart upload: the path is not sent, the
    /// other parameters go as form fields (lists as JSON), the file as `cover_file`.
    @Test func coverFilePathMakesAMultipartUpload() throws {
        let create = try #require(OperationCatalog.spec(named: "create_group_channel"))
        let call = try create.prepare(params: .object(["name": "N", "is_public": true, "user_ids": .array(["a", "b"]),
                                                       "cover_file_path": "/tmp/cover.png"]), currentUserID: "u")
        #expect(call.upload == PreparedCall.FileUpload(part: "cover_file", path: "/tmp/cover.png"))
        #expect(call.body == .object(["name": "N", "is_public": true, "user_ids": .array(["a", "b"])]))
        #expect(call.multipartBody == [.field(name: "is_public", value: "true"), .field(name: "name", value: "N"),
                                       .field(name: "user_ids", value: #"["a","b"]"#),
                                       .file(name: "cover_file", path: "/tmp/cover.png", fileName: nil, contentType: nil)])
        let plain = try create.prepare(params: .object(["name": "N"]), currentUserID: "u")
        #expect(plain.upload == nil && plain.multipartBody == nil)
        let update = try #require(OperationCatalog.spec(named: "update_group_channel"))
        for bad: JSONValue in ["", .int(3), "a\u{0}b"] {
            #expect(throws: ParleyError.self) {
                try update.prepare(params: .object(["channel_url": "c", "cover_file_path": bad]), currentUserID: "u")
            }
        }
        #expect(try update.prepare(params: .object(["channel_url": "c", "cover_file_path": .null]), currentUserID: "u").upload == nil)
    }
}
