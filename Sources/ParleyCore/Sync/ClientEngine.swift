import Dispatch

/// The engine as the facade (Client/) sees it: the few named calls it makes, and nothing of
/// the engine's state. `ParleyClient` holds the engine as `any ClientEngine`, so the
/// compiler keeps the facade to these calls (Swift has no access level for a folder, and
/// the engine's extensions in Sync/ share its fields). The collections it creates get the
/// same object as their narrower contexts (`MessageViewContext`, `ChannelViewContext`).
/// Every call but `runNow`, `sync` and the `cacheReader` is made on `queue`.
protocol ClientEngine: MessageViewContext, ChannelViewContext, SearchViewContext {
    /// Runs `body` on the engine queue and waits for it (never from the queue itself).
    func sync<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T

    // The session (Sync/Engine+Session.swift).
    /// Opens the user's cache; returns whether it knows the user (an offline start can use it).
    func prepareSession(userID: String) throws(ParleyError) -> Bool
    func beginSession(userID: String, token: String, fetchedUser: Result<JSONValue, ParleyError>) -> Result<JSONValue, ParleyError>
    func endSession() -> EventStreamConnection?
    func abandonSession() -> EventStreamConnection?
    func replaceSessionToken(_ token: String) throws(ParleyError) -> EventStreamConnection?
    var sessionCredential: APIEndpoint.Credential? { get }
    var connectedUserID: String? { get }
    var sessionStream: EventStreamConnection? { get }
    var streamState: ConnectionState { get }
    /// Tells the application's connection handler (on the callback context).
    func announce(_ event: ConnectionEvent, _ error: ParleyError?)

    // Operations of the catalog, and what their answers do to the cache (Sync/Engine+Events.swift).
    func runOperation(
        _ operation: String, effect: CacheEffect, params: JSONValue,
        finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void,
        send: (APIEndpoint.Credential, @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) -> Void
    )

    // The outbox (Sync/Engine+Outbox.swift).
    func acceptSend(
        _ outgoing: OutgoingMessage, progress: HTTPUploadProgress?,
        finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> CachedLocalMessage
    func resend(
        reqID: String, progress: HTTPUploadProgress?, finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError)
    func cancel(reqID: String) throws(ParleyError)
    func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String]

    // The cache (Sync/Engine+Views.swift).
    /// The application's cached reads, beside the engine queue (any thread).
    var cacheReader: CacheReader { get }
    func readOpenCache<T>(_ body: (ChatCache) throws(ParleyError) -> T) throws(ParleyError) -> T
    func recordAccess(channelURL: String, at now: Int64)
    func clearCache() throws(ParleyError)
    func rekeyCache(to secret: CacheSecret?) throws(ParleyError)
    func closeCache()
    /// The open cache's sizes (all zero when none is open).
    func cacheStatistics() throws(ParleyError) -> CacheStatistics

    /// What the engine did, counted (any thread).
    var metrics: EngineMetrics { get }
}

extension Engine: ClientEngine {
    func announce(_ event: ConnectionEvent, _ error: ParleyError?) { services.connectionEvent(event, error) }
}
