import Glibc

// Catching the cache up after (re)connecting: channel changelogs with the global token,
// message changelogs with each cached channel's token (a few channels in flight at once),
// then the outbox. Every step runs on the engine queue; the network calls go out with the
// session key. Changes are written with the changelog as their cause, so the feed tells
// every view (and the application) what the catch-up found, deletions included.

extension Engine {
    /// Runs the changelogs, then the outbox (auto-resend), then `done`. A catch-up asked
    /// for while one runs is folded into a second pass after it.
    func runCatchUp(then done: (@Sendable () -> Void)?) {
        assertOnQueue()
        if let done { self.catchUp.waiters.append(done) }
        if self.catchUp.inProgress {
            self.catchUp.requestedAgain = true
            return
        }
        guard self.session.current != nil else {
            finishCatchUp()
            return
        }
        if !self.catchUp.announced {
            self.catchUp.announced = true
            feed.publish(cause: .catchUpStarted, changes: [])
        }
        self.catchUp.inProgress = true
        self.catchUp.requestedAgain = false
        // This pass's channel changelogs find what changed while the lost events were missed.
        self.catchUp.resync?.collecting = true
        self.catchUp.passChannelURLs = []
        self.catchUp.passFailed = false
        self.catchUp.passBreaks = self.session.streamBreaks
        let epoch = self.session.epoch
        syncChannelChangelogs(epoch: epoch, resetOnce: true) {
            self.reportResyncIfFound(epoch: epoch)
            self.syncMessageChangelogs(epoch: epoch, urls: self.channelsWithMessages()) {
              self.syncPollChangelogs(epoch: epoch, urls: self.channelsWithPolls()) {
                self.catchUp.inProgress = false
                if self.catchUp.requestedAgain && self.session.epoch == epoch {
                    self.runCatchUp(then: nil)
                    return
                }
                self.write(.eviction, "keeping the size limit") { transaction throws(ParleyError) in
                    try self.evictIfNeeded(transaction)
                }
                // Pending messages go out under every policy; failed ones only with automatic resend.
                self.drainOutbox()
                self.finishCatchUp()
              }
            }
        }
    }

    /// After a channel changelog pass: a pending `resync` whose pass read the changelogs to
    /// the end is reported with the channels found (else it waits for the next pass).
    private func reportResyncIfFound(epoch: UInt64) {
        guard !catchUp.passFailed, session.epoch == epoch else { return }
        catchUp.lastPassChannelURLs = catchUp.passChannelURLs
        catchUp.lastPassBreaks = catchUp.passBreaks
        catchUp.lastPassEpoch = epoch
        guard let resync = catchUp.resync, resync.collecting else { return }
        catchUp.resync = nil
        let found = catchUp.passChannelURLs.union(resync.alreadyFound)
        feed.publish(cause: .resync(reason: resync.reason, channelURLs: found.sorted(by: utf8Precedes)), changes: [])
    }

    private func finishCatchUp() {
        if catchUp.announced {
            catchUp.announced = false
            feed.publish(cause: .catchUpFinished, changes: [])
        }
        let waiters = catchUp.waiters
        catchUp.waiters = []
        for waiter in waiters { waiter() }
    }

    private func channelsWithMessages() -> [String] {
        read("listing channels") { cache throws(ParleyError) -> [String] in
            var urls: [String] = []
            var after: ChannelOrderKey?
            while true {
                let page = try cache.channels(order: .chronological, after: after, limit: 200)
                // Whether any is cached, not how many: a count walks every cached message of the channel.
                for channel in page where try cache.hasMessages(channelURL: channel.channelURL) {
                    urls.append(channel.channelURL)
                }
                guard let last = page.last, page.count == 200 else { break }
                after = last.orderKey
            }
            return urls
        } ?? []
    }

    /// Pages through channel changelogs from the saved token (first time: from the start).
    /// A page whose channels events touched while it was read is asked for again (at most
    /// `maxChangelogRereads` times in a row), rather than applied in part: the token then
    /// never passes a change the cache did not take (`ChannelReadGuard`).
    private func syncChannelChangelogs(epoch: UInt64, resetOnce: Bool, rereads: Int = 0, then next: @escaping @Sendable () -> Void) {
        guard self.session.epoch == epoch, let session = self.session.current else { return next() }
        let token = read("reading the channel token") { cache throws(ParleyError) in
            try cache.syncToken(scope: ChatCache.channelsTokenScope)
        } ?? nil
        let hadToken = token != nil
        let path = Endpoints.channelChangelogs(userID: session.userID, token: token, limit: 100)
        let readStart = channelReads.begin()
        call("GET", path) { result in
            let touchedByEvents = self.channelReads.end(readStart)
            guard self.session.epoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                let page = WireChangelogPage(answer)
                var pageURLs: Set<String> = []
                for channel in page.updated ?? [] {
                    if let url = WireChannel(channel).channelURL { pageURLs.insert(url) }
                }
                for url in page.deleted ?? [] {
                    if let url = url.stringValue { pageURLs.insert(url) }
                }
                self.catchUp.passChannelURLs.formUnion(pageURLs)
                if rereads < Self.maxChangelogRereads, pageURLs.contains(where: { touchedByEvents[$0] != nil }) {
                    return self.syncChannelChangelogs(epoch: epoch, resetOnce: resetOnce, rereads: rereads + 1, then: next)
                }
                self.write(.channelChangelog, "applying channel changelogs") { transaction throws(ParleyError) in
                    self.channelRereads.wanted.formUnion(try Self.applyChannelChangelog(answer, touchedByEvents: touchedByEvents, transaction))
                    if let next = page.next, !next.isEmpty {
                        try transaction.setSyncToken(next, scope: ChatCache.channelsTokenScope)
                    }
                }
                self.fetchWantedChannels()
                if page.hasMore == true {
                    self.syncChannelChangelogs(epoch: epoch, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where error.code == .invalidArgument && hadToken && resetOnce:
                // An expired or unreadable token: start over from the beginning.
                self.log(.info, "sync: channel changelog token refused (\(error.message)); starting over")
                self.write(.channelChangelog, "resetting the channel token") { transaction throws(ParleyError) in
                    try transaction.removeSyncToken(scope: ChatCache.channelsTokenScope)
                    // Changes may have been missed: no channel list is known to be held whole.
                    try transaction.removeChannelListMarks()
                }
                self.syncChannelChangelogs(epoch: epoch, resetOnce: false, then: next)
            case .failure(let error):
                self.log(.warning, "sync: channel changelogs failed: \(error)")
                // Not read to the end: the resync is reported after a later pass.
                self.catchUp.passFailed = true
                next()
            }
        }
    }

    /// Times in a row a channel changelog page is asked for again because events touched
    /// its channels meanwhile; past it the page is applied, its touched entries set aside and
    /// those channels read again (`fetchWantedChannels`).
    static let maxChangelogRereads = 20

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
        assertOnQueue()
        guard let url = queue.remaining.popLast() else {
            queue.runningWorkers -= 1
            if queue.runningWorkers == 0 { next() }
            return
        }
        syncMessageChangelog(epoch: epoch, channelURL: url, resetOnce: true) {
            self.pullMessageChangelog(epoch: epoch, from: queue, then: next)
        }
    }

    /// One page of a channel's message changelog. Its messages replace the cached copies even
    /// when their `updated_at` did not move (reactions, thread info, pins, polls change a
    /// message without moving it), unless events of the channel arrived while the page was
    /// read: the page is then asked for again (at most `maxChangelogRereads` times in a row),
    /// and past that applied without replacing what the cache has from those events.
    private func syncMessageChangelog(epoch: UInt64, channelURL: String, resetOnce: Bool, rereads: Int = 0,
                                      then next: @escaping @Sendable () -> Void) {
        guard self.session.epoch == epoch else { return next() }
        let scope = ChatCache.messagesTokenScope(channelURL: channelURL)
        let token = read("reading a message token") { cache throws(ParleyError) in try cache.syncToken(scope: scope) } ?? nil
        let hadToken = token != nil
        let path = Endpoints.messageChangelogs(channelURL: channelURL, token: token, limit: 200)
        let readStart = channelReads.begin()
        call("GET", path) { result in
            let touched = self.channelReads.end(readStart)[channelURL] != nil
            guard self.session.epoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                if touched && rereads < Self.maxChangelogRereads {
                    return self.syncMessageChangelog(epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, rereads: rereads + 1,
                                                     then: next)
                }
                let page = WireChangelogPage(answer)
                self.write(.messageChangelog(channelURL: channelURL), "applying message changelogs") { transaction throws(ParleyError) in
                    try Self.applyMessageChangelog(answer, replaceCached: !touched, transaction)
                    if let next = page.next, !next.isEmpty {
                        try transaction.setSyncToken(next, scope: scope)
                    }
                }
                if page.hasMore == true {
                    self.syncMessageChangelog(epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where error.code == .forbidden || error.code == .notFound:
                // No longer ours to see: forget it.
                self.write(.messageChangelog(channelURL: channelURL), "removing a channel") { transaction throws(ParleyError) in
                    try transaction.removeChannel(channelURL, reason: .accessLost)
                }
                next()
            case .failure(let error) where error.code == .invalidArgument && hadToken && resetOnce:
                self.log(.info, "sync: message changelog token of \(channelURL) refused (\(error.message)); starting over")
                self.write(.messageChangelog(channelURL: channelURL), "resetting a message token") { transaction throws(ParleyError) in
                    try transaction.removeSyncToken(scope: scope)
                }
                self.syncMessageChangelog(epoch: epoch, channelURL: channelURL, resetOnce: false, then: next)
            case .failure(let error):
                self.log(.warning, "sync: message changelogs of \(channelURL) failed: \(error)")
                next()
            }
        }
    }

    /// The channels whose cached messages carry polls: their poll changelogs run after the
    /// message changelogs (votes and poll edits change no message).
    private func channelsWithPolls() -> [String] {
        read("listing channels with polls") { cache throws(ParleyError) -> [String] in try cache.channelsWithPolls() } ?? []
    }

    /// Runs the poll changelogs of `urls`, one channel after another, then `next` once.
    private func syncPollChangelogs(epoch: UInt64, urls: [String], then next: @escaping @Sendable () -> Void) {
        guard let url = urls.first else { return next() }
        syncPollChangelog(epoch: epoch, channelURL: url, resetOnce: true) {
            self.syncPollChangelogs(epoch: epoch, urls: Array(urls.dropFirst()), then: next)
        }
    }

    /// One page of a channel's poll changelog; asked for again while events of the channel
    /// arrive as it is read (their polls may be later than the page's), as message changelogs are.
    private func syncPollChangelog(epoch: UInt64, channelURL: String, resetOnce: Bool, rereads: Int = 0,
                                   then next: @escaping @Sendable () -> Void) {
        guard self.session.epoch == epoch else { return next() }
        let scope = ChatCache.pollsTokenScope(channelURL: channelURL)
        let token = read("reading a poll token") { cache throws(ParleyError) in try cache.syncToken(scope: scope) } ?? nil
        let hadToken = token != nil
        let readStart = channelReads.begin()
        call("GET", Endpoints.pollChangelogs(channelURL: channelURL, token: token, limit: 200)) { result in
            let touched = self.channelReads.end(readStart)[channelURL] != nil
            guard self.session.epoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                if touched && rereads < Self.maxChangelogRereads {
                    return self.syncPollChangelog(epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, rereads: rereads + 1,
                                                  then: next)
                }
                let page = WireChangelogPage(answer)
                self.write(.pollChangelog(channelURL: channelURL), "applying poll changelogs") { transaction throws(ParleyError) in
                    try Self.applyPollChangelog(answer, channelURL: channelURL, transaction)
                    if let next = page.next, !next.isEmpty { try transaction.setSyncToken(next, scope: scope) }
                }
                if page.hasMore == true {
                    self.syncPollChangelog(epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where error.code == .invalidArgument && hadToken && resetOnce:
                self.log(.info, "sync: poll changelog token of \(channelURL) refused (\(error.message)); starting over")
                self.write(.pollChangelog(channelURL: channelURL), "resetting a poll token") { transaction throws(ParleyError) in
                    try transaction.removeSyncToken(scope: scope)
                }
                self.syncPollChangelog(epoch: epoch, channelURL: channelURL, resetOnce: false, then: next)
            case .failure(let error):
                // Access is the message changelog's to judge (it ran first); this one only waits.
                self.log(.warning, "sync: poll changelogs of \(channelURL) failed: \(error)")
                next()
            }
        }
    }
}
