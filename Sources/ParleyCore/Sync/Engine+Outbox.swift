import Dispatch
import Glibc

// The outbox (shared/SEMANTICS.md "Sending").
//
// Design note. A send is stored as a pending local message plus an outbox row in one
// transaction before any network I/O (durable across a crash), then the outbox is drained
// in order, one channel at a time. The server dedups by `req_id`, so a resend after a
// timeout or a crash never makes a second copy.
//
// States of a local message: pending → (on the wire) → succeeded (the server's copy replaces
// it by req_id) | failed. A failure is either retryable (the connection: network, timeout,
// 5xx, 429 — auto-resend retries on reconnect and start) or final (a refusal: only a manual
// resend or removal helps). A connection failure stops the channel's drain: its later
// messages fail with it (retryable) so the app sees their state, and go again in order.
// Every state change is a `localMessageStatusChanged` on the change feed; the completion of
// a send the app started runs once, from `completeSend`.

extension Engine {
    /// Stores a pending message with its outbox request and starts draining. Returns the
    /// stored local message.
    func acceptSend(
        _ outgoing: OutgoingMessage, progress: HTTPUploadProgress?,
        finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> CachedLocalMessage {
        assertOnQueue()
        guard let current = session.current, let writer = store.writer else {
            throw .invalidState("send: not connected (call connect first)")
        }
        var sender: [String: JSONValue] = [WireField.userID: .string(current.userID)]
        for key in [WireField.nickname, WireField.profileURL] { if let value = session.user?[key] { sender[key] = value } }
        var pending = outgoing.pending
        pending[WireField.user] = .object(sender)
        let message = JSONValue.object(pending)
        // The first attempt is counted here, in the transaction that stores the message, not
        // in one of its own just before the request goes out: one commit less per send. A
        // crash before that request counts an attempt that never went out (as a crash while
        // it travels counts one the server may never have seen).
        let request = OutboxRequest(kind: outgoing.kind, requestJSON: JSONValue.object(outgoing.request).canonicalText, attempts: 1)
        let stored = try writer.write(.send) { transaction throws(ParleyError) in
            try transaction.insertPending(message, outbox: request)
        }
        metrics.sends.add()
        outbox.attemptCounted.insert(stored.reqID)
        outbox.finishers[stored.reqID] = finish
        if let progress { outbox.uploadProgress[stored.reqID] = progress }
        drainOutbox()
        return stored
    }

    /// Resends a failed message (same `req_id`).
    func resend(
        reqID: String, progress: HTTPUploadProgress?, finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) {
        assertOnQueue()
        guard session.current != nil, let writer = store.writer else {
            throw .invalidState("resend: not connected (call connect first)")
        }
        guard let local = try writer.cache.localMessage(reqID: reqID) else {
            throw ParleyError(.notFound, "resend: no pending or failed message with req_id '\(reqID)'")
        }
        guard local.status == .failed else { throw .invalidState("resend: message '\(reqID)' is already pending") }
        try writer.write(.resend) { transaction throws(ParleyError) in try transaction.markPending(reqID: reqID) }
        metrics.sendsRetried.add()
        // Its attempts start again from 0: the next one is counted when it goes out.
        outbox.attemptCounted.remove(reqID)
        outbox.finishers[reqID] = finish
        if let progress { outbox.uploadProgress[reqID] = progress }
        drainOutbox()
    }

    /// Cancels a pending message not yet on the wire, or a file upload in progress, or
    /// removes a failed message.
    func cancel(reqID: String) throws(ParleyError) {
        assertOnQueue()
        guard let writer = store.writer else { throw .invalidState("cancel: no cache open (call connect first)") }
        guard let local = try writer.cache.localMessage(reqID: reqID) else {
            throw ParleyError(.notFound, "cancel: no pending or failed message with req_id '\(reqID)'")
        }
        if outbox.sendsInFlight.contains(reqID) {
            guard let task = outbox.uploadTasks[reqID] else {
                throw .invalidState("cancel: message '\(reqID)' is on its way to the server and cannot be canceled")
            }
            outbox.canceledUploads.insert(reqID)
            task.cancel()
            return
        }
        try cancelLocal(local, writer: writer)
    }

    private func cancelLocal(_ local: CachedLocalMessage, writer: CacheWriter) throws(ParleyError) {
        try writer.write(.cancel) { transaction throws(ParleyError) in try transaction.cancelLocal(local) }
        outbox.attemptCounted.remove(local.reqID)
        completeSend(reqID: local.reqID, .failure(.cancelled("the message was canceled")))
    }

    /// Removes the channel's failed messages; returns their req_ids.
    func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String] {
        assertOnQueue()
        guard let writer = store.writer else { throw .invalidState("no cache open (call connect first)") }
        return try writer.write(.cancel) { transaction throws(ParleyError) -> [String] in
            let failed = try transaction.cache.localMessages(channelURL: channelURL, status: .failed)
            for local in failed {
                try transaction.cancelLocal(local)
                outbox.attemptCounted.remove(local.reqID)
            }
            return failed.map(\.reqID)
        }
    }

    /// Runs the completion of a send the app started (once) and forgets its handlers.
    func completeSend(reqID: String, _ outcome: Result<JSONValue, ParleyError>) {
        if case .success = outcome {
            metrics.sendsSucceeded.add()
            outbox.recentlySent.insert(reqID)
            outbox.attemptCounted.remove(reqID)
        }
        outbox.uploadProgress[reqID] = nil
        outbox.finishers.removeValue(forKey: reqID)?(outcome)
    }

    // MARK: Draining

    /// Sends what the outbox holds, oldest first, one channel at a time; a connection
    /// failure stops that channel (its later messages fail with it and wait for the next
    /// reconnect), a refusal fails only the message refused.
    func drainOutbox() {
        assertOnQueue()
        if outbox.draining {
            outbox.drainRequestedAgain = true
            return
        }
        guard session.current != nil else { return }
        let pendingOnly = drainsPendingOnly
        let channels = read("reading the outbox") { cache throws(ParleyError) in
            try cache.outboxChannelURLs(retryableOnly: true, pendingOnly: pendingOnly)
        } ?? []
        guard !channels.isEmpty else { return }
        outbox.draining = true
        outbox.drainRequestedAgain = false
        drainChannels(channels, index: 0)
    }

    /// Without automatic resend a failed message goes out again only when the app resends it
    /// (which makes it pending): a drain started by another send must not pick it up.
    private var drainsPendingOnly: Bool { configuration.resendPolicy != .automatic }

    private func drainChannels(_ channels: [String], index: Int) {
        guard index < channels.count, session.current != nil else {
            outbox.draining = false
            if outbox.drainRequestedAgain { drainOutbox() }
            return
        }
        drainChannel(channels[index]) { self.drainChannels(channels, index: index + 1) }
    }

    private func drainChannel(_ channelURL: String, then next: @escaping @Sendable () -> Void) {
        let pendingOnly = drainsPendingOnly
        let entry = read("reading the outbox") { cache throws(ParleyError) in
            try cache.outboxEntries(channelURL: channelURL, retryableOnly: true, pendingOnly: pendingOnly, limit: 1).first
        } ?? nil
        guard let entry, session.current != nil else { return next() }
        sendEntry(entry) { connectionLost in
            if let connectionLost {
                self.failRemaining(channelURL: channelURL, error: connectionLost)
                next()
            } else {
                self.drainChannel(channelURL, then: next)
            }
        }
    }

    /// After a connection failure: the channel's other queued messages fail too, so that the
    /// app sees their state; with automatic resend the next reconnect resends them in order
    /// (with policy none they are dropped like the one that failed).
    private func failRemaining(channelURL: String, error: ParleyError) {
        var failed: [String] = []
        var trimmed: [String] = []
        write(.sendResult, "failing queued messages") { transaction throws(ParleyError) in
            let attempts = Dictionary(
                try transaction.cache.outboxEntries(channelURL: channelURL).map { ($0.reqID, $0.attempts) }, uniquingKeysWith: { a, _ in a })
            for local in try transaction.cache.localMessages(channelURL: channelURL, status: .pending)
            where !outbox.sendsInFlight.contains(local.reqID) {
                // An attempt counted ahead (`acceptSend`) that has not gone out is not one yet.
                let made = (attempts[local.reqID] ?? 0) - (outbox.attemptCounted.contains(local.reqID) ? 1 : 0)
                try recordFailure(transaction, reqID: local.reqID, error: error, connectionLost: true, attempts: made)
                failed.append(local.reqID)
            }
            trimmed = try trimFailed(transaction, channelURL: channelURL)
        }
        completeTrimmed(trimmed, after: error)
        for reqID in failed { completeSend(reqID: reqID, .failure(error)) }
    }

    /// Records a failed send as the resend policy says: dropped (none), or kept as failed,
    /// marked for automatic resend when the connection failed and resends are left.
    private func recordFailure(
        _ transaction: CacheTransaction, reqID: String, error: ParleyError, connectionLost: Bool, attempts: Int
    ) throws(ParleyError) {
        metrics.sendFailures.add()
        switch configuration.resendPolicy {
        case .none:
            try transaction.dropFailed(reqID: reqID, error: error)
            outbox.attemptCounted.remove(reqID)
        case .manual:
            try transaction.markFailed(reqID: reqID, error: error, retryable: connectionLost)
        case .automatic:
            // `attempts` counts the first send too: attempts - 1 resends were made.
            let resendsLeft = configuration.resendRetryLimit.map { attempts - 1 < $0 } ?? true
            try transaction.markFailed(reqID: reqID, error: error, retryable: connectionLost && resendsLeft)
            if connectionLost && resendsLeft && error.retryAfterMs > 0 { scheduleResend(afterMs: error.retryAfterMs) }
        }
    }

    /// The server refused for now and said when to try again (503 or 429 with `Retry-After`):
    /// its event stream may well stay up, so no reconnect would resend. The outbox drains
    /// again once the wait is over (one timer at a time).
    private func scheduleResend(afterMs delay: Int) {
        guard !outbox.resendScheduled else { return }
        outbox.resendScheduled = true
        queue.asyncAfter(deadline: .now() + .milliseconds(delay)) { [weak self] in
            guard let self else { return }
            self.outbox.resendScheduled = false
            self.drainOutbox()
        }
    }

    /// Keeps the channel's failed messages within the configured maximum; returns the
    /// req_ids removed (their completions are still owed: `completeTrimmed`).
    private func trimFailed(_ transaction: CacheTransaction, channelURL: String) throws(ParleyError) -> [String] {
        guard let limit = configuration.maxFailedMessagesPerChannel else { return [] }
        return try transaction.trimFailed(channelURL: channelURL, keeping: limit)
    }

    /// Sends removed over the per-channel maximum of failed messages end now (once).
    private func completeTrimmed(_ reqIDs: [String], after error: ParleyError) {
        for reqID in reqIDs {
            completeSend(reqID: reqID, .failure(ParleyError(
                error.code, "\(error.message) (removed: more failed messages in the channel than max_failed_messages_per_channel)",
                httpStatus: error.httpStatus, serverCode: error.serverCode)))
        }
    }

    /// Sends one outbox entry; `done(nil)` unless the connection failed (then `done(error)`).
    private func sendEntry(_ entry: OutboxEntry, done: @escaping @Sendable (ParleyError?) -> Void) {
        guard let current = session.current else { return done(nil) }
        let reqID = entry.reqID
        var request: HTTPRequest?
        do throws(ParleyError) {
            guard case .object(var body) = try JSONValue.parse(entry.requestJSON) else {
                throw ParleyError(.cache, "outbox entry \(reqID): request is not a JSON object")
            }
            let path = Endpoints.sendMessage(channelURL: entry.channelURL)
            let endpoint = services.endpoint
            if entry.kind == "file_upload" {
                guard let filePath = body.removeValue(forKey: "file_path")?.stringValue else {
                    throw ParleyError(.cache, "outbox entry \(reqID): upload without file_path")
                }
                request = endpoint.request(method: "POST", pathAndQuery: path, body: nil, credential: .session(current.token))
                var parts: [HTTPBodyPart] = .formFields(body)
                parts.append(.file(name: "file", path: filePath, fileName: body[WireField.fileName]?.stringValue,
                                   contentType: body[WireField.fileType]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }))
                request?.multipart = parts
                request?.uploadProgress = outbox.uploadProgress[reqID]
                // Uploads may take long: no whole-transfer limit, a stall limit instead.
                request?.timeoutMs = 0
                request?.lowSpeedTimeoutSec = max(30, configuration.requestTimeoutMs / 1000)
            } else {
                request = endpoint.request(method: "POST", pathAndQuery: path, body: .object(body), credential: .session(current.token))
            }
            // An automatic resend of a failed message shows it pending again (message_resend_started).
            let resending = try store.writer?.cache.localMessage(reqID: reqID)?.status == .failed
            if resending || !outbox.attemptCounted.contains(reqID) {
                try store.writer?.write(resending ? .resend : .sendResult) { transaction throws(ParleyError) in
                    if resending { try transaction.markPending(reqID: reqID, resetAttempts: false) }
                    if !outbox.attemptCounted.contains(reqID) { try transaction.recordOutboxAttempt(reqID: reqID) }
                }
            }
            if resending { metrics.sendsRetried.add() }
        } catch {
            let counted = outbox.attemptCounted.remove(reqID) != nil
            finishSend(reqID: reqID, channelURL: entry.channelURL, attempts: entry.attempts + (counted ? 0 : 1), .failure(error), done: done)
            return
        }
        let attempts = entry.attempts + (outbox.attemptCounted.remove(reqID) != nil ? 0 : 1)
        guard let request else {
            return finishSend(reqID: reqID, channelURL: entry.channelURL, attempts: attempts, .failure(.invalidState("no server_url")), done: done)
        }
        outbox.sendsInFlight.insert(reqID)
        log(.debug, "outbox: sending \(reqID) to \(entry.channelURL)")
        let task = services.http.send(request) { result in
            let outcome = result.flatMap(APIEndpoint.decodeAnswer)
            self.queue.async {
                self.outbox.sendsInFlight.remove(reqID)
                self.outbox.uploadTasks[reqID] = nil
                self.finishSend(reqID: reqID, channelURL: entry.channelURL, attempts: attempts, outcome, done: done)
            }
        }
        if entry.kind == "file_upload" { outbox.uploadTasks[reqID] = task }
    }

    /// `attempts`: how many times the request went out, this one included.
    private func finishSend(
        reqID: String, channelURL: String, attempts: Int, _ outcome: Result<JSONValue, ParleyError>,
        done: @escaping @Sendable (ParleyError?) -> Void
    ) {
        if outbox.confirmedByEcho.remove(reqID) != nil {
            // The stream's echo stored the server's copy first and completed the send
            // (`applyStreamEvent`): whatever the answer says, the message was delivered.
            outbox.canceledUploads.remove(reqID)
            return done(nil)
        }
        switch outcome {
        case .success(let message):
            write(.sendResult, "storing a sent message") { transaction throws(ParleyError) in
                try transaction.confirmSent(reqID: reqID, channelURL: channelURL, message: message)
            }
            completeSend(reqID: reqID, .success(Self.succeeded(message)))
            done(nil)
        case .failure(let error):
            if error.code != .cancelled, let message = acceptedCopy(reqID: reqID, channelURL: channelURL) {
                // The answer was lost, but the server's real-time echo already brought the
                // message (it replaced the pending one): it was delivered, so this is a success.
                log(.info, "outbox: \(reqID) failed on the way back (\(error.message)) but the server has it")
                write(.sendResult, "confirming a sent message") { transaction throws(ParleyError) in
                    try transaction.confirmSent(reqID: reqID, channelURL: channelURL, message: message)
                }
                completeSend(reqID: reqID, .success(Self.succeeded(message)))
                return done(nil)
            }
            if error.code == .cancelled && outbox.canceledUploads.remove(reqID) != nil {
                if let writer = store.writer, let local = try? writer.cache.localMessage(reqID: reqID) {
                    do { try cancelLocal(local, writer: writer) } catch { log(.warning, "cache: canceling an upload: \(error)") }
                }
                return done(nil)
            }
            if error.isSentThenDeleted {
                // An earlier attempt was stored (its answer lost) and the message deleted since:
                // delivered, then deleted. Nothing is left to show, and a resend would be
                // answered the same: the send ends with this answer, the local copy goes.
                write(.sendResult, "ending a send deleted since") { transaction throws(ParleyError) in
                    try transaction.dropFailed(reqID: reqID, error: error)
                }
                completeSend(reqID: reqID, .failure(error))
                return done(nil)
            }
            let connectionLost = error.isRetryable
            var trimmed: [String] = []
            write(.sendResult, "marking a send failed") { transaction throws(ParleyError) in
                try recordFailure(transaction, reqID: reqID, error: error, connectionLost: connectionLost, attempts: attempts)
                trimmed = try trimFailed(transaction, channelURL: channelURL)
            }
            completeTrimmed(trimmed, after: error)
            completeSend(reqID: reqID, .failure(error))
            done(connectionLost ? error : nil)
        }
    }

    /// The server's copy as a completion hands it: `sending_status` "succeeded".
    static func succeeded(_ message: JSONValue) -> JSONValue {
        guard case .object(var fields) = message else { return message }
        fields["sending_status"] = .string(LocalMessageStatus.succeeded.rawValue)
        return .object(fields)
    }

    /// The server's copy of a send whose local message is gone (replaced by the echo).
    private func acceptedCopy(reqID: String, channelURL: String) -> JSONValue? {
        read("looking up a sent message") { cache throws(ParleyError) -> JSONValue? in
            guard try cache.localMessage(reqID: reqID) == nil,
                let stored = try cache.message(channelURL: channelURL, reqID: reqID)
            else { return nil }
            return try JSONValue.parse(stored.json)
        } ?? nil
    }

    static func nowMs() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
