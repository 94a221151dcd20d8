import Foundation
import NIOCore
import Synchronization

// The end of a connection, noticed when it happens rather than at the server's next write to
// it: an event stream ends as soon as its client closes the connection (PROTOCOL.md §9), and
// one whose connection is lost without a close ends once its writes go unacknowledged.

/// Says once that a connection ended: its client closed it (its input ended), or it is gone
/// without that (reset, or given up by the kernel).
final class ConnectionEnd: Sendable {
    private let state = Mutex<(ended: Bool, closedByClient: Bool, actions: [@Sendable () -> Void])>((false, false, []))

    func signal(closedByClient: Bool) {
        let actions: [@Sendable () -> Void] = state.withLock { state in
            if state.ended { return [] }
            state.ended = true
            state.closedByClient = closedByClient
            defer { state.actions = [] }
            return state.actions
        }
        for action in actions { action() }
    }

    /// The connection ended without its client closing it: what was written to it last may
    /// not have reached the client. (A client closes with a FIN only once it read everything
    /// that reached it; with unread data its kernel resets the connection instead.)
    var lost: Bool { state.withLock { $0.ended && !$0.closedByClient } }

    /// Runs `action` once the connection ends: now, if it has.
    func onEnd(_ action: @escaping @Sendable () -> Void) {
        let now: Bool = state.withLock { state in
            if state.ended { return true }
            state.actions.append(action)
            return false
        }
        if now { action() }
    }
}

/// In every connection's pipeline, after the HTTP decoding: tells the connection's
/// `ConnectionEnd` when its input closes or the connection goes inactive.
final class ConnectionEndHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let end = ConnectionEnd()

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { end.signal(closedByClient: true) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        end.signal(closedByClient: false)
        context.fireChannelInactive()
    }

    /// The `ConnectionEnd` of a connection whose pipeline has the handler (nil otherwise).
    static func end(of channel: any Channel) async -> ConnectionEnd? {
        try? await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: ConnectionEndHandler.self).end
        }.get()
    }

    /// How long bytes written to an event stream may stay unacknowledged by the client before
    /// the kernel gives the connection up (TCP_USER_TIMEOUT, Linux): a connection lost
    /// without a close then ends within this of the server's next write to it, which a
    /// heartbeat makes at the latest `heartbeat_seconds` after the loss.
    static let unacknowledgedLimitMillis: Int32 = 5_000

    /// Sets `unacknowledgedLimitMillis` on the connection's socket (not on a Unix socket).
    static func limitUnacknowledged(_ channel: any Channel) async {
        #if os(Linux)
        let option = ChannelOptions.Types.SocketOption(level: NIOBSDSocket.OptionLevel(rawValue: CInt(IPPROTO_TCP)),
                                                       name: NIOBSDSocket.Option(rawValue: CInt(TCP_USER_TIMEOUT)))
        try? await channel.setOption(option, value: SocketOptionValue(unacknowledgedLimitMillis)).get()
        #endif
    }
}
