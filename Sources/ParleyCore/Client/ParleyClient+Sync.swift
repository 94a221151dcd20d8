import Glibc

// Catching the cache up after (re)connecting: channel changelogs with the global token,
// message changelogs with each cached channel's token (a few channels in flight at once),
// then the outbox. Every step runs on the engine queue; the network calls go out with the
// session key.

extension ParleyClient {
    /// A REST call the engine makes on its own behalf (no operation id); the outcome is
    /// handed to `done` on the engine queue.
    func engineCall(
        _ method: String, _ pathAndQuery: String, body: JSONValue? = nil,
        _ done: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) {
        let engine = self.engine
        guard let session = engine.session,
            let request = makeRequest(method: method, pathAndQuery: pathAndQuery, body: body, credential: .session(session.token))
        else {
            done(.failure(.invalidState("not connected")))
            return
        }
        log(.debug, "sync: \(method) \(pathAndQuery)")
        _ = http.send(request) { result in
            let outcome = result.flatMap(Self.decodeAnswer)
            engine.queue.async { done(outcome) }
        }
    }

    /// Runs the changelogs, then the outbox (auto-resend), then `done`. A catch-up asked
    /// for while one runs is folded into a second pass after it.
    func catchUp(then done: (@Sendable () -> Void)?) {
        let engine = self.engine
        engine.assertOnQueue()
        if let done { engine.syncWaiters.append(done) }
        if engine.syncInProgress {
            engine.syncRequestedAgain = true
            return
        }
        guard engine.session != nil else {
            finishCatchUp()
            return
        }
        engine.syncInProgress = true
        engine.syncRequestedAgain = false
        let epoch = engine.sessionEpoch
        syncChannelChangelogs(epoch: epoch, resetOnce: true) {
            self.syncMessageChangelogs(epoch: epoch, urls: self.channelsWithMessages()) {
                engine.syncInProgress = false
                if engine.syncRequestedAgain && engine.sessionEpoch == epoch {
                    self.catchUp(then: nil)
                    return
                }
                engine.withCache("keeping the size limit", log: self.engineLog) { cache throws(ParleyError) in
                    try engine.evictIfNeeded(cache, log: self.engineLog)
                }
                if self.configuration.autoResend { self.drainOutbox() }
                self.finishCatchUp()
            }
        }
    }

    private func finishCatchUp() {
        let waiters = engine.syncWaiters
        engine.syncWaiters = []
        for waiter in waiters { waiter() }
    }

    private func channelsWithMessages() -> [String] {
        var urls: [String] = []
        engine.withCache("listing channels", log: engineLog) { cache throws(ParleyError) in
            var after: ChannelOrderKey?
            while true {
                let page = try cache.channels(order: .chronological, after: after, limit: 200)
                for channel in page where try cache.messageCount(channelURL: channel.channelURL) > 0 {
                    urls.append(channel.channelURL)
                }
                guard let last = page.last, page.count == 200 else { break }
                after = last.orderKey
            }
        }
        return urls
    }

    /// Pages through channel changelogs from the saved token (first time: from the start).
    private func syncChannelChangelogs(epoch: UInt64, resetOnce: Bool, then next: @escaping @Sendable () -> Void) {
        let engine = self.engine
        guard engine.sessionEpoch == epoch, let session = engine.session else { return next() }
        var token: String?
        engine.withCache("reading the channel token", log: engineLog) { cache throws(ParleyError) in
            token = try cache.syncToken(scope: ChatCache.channelsTokenScope)
        }
        let hadToken = token != nil
        let position = token.map { "token=" + URLEncoding.percentEncode($0) } ?? "change_ts=0"
        let path = "/v3/users/\(URLEncoding.encodePathSegment(session.userID))/my_group_channels/changelogs?\(position)&limit=100&show_member=true"
        engineCall("GET", path) { result in
            guard engine.sessionEpoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                engine.withCache("applying channel changelogs", log: self.engineLog) { cache throws(ParleyError) in
                    try cache.transaction { () throws(ParleyError) in
                        for channel in answer["updated"]?.arrayValue ?? [] {
                            try engine.storeChannelMerged(channel, in: cache)
                        }
                        for url in answer["deleted"]?.arrayValue ?? [] {
                            if let url = url.stringValue { try cache.deleteChannel(url: url) }
                        }
                        if let next = answer["next"]?.stringValue, !next.isEmpty {
                            try cache.setSyncToken(next, scope: ChatCache.channelsTokenScope)
                        }
                    }
                }
                for channel in answer["updated"]?.arrayValue ?? [] {
                    self.emitEvent("channel_changelog", channelURL: channel["channel_url"]?.stringValue ?? "", payload: channel)
                }
                if answer["has_more"]?.boolValue == true {
                    self.syncChannelChangelogs(epoch: epoch, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where error.code == .invalidArgument && hadToken && resetOnce:
                // An expired or unreadable token: start over from the beginning.
                self.log(.info, "sync: channel changelog token refused (\(error.message)); starting over")
                engine.withCache("resetting the channel token", log: self.engineLog) { cache throws(ParleyError) in
                    try cache.removeSyncToken(scope: ChatCache.channelsTokenScope)
                }
                self.syncChannelChangelogs(epoch: epoch, resetOnce: false, then: next)
            case .failure(let error):
                self.log(.warning, "sync: channel changelogs failed: \(error)")
                next()
            }
        }
    }

    /// How many channels' message changelogs are fetched at once: with many cached
    /// channels a reconnect costs about channels / this many round trips, not one each.
    static let messageChangelogConcurrency = 4

    /// The channels still to catch up, shared by the workers. Only touched on the engine
    /// queue (every step of a changelog runs there), hence unchecked.
    private final class ChangelogQueue: @unchecked Sendable {
        var remaining: [String]
        var runningWorkers: Int
        init(_ urls: [String], workers: Int) {
            remaining = urls.reversed()
            runningWorkers = workers
        }
    }

    /// Runs the message changelogs of `urls`, a few channels at a time, then `next` once.
    private func syncMessageChangelogs(epoch: UInt64, urls: [String], then next: @escaping @Sendable () -> Void) {
        let workers = min(Self.messageChangelogConcurrency, urls.count)
        guard workers > 0 else { return next() }
        let queue = ChangelogQueue(urls, workers: workers)
        for _ in 0..<workers {
            pullMessageChangelog(epoch: epoch, from: queue, then: next)
        }
    }

    private func pullMessageChangelog(epoch: UInt64, from queue: ChangelogQueue, then next: @escaping @Sendable () -> Void) {
        engine.assertOnQueue()
        guard let url = queue.remaining.popLast() else {
            queue.runningWorkers -= 1
            if queue.runningWorkers == 0 { next() }
            return
        }
        syncMessageChangelog(epoch: epoch, channelURL: url, resetOnce: true) {
            self.pullMessageChangelog(epoch: epoch, from: queue, then: next)
        }
    }

    private func syncMessageChangelog(epoch: UInt64, channelURL: String, resetOnce: Bool, then next: @escaping @Sendable () -> Void) {
        let engine = self.engine
        guard engine.sessionEpoch == epoch else { return next() }
        let scope = ChatCache.messagesTokenScope(channelURL: channelURL)
        var token: String?
        engine.withCache("reading a message token", log: engineLog) { cache throws(ParleyError) in
            token = try cache.syncToken(scope: scope)
        }
        let hadToken = token != nil
        let position = token.map { "token=" + URLEncoding.percentEncode($0) } ?? "change_ts=0"
        let path = "/v3/group_channels/\(URLEncoding.encodePathSegment(channelURL))/messages/changelogs?\(position)&limit=200"
            + "&include_reactions=true&include_thread_info=true&include_parent_message_info=true&with_sorted_meta_array=true"
        engineCall("GET", path) { result in
            guard engine.sessionEpoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                var changed: [JSONValue] = []
                engine.withCache("applying message changelogs", log: self.engineLog) { cache throws(ParleyError) in
                    try cache.transaction { () throws(ParleyError) in
                        // Only messages the cache holds: new ones are found by listing.
                        for message in answer["updated"]?.arrayValue ?? [] {
                            guard let id = message["message_id"]?.int64Value, try cache.message(id: id) != nil else { continue }
                            if try cache.upsertMessage(message) == .updated { changed.append(message) }
                        }
                        for deleted in answer["deleted"]?.arrayValue ?? [] {
                            if let id = deleted["message_id"]?.int64Value { try cache.deleteMessage(messageID: id) }
                        }
                        if let next = answer["next"]?.stringValue, !next.isEmpty {
                            try cache.setSyncToken(next, scope: scope)
                        }
                    }
                }
                for message in changed {
                    self.emitEvent("message_changelog", channelURL: channelURL, payload: message)
                }
                if answer["has_more"]?.boolValue == true {
                    self.syncMessageChangelog(epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where error.code == .forbidden || error.code == .notFound:
                // No longer ours to see: forget it.
                engine.withCache("removing a channel", log: self.engineLog) { cache throws(ParleyError) in
                    try cache.deleteChannel(url: channelURL)
                }
                next()
            case .failure(let error) where error.code == .invalidArgument && hadToken && resetOnce:
                self.log(.info, "sync: message changelog token of \(channelURL) refused (\(error.message)); starting over")
                engine.withCache("resetting a message token", log: self.engineLog) { cache throws(ParleyError) in
                    try cache.removeSyncToken(scope: scope)
                }
                self.syncMessageChangelog(epoch: epoch, channelURL: channelURL, resetOnce: false, then: next)
            case .failure(let error):
                self.log(.warning, "sync: message changelogs of \(channelURL) failed: \(error)")
                next()
            }
        }
    }
}
