/// The application's settings and the webhook endpoints as stored (`application_settings`),
/// over the server's defaults, and the log of webhook deliveries (`ApplicationRecords`,
/// `WebhookRecords`).
final class SettingsStore {
    private let tx: RequestTransaction
    private var shared: SharedState { tx.shared }
    private var db: any SQLSession { get throws { try tx.db } }

    init(_ tx: RequestTransaction) { self.tx = tx }

    func applicationSettings() async throws -> ApplicationSettings {
        var stored: [String: String] = [:]
        for row in try await db.query("SELECT name, value FROM application_settings", []) { stored[row.text(0)] = row.text(1) }
        return shared.applicationDefaults.overridden(by: stored)
    }

    func storeApplicationSettings(_ values: [String: String?]) async throws {
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            if let value {
                try await db.execute(RecordTables.upsertSQL("application_settings", ["name", "value"], key: ["name"]),
                                     [.text(name), .text(value)])
            } else {
                try await db.execute("DELETE FROM application_settings WHERE name = ?", [.text(name)])
            }
        }
    }

    // MARK: webhooks (OutgoingCalls/Webhooks.swift)

    var hookDefaults: HookDefaults { shared.webhooks.defaults }

    /// The endpoints the admin API stored, as stored (nil: none).
    func storedWebhookSettings() async throws -> String? {
        try await db.queryOne("SELECT value FROM application_settings WHERE name = ?", [.text(WebhookSettings.storedName)])?.text(0)
    }

    func webhookSettings() async throws -> WebhookSettings {
        shared.webhooks.resolved(stored: try await storedWebhookSettings())
    }

    func storeWebhookSettings(_ settings: WebhookSettings?) async throws {
        let text = settings.map { JSON.obj([("endpoints", .array($0.endpoints.map(\.json)))]).serialized() }
        try await storeApplicationSettings([WebhookSettings.storedName: text])
        // In force on this server from its next request; the others read it within a second.
        shared.webhooks.update(settings ?? shared.webhooks.defaults.settings)
    }

    func hookDeliveries(status: String?, before: Int64?, limit: Int) async throws -> [HookDeliveryRecord] {
        try await HookQueue.log(status: status, before: before, limit: limit, db)
    }
}
