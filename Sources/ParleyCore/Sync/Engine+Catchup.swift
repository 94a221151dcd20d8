import Dispatch
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
        self.catchUp.passIncomplete = false
        self.catchUp.passBreaks = self.session.streamBreaks
        self.catchUp.passStartedNs = monotonicNanoseconds()
        let epoch = self.session.epoch
        syncChannelChangelogs(epoch: epoch, resetOnce: true) {
            self.reportResyncIfFound(epoch: epoch)
            self.syncMessageChangelogs(epoch: epoch, urls: self.channelsWithMessages()) {
              self.syncPollChangelogs(epoch: epoch, urls: self.channelsWithPolls()) {
                self.catchUp.inProgress = false
                self.metrics.catchUpPasses.add()
                self.metrics.catchUpNanoseconds.add(Int(monotonicNanoseconds() - self.catchUp.passStartedNs))
                if self.catchUp.requestedAgain && self.session.epoch == epoch {
                    self.runCatchUp(then: nil)
                    return
                }
                self.scheduleCatchUpRetry(epoch: epoch)
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

    /// After a pass: one that could not read every changelog (the server overloaded, the
    /// network down while the stream stayed up) runs again after the stream's reconnect
    /// delays (`reconnect_initial_delay_ms` doubling up to `reconnect_max_delay_ms`, with
    /// jitter), as long as the session lasts: the stream alone would not bring what it missed.
    private func scheduleCatchUpRetry(epoch: UInt64) {
        guard catchUp.passIncomplete, session.epoch == epoch, session.current != nil else {
            catchUp.incompletePasses = 0
            return
        }
        catchUp.incompletePasses += 1
        guard !catchUp.retryScheduled else { return }
        catchUp.retryScheduled = true
        let delayMs = configuration.reconnectPolicy.delayMs(attempt: catchUp.incompletePasses)
        log(.info, "sync: a catch-up could not read every changelog; another in \(delayMs) ms")
        queue.asyncAfter(deadline: .now() + .milliseconds(delayMs)) { [weak self] in
            guard let self else { return }
            self.catchUp.retryScheduled = false
            guard self.session.epoch == epoch, self.catchUp.incompletePasses > 0 else { return }
            self.runCatchUp(then: nil)
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
                let page = try cache.channels(order: .chronological, after: after, limit: 200, withMembers: false)
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
        // From the start (a first sync, a refused token) every list is read.
        let withMembers = token == nil || !changelogsMayOmitMembers
        let path = Endpoints.channelChangelogs(userID: session.userID, token: token, limit: 100, withMembers: withMembers)
        let readStart = channelReads.begin()
        call("GET", path) { result in
            let touchedByEvents = self.channelReads.end(readStart)
            guard self.session.epoch == epoch else { return next() }
            switch result {
            case .success where !withMembers && !self.changelogsMayOmitMembers:
                // Events were lost or the stream dropped while the page travelled: read it with members.
                self.syncChannelChangelogs(epoch: epoch, resetOnce: resetOnce, rereads: rereads, then: next)
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
                // A warm reconnect's page is most often empty: no write (no commit) then.
                if !page.changesNothing(since: token) {
                    self.write(.channelChangelog, "applying channel changelogs") { transaction throws(ParleyError) in
                        self.channelRereads.wanted.formUnion(try Self.applyChannelChangelog(answer, touchedByEvents: touchedByEvents, transaction))
                        if !withMembers {
                            // A channel whose member list the cache does not hold is read whole.
                            for channel in page.updated ?? [] {
                                guard let url = WireChannel(channel).channelURL else { continue }
                                self.channelRereads.storedWithoutMembers.insert(url)
                                if try !transaction.cache.channelMembersKnown(url: url) { self.channelRereads.wanted.insert(url) }
                            }
                        }
                        if let next = page.next, !next.isEmpty {
                            try transaction.setSyncToken(next, scope: ChatCache.channelsTokenScope)
                        }
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
                if error.isRetryable { self.catchUp.passIncomplete = true }
                next()
            }
        }
    }

    /// Whether the channel changelogs may leave member lists out: the stream is open and
    /// resumed from a position, with no event lost since. Every change of a member list
    /// reaches the user as an event carrying the channel with its members (PROTOCOL.md §9.1),
    /// and a resumed stream's replay gives each changed channel's list as it is now, or the
    /// members its replayed events changed, so the changelogs would only repeat them (in a
    /// reconnect storm, a channel of 1,000 members per client, rendered and stored again). A `resync` reads the channels stored meanwhile
    /// again whole (`ChannelRereads.storedWithoutMembers`).
    var changelogsMayOmitMembers: Bool {
        session.linkOpen && session.resumedAtBreaks == session.streamBreaks
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
        syncChangelog(.messages, epoch: epoch, channelURL: url, resetOnce: true) {
            self.pullMessageChangelog(epoch: epoch, from: queue, then: next)
        }
    }

    /// The two changelogs read per channel during a catch-up.
    enum ChannelChangelog {
        /// Its messages replace the cached copies even when their `updated_at` did not move
        /// (reactions, thread info, pins, polls change a message without moving it).
        case messages
        /// Votes and poll edits change no message; runs after the message changelogs.
        case polls

        var noun: String { self == .messages ? "message" : "poll" }

        func tokenScope(_ channelURL: String) -> String {
            self == .messages ? ChatCache.messagesTokenScope(channelURL: channelURL) : ChatCache.pollsTokenScope(channelURL: channelURL)
        }

        func path(_ channelURL: String, token: String?) -> String {
            self == .messages
                ? Endpoints.messageChangelogs(channelURL: channelURL, token: token, limit: 200)
                : Endpoints.pollChangelogs(channelURL: channelURL, token: token, limit: 200)
        }

        func cause(_ channelURL: String) -> ChangeCause {
            self == .messages ? .messageChangelog(channelURL: channelURL) : .pollChangelog(channelURL: channelURL)
        }
    }

    /// One page of a channel's changelog of `kind`. Events of the channel that arrive while the
    /// page is read may be later than its entries: the page is then asked for again (at most
    /// `maxChangelogRereads` times in a row), and past that a message page is applied without
    /// replacing what the cache has from those events. A refused token is dropped once and the
    /// changelog read from the start.
    private func syncChangelog(_ kind: ChannelChangelog, epoch: UInt64, channelURL: String, resetOnce: Bool, rereads: Int = 0,
                               then next: @escaping @Sendable () -> Void) {
        guard self.session.epoch == epoch else { return next() }
        let scope = kind.tokenScope(channelURL)
        let token = read("reading a \(kind.noun) token") { cache throws(ParleyError) in try cache.syncToken(scope: scope) } ?? nil
        let readStart = channelReads.begin()
        call("GET", kind.path(channelURL, token: token)) { result in
            let touched = self.channelReads.end(readStart)[channelURL] != nil
            guard self.session.epoch == epoch else { return next() }
            switch result {
            case .success(let answer):
                if touched && rereads < Self.maxChangelogRereads {
                    return self.syncChangelog(kind, epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, rereads: rereads + 1,
                                              then: next)
                }
                let page = WireChangelogPage(answer)
                if !page.changesNothing(since: token) {
                    self.write(kind.cause(channelURL), "applying \(kind.noun) changelogs") { transaction throws(ParleyError) in
                        switch kind {
                        case .messages: try Self.applyMessageChangelog(answer, replaceCached: !touched, transaction)
                        case .polls: try Self.applyPollChangelog(answer, channelURL: channelURL, transaction)
                        }
                        if let next = page.next, !next.isEmpty { try transaction.setSyncToken(next, scope: scope) }
                    }
                }
                if page.hasMore == true {
                    self.syncChangelog(kind, epoch: epoch, channelURL: channelURL, resetOnce: resetOnce, then: next)
                } else {
                    next()
                }
            case .failure(let error) where kind == .messages && (error.code == .forbidden || error.code == .notFound):
                // No longer ours to see: forget it. (Access is the message changelog's to
                // judge, as it runs first; a poll changelog only waits.)
                self.write(kind.cause(channelURL), "removing a channel") { transaction throws(ParleyError) in
                    try transaction.removeChannel(channelURL, reason: .accessLost)
                }
                next()
            case .failure(let error) where error.code == .invalidArgument && token != nil && resetOnce:
                self.log(.info, "sync: \(kind.noun) changelog token of \(channelURL) refused (\(error.message)); starting over")
                self.write(kind.cause(channelURL), "resetting a \(kind.noun) token") { transaction throws(ParleyError) in
                    try transaction.removeSyncToken(scope: scope)
                }
                self.syncChangelog(kind, epoch: epoch, channelURL: channelURL, resetOnce: false, then: next)
            case .failure(let error):
                self.log(.warning, "sync: \(kind.noun) changelogs of \(channelURL) failed: \(error)")
                if error.isRetryable { self.catchUp.passIncomplete = true }
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
        syncChangelog(.polls, epoch: epoch, channelURL: url, resetOnce: true) {
            self.syncPollChangelogs(epoch: epoch, urls: Array(urls.dropFirst()), then: next)
        }
    }
}
