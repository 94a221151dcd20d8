import Glibc

// Sending through the outbox (shared/SEMANTICS.md "Sending"): a send is stored as a pending
// local message plus an outbox row in one transaction before any network I/O, then the
// outbox is drained in order, one channel at a time. The server dedups by `req_id`, so a
// resend after a timeout or a crash never makes a second copy.
//
// The client registers the send as an operation in flight and hops to the engine; checking
// the parameters and building the pending message (Sync/OutgoingMessage.swift) and the
// outbox itself (storing, draining, resending, canceling: Sync/Engine+Outbox.swift) are the
// Sync layer's.
// Local events (through the event handler): `message_pending` (stored), `message_sent`
// (accepted; payload = the server's message), `message_failed` (payload = the failed local
// message, with `error_code` / `error_message`), `message_canceled`, `message_resend_started`.

/// A send the engine accepted: its operation id (for the completion) and the pending
/// message (`message_id` 0, `sending_status` "pending", its `req_id`), as JSON text.
public struct AcceptedSend: Sendable {
    public let operationID: UInt64
    public let pendingMessage: String
    public let reqID: String
}

extension ParleyClient: MessageViewSender {
    /// Sends a user message (`MESG`). Returns at once with the pending message, already
    /// stored; the completion runs once with the server's message or the failure.
    public func sendUserMessage(
        channelURL: String, params: JSONValue,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        try acceptSend(try OutgoingMessage.user(channelURL: channelURL, params: params), progress: nil, completion: completion)
    }

    /// Sends a file message (`FILE`): `url` (with optional `file_name`, `file_size`,
    /// `file_type`) for a file hosted elsewhere, or `file_path` for a local file that is
    /// uploaded with the message (`progress` reports bytes sent / total; `cancelMessage`
    /// stops it). Returns at once with the pending message.
    public func sendFileMessage(
        channelURL: String, params: JSONValue, progress: HTTPUploadProgress? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        try acceptSend(try OutgoingMessage.file(channelURL: channelURL, params: params), progress: progress, completion: completion)
    }

    /// The most files one `sendFileMessages` call takes (the reference's limit).
    public static let maxFilesPerSend = 20

    /// Sends up to 20 file messages in one call, each its own message: the parameters of each
    /// are `sendFileMessage`'s. Every file is checked before any is stored, so a bad one
    /// stores none; then each becomes a pending message in the given order, and the outbox
    /// delivers them in that order (a send made meanwhile on another thread may come between
    /// them). `progress` names the file by its `req_id`; `completion` runs once per file with
    /// its index, its `req_id` and its outcome. A failed file stays failed on its own, to be
    /// resent (`resendMessage`) or removed like any other. Should storing one fail, the files
    /// stored before it are cancelled (their completions run with `.cancelled`) and the call
    /// throws.
    public func sendFileMessages(
        channelURL: String, params: [JSONValue], progress: (@Sendable (_ reqID: String, _ sent: Int64, _ total: Int64) -> Void)? = nil,
        completion: @escaping @Sendable (_ index: Int, _ reqID: String, Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> [AcceptedSend] {
        guard (1...Self.maxFilesPerSend).contains(params.count) else {
            throw .invalidArgument("files: give 1 to \(Self.maxFilesPerSend) files, got \(params.count)")
        }
        var outgoing: [OutgoingMessage] = []
        for (index, item) in params.enumerated() {
            do {
                outgoing.append(try OutgoingMessage.file(channelURL: channelURL, params: item))
            } catch {
                throw ParleyError(error.code, "files[\(index)]: \(error.message)")
            }
        }
        var seen = Set<String>()
        for (index, message) in outgoing.enumerated() where !seen.insert(message.reqID).inserted {
            throw .invalidArgument("files[\(index)].req_id: '\(message.reqID)' is given twice")
        }
        var accepted: [AcceptedSend] = []
        for (index, message) in outgoing.enumerated() {
            let reqID = message.reqID
            var fileProgress: HTTPUploadProgress?
            if let progress {
                fileProgress = { @Sendable sent, total in progress(reqID, sent, total) }
            }
            do {
                accepted.append(try acceptSend(message, progress: fileProgress) { completion(index, reqID, $0) })
            } catch {
                for earlier in accepted { try? cancelMessage(reqID: earlier.reqID) }
                throw ParleyError(error.code, "files[\(index)]: \(error.message)")
            }
        }
        return accepted
    }

    /// Progress reports reach the app on the callback context, like every other callback.
    private func onCallbackContext(_ progress: @escaping HTTPUploadProgress) -> HTTPUploadProgress {
        let dispatcher = self.dispatcher
        return { sent, total in dispatcher.enqueue { progress(sent, total) } }
    }

    private func acceptSend(
        _ outgoing: OutgoingMessage, progress: HTTPUploadProgress?,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        let engine = self.engine
        var accepted: (UInt64, String)?
        _ = try startOperation(completion) { (id, finish) throws(ParleyError) in
            let progress = progress.map(self.onCallbackContext)
            let stored = try engine.sync { () throws(ParleyError) -> CachedLocalMessage in
                try engine.acceptSend(outgoing, progress: progress, finish: finish)
            }
            accepted = (id, stored.json)
        }
        guard let accepted else { throw ParleyError(.internalError, "send: not accepted") }
        return AcceptedSend(operationID: accepted.0, pendingMessage: accepted.1, reqID: outgoing.reqID)
    }

    /// Resends a failed message (same `req_id`). The completion runs once with the outcome.
    public func resendMessage(
        reqID: String, progress: HTTPUploadProgress? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        let engine = self.engine
        return try startOperation(completion) { (_, finish) throws(ParleyError) in
            let progress = progress.map(self.onCallbackContext)
            try engine.sync { () throws(ParleyError) in try engine.resend(reqID: reqID, progress: progress, finish: finish) }
        }
    }

    /// Cancels a pending message not yet on the wire, or a file upload in progress: it is
    /// removed (event `message_canceled`) and its completion runs with `.cancelled`. A
    /// failed message is removed the same way. A user message already being sent cannot be
    /// canceled (`.invalidState`): the server may have it already.
    public func cancelMessage(reqID: String) throws(ParleyError) {
        let engine = self.engine
        try engine.sync { () throws(ParleyError) in try engine.cancel(reqID: reqID) }
    }

    /// Removes the channel's failed messages (event `message_canceled` each); returns their req_ids.
    @discardableResult
    public func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String] {
        let engine = self.engine
        return try engine.sync { () throws(ParleyError) -> [String] in try engine.removeFailedMessages(channelURL: channelURL) }
    }

    /// A fresh random request id (32 hex digits).
    public static func newRequestID() -> String { OutgoingMessage.newRequestID() }

    static func nowMs() -> Int64 { Engine.nowMs() }
}
