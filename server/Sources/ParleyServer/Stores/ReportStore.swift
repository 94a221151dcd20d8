/// The reports of messages, channels and users (`ReportRecords`), with their queries.
final class ReportStore: ReportRecords {
    private let tx: RequestTransaction
    private var db: any SQLSession { get throws { try tx.db } }

    init(_ tx: RequestTransaction) { self.tx = tx }

    func allocateReportId() async throws -> Int64 {
        try await tx.takeId(.report)
    }

    func save(_ r: ReportRecord) async throws {
        try await RecordTables.putReport(r, db)
    }

    func reports(after: Int64, limit: Int) async throws -> [ReportRecord] {
        try await db.query("SELECT \(RecordTables.reportColumns.joined(separator: ", ")) FROM reports "
                           + "WHERE id > ? ORDER BY id LIMIT \(limit)", [.int(after)]).map(RecordTables.report)
    }

    func hasReports() async throws -> Bool {
        try await db.queryOne("SELECT 1 FROM reports LIMIT 1") != nil
    }
}
