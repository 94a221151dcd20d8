import Dispatch

// hide_channel and unhide_channel answer with an empty object; the channel as the server now
// shows it (hidden state, history offset, unread counts, read receipt) comes with the
// stream's events a few milliseconds later. Their completions wait for those events, so
// that when one runs the cache and the views already show the change. The wait is bounded:
// it ends when the stream drops (the catch-up brings the change) or after
// `HiddenStateWaits.limitMs`, whichever comes first.

/// Completions waiting for a channel's hidden state to show in the cache.
struct HiddenStateWaits {
    /// The longest a completion waits for the stream's event.
    static let limitMs = 2_000

    struct Wait {
        let id: UInt64
        let channelURL: String
        let hiddenState: String
        let finish: @Sendable () -> Void
    }

    var waiting: [Wait] = []
    var nextID: UInt64 = 0
}

extension Engine {
    /// The hidden state an operation's parameters ask for: `hide_channel` with
    /// `allow_auto_unhide` false hides for good.
    static func expectedHiddenState(_ state: String, params: JSONValue) -> String {
        guard state != "unhidden", params["allow_auto_unhide"]?.boolValue == false else { return state }
        return "hidden_prevent_auto_unhide"
    }

    /// Runs `finish` once the cached channel of `params`' `channel_url` shows `hiddenState`,
    /// at once when it does already, when the channel is not cached or the stream is not open.
    func finishWhenHiddenStateShows(_ hiddenState: String, params: JSONValue, _ finish: @escaping @Sendable () -> Void) {
        assertOnQueue()
        guard session.linkOpen, let url = params[WireField.channelURL]?.stringValue, !cachedChannelShows(url, hiddenState) else {
            finish()
            return
        }
        let id = hiddenStateWaits.nextID
        hiddenStateWaits.nextID &+= 1
        hiddenStateWaits.waiting.append(.init(id: id, channelURL: url, hiddenState: hiddenState, finish: finish))
        queue.asyncAfter(deadline: .now() + .milliseconds(HiddenStateWaits.limitMs)) { [weak self] in
            guard let self, let index = self.hiddenStateWaits.waiting.firstIndex(where: { $0.id == id }) else { return }
            let wait = self.hiddenStateWaits.waiting.remove(at: index)
            self.log(.info, "\(wait.channelURL): no event showed the channel \(wait.hiddenState) within \(HiddenStateWaits.limitMs) ms")
            wait.finish()
        }
    }

    /// Runs the completions whose change the cache shows now, or all of them when the
    /// stream is not open (after events are applied, and when the stream drops).
    func settleHiddenStateWaits() {
        assertOnQueue()
        guard !hiddenStateWaits.waiting.isEmpty else { return }
        let open = session.linkOpen
        var settled: [HiddenStateWaits.Wait] = []
        hiddenStateWaits.waiting.removeAll { wait in
            guard !open || cachedChannelShows(wait.channelURL, wait.hiddenState) else { return false }
            settled.append(wait)
            return true
        }
        for wait in settled { wait.finish() }
    }

    /// The cached channel shows `hiddenState`, or is not cached (nothing to wait for).
    private func cachedChannelShows(_ url: String, _ hiddenState: String) -> Bool {
        let stored = read("reading a channel's hidden state") { cache throws(ParleyError) in
            try cache.channel(url: url, withMembers: false)?.json
        } ?? nil
        guard let stored, let channel = try? JSONValue.parse(stored) else { return true }
        return (WireChannel(channel).hiddenState ?? "unhidden") == hiddenState
    }
}
