/// A reference that does not keep its object alive and may cross threads: what the change
/// feed, the network and the callbacks hold of an engine, a client or a view, so that only
/// the application's own references decide when those go.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    weak let object: Object?

    init(_ object: Object?) { self.object = object }
}
