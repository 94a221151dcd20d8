// Size limit and eviction.
//
// Size measure: the pages in use, (page_count - freelist_count) * page_size. Pages freed by
// deletes go to the free list and count no more, so the measure falls as soon as rows are
// removed (the file itself shrinks only on `clear()`, which vacuums); the WAL is not
// counted (it is checkpointed back into those pages). Payload byte sums were the other
// option, but they ignore indexes and page overhead, which is what the disk holds.

extension ChatCache {
    /// Bytes of database pages in use (see the file comment).
    public func usedBytes() throws(ParleyError) -> Int64 {
        let pageCount = try scalarInt("PRAGMA page_count")
        let freePages = try scalarInt("PRAGMA freelist_count")
        let pageSize = try scalarInt("PRAGMA page_size")
        return (pageCount - freePages) * pageSize
    }

    /// When the used size exceeds `sizeLimitBytes`, removes whole channels' succeeded
    /// messages with their chunks and message changelog tokens, least recently accessed
    /// channel first (`touchChannel`; never-touched channels first of all, then by URL),
    /// until the size is at most 90% of the limit or nothing evictable is left. Pending and
    /// failed messages, the outbox and channel rows are never evicted; nor are the
    /// channels in `protecting` (those open in a view). One transaction.
    @discardableResult
    public func evictIfNeeded(protecting: Set<String> = []) throws(ParleyError) -> EvictionReport {
        let before = try usedBytes()
        var report = EvictionReport(evictedChannelURLs: [], removedMessageCount: 0, usedBytesBefore: before, usedBytesAfter: before)
        guard before > sizeLimitBytes else { return report }
        let target = sizeLimitBytes / 100 * Self.evictionTargetPercent
        return try transaction { () throws(ParleyError) in
            var candidates: [String] = []
            try database.statement("""
                SELECT held.channel_url FROM (SELECT DISTINCT channel_url FROM messages) AS held
                LEFT JOIN channel_access AS access ON access.channel_url = held.channel_url
                ORDER BY coalesce(access.accessed_at, -9223372036854775808), held.channel_url
                """).rows { row in candidates.append(row.string(0) ?? "") }
            var used = before
            for url in candidates where !protecting.contains(url) {
                guard used > target else { break }
                report.removedMessageCount += try removeChannelMessages(url: url)
                report.evictedChannelURLs.append(url)
                used = try usedBytes()
            }
            report.usedBytesAfter = used
            return report
        }
    }
}
