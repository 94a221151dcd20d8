"""asyncio integration: manual-dispatch clients driven by the event loop.

Every :class:`AsyncClient` of a loop joins the loop's one :class:`parley.DispatchGroup`,
whose fd is readable while any of them has callbacks waiting; the loop watches it with
``add_reader`` (one reader however many clients) and runs them with ``dispatch`` on the
loop's thread, so completions resolve asyncio futures directly, with no extra threads and
no locking.

What waits for the server is a coroutine (connecting, operations, requests, sends, loads);
what answers from local state at once (the cache, the connection state, cancelling a
message, setting handlers) is a plain method. Every send is a coroutine that returns once
the message is stored: a :class:`PendingSend` (``pending``, ``req_id``, ``delivered``), or
for :meth:`AsyncClient.resend_message` a :class:`Send` (``req_id``, ``delivered``).
Connection changes and events are also async iterators: :meth:`AsyncClient.connection_events`,
:meth:`AsyncClient.events`.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import json
import logging
import weakref
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Generic, List, Mapping, Optional, Protocol, Sequence, Tuple, TypeVar,
    Union, cast, overload,
)

from . import _callbacks, _native

from ._collection_base import NativeCollection
from ._operation_support import awaited, forwarding, missing_attribute, own_qualnames
from ._operations import AsyncOperations
from .channel_collection import ChannelChange, GroupChannelCollection
from .client import (
    _CATEGORIES, CONNECTION_EVENT_KINDS, LOG_INFO, Client, DispatchGroup, LogHandler, ResultCallback, operation_names,
    user_message_document,
)
from .errors import NetworkError, ParleyError, error_for
from .events import ClientEvent, ConnectionEvent
from .freshness import Freshness, Page
from .message_collection import MessageChange, MessageCollection, ProgressHandler
from .query import Query
from .objects import FileMessageParams, Message, User, UserMessageParams
from .search import MessageSearch, SearchChange, SearchResult
from .sync_view import SyncAction, SyncView

if TYPE_CHECKING:  # read by type checkers only
    from typing_extensions import Concatenate, ParamSpec, Unpack

    P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
W = TypeVar("W")

# The async classes are described by the sync ones: a method that only forwards to the sync
# object (`self._sync`: the Client, collection or view) is one line naming the sync method,
# which gives it its signature, docstring and type. The catalog operations come the same way
# from one description (parley._operations, generated): AsyncOperations.


def _forward(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method that calls `method` of the sync object and returns what it returns."""
    name = method.__name__

    @functools.wraps(method)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._sync, name)(*args, **kwargs)

    setattr(forward, "_forwards", True)
    return cast("Callable[Concatenate[Any, P], R]", forward)


def _awaiting(
    method: Callable[Concatenate[Any, P], concurrent.futures.Future[R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """A coroutine method that calls `method` of the sync object and awaits the Future it returns
    (on the object's event loop, `self._loop`)."""
    name = method.__name__

    @functools.wraps(method)
    async def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.wrap_future(getattr(self._sync, name)(*args, **kwargs), loop=self._loop)

    # It returns what the Future gives, not the Future.
    forwarding(forward, method, awaited(method.__annotations__.get("return")))
    return cast("Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]", forward)


def _wrapping(method: Callable[Concatenate[Any, P], R], wrap: Callable[[Any, R], W], doc: str) -> Callable[Concatenate[Any, P], W]:
    """A method that calls `method` of the sync object and returns its result wrapped for the
    loop: `wrap(self, result)` (an async view of the sync one). Same parameters as `method`;
    `doc` says what the wrapped result offers."""
    name = method.__name__

    @functools.wraps(method)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return wrap(self, getattr(self._sync, name)(*args, **kwargs))

    forward.__doc__ = doc
    forwarding(forward, method, getattr(wrap, "__name__", inspect.Signature.empty))
    return cast("Callable[Concatenate[Any, P], W]", forward)


class _ReadOnly(Protocol[T_co]):
    """How type checkers see a :func:`_forwarded` property: a read-only attribute of type T_co."""

    @overload
    def __get__(self, instance: None, owner: Any) -> _ReadOnly[T_co]: ...

    @overload
    def __get__(self, instance: object, owner: Any) -> T_co: ...


def _forwarded(getter: Callable[[Any], T]) -> _ReadOnly[T]:
    """A read-only property that reads the same property of the sync object (`getter`: that
    property, e.g. ``MessageCollection.messages``; its documentation too)."""
    sync_property = cast(property, getter)
    name = sync_property.fget.__name__ if sync_property.fget is not None else ""

    def get(self: Any) -> Any:
        return getattr(self._sync, name)

    return cast("_ReadOnly[T]", property(get, doc=sync_property.__doc__))


def _resolving(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> ResultCallback:
    """A completion `(result, error)` that settles `future` (run on the loop's thread, during
    dispatch or close); nothing once the future is done or the loop is closed."""

    def done(result: Optional[Any], error: Optional[ParleyError]) -> None:
        if not future.done() and not loop.is_closed():
            _callbacks.settle(future, result, error)

    return done


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A failed send is also reported as an event and to the views: an application that does
    # not await `delivered` is not told "Future exception was never retrieved".
    if not future.cancelled():
        future.exception()


@dataclass(frozen=True, eq=False)
class Send:
    """A send under way (what :meth:`AsyncClient.resend_message` returns): the message's
    ``req_id`` and ``delivered``, an asyncio Future of the server's message that raises the
    failure (:class:`parley.ParleyError`; :class:`parley.Cancelled` when the message is
    canceled or the client closed). Whatever happens to ``delivered``, the views and the
    event handler report the outcome too. Cancelling ``delivered`` (``asyncio.wait_for``
    timing out) does not stop the send: :meth:`AsyncClient.cancel_message` does."""

    req_id: str
    delivered: asyncio.Future[Message]


@dataclass(frozen=True, eq=False)
class PendingSend(Send):
    """A new message on its way (what the async sends return): :class:`Send` with
    ``pending``, the message as stored before it went out (``sending_status`` "pending",
    ``req_id``), which the views already show.

    ``sent = await client.send_user_message(url, "hi")``; ``sent.pending``; ``message =
    await sent.delivered``."""

    pending: Message


EventT = TypeVar("EventT")


class EventStream(AsyncIterator[EventT]):
    """An async iterator of a client's events (:meth:`AsyncClient.connection_events`,
    :meth:`AsyncClient.events`). It receives every event from its creation on (those that
    come before the first ``__anext__`` wait in its queue) and ends when the client closes
    or :meth:`aclose` is called; several streams each get every event. Use it in ``async
    for``, or as ``async with client.events() as events:`` to stop it at the block's end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Not for applications: the :class:`AsyncClient` methods create the streams."""
        self._loop = loop
        self._queue: asyncio.Queue[Optional[EventT]] = asyncio.Queue()
        self._finished = False
        self._streams: Optional[weakref.WeakSet[EventStream[EventT]]] = None

    def _put(self, item: Optional[EventT]) -> None:
        """Queues an event (None: the end), from any thread, in the order of the calls."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            pass  # the loop is closed: nobody iterates any more

    async def __anext__(self) -> EventT:
        if self._finished:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None or self._finished:
            self._finished = True
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        """Stops the stream: it receives nothing more and its iteration ends."""
        self._finished = True
        if self._streams is not None:
            self._streams.discard(self)
        self._queue.put_nowait(None)  # wakes an iteration waiting in another task

    async def __aenter__(self) -> EventStream[EventT]:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    @classmethod
    def _joining(cls, loop: asyncio.AbstractEventLoop, streams: weakref.WeakSet[EventStream[EventT]],
                 ended: bool) -> EventStream[EventT]:
        """A new stream among `streams` (those its source feeds); already at its end when the
        source has `ended` (a closed client, a disposed view)."""
        stream: EventStream[EventT] = cls(loop)
        if ended:
            stream._put(None)
        else:
            stream._streams = streams
            streams.add(stream)
        return stream


def _end_streams(*groups: weakref.WeakSet[EventStream[Any]]) -> None:
    """Ends every stream of `groups` (after the events already queued) and forgets them."""
    streams: List[EventStream[Any]] = [stream for group in groups for stream in group]
    for group in groups:
        group.clear()
    for stream in streams:
        stream._put(None)



ChangeT = TypeVar("ChangeT")
AsyncSelfT = TypeVar("AsyncSelfT", bound="AsyncView[Any]")


class AsyncQuery:
    """A :class:`parley.Query` of an :class:`AsyncClient`: ``await load_next_page()`` gives the
    next page; ``async for item in query`` gives the items page after page until the end
    (:meth:`pages` the pages). Cancelling the awaiting task cancels the load."""

    def __init__(self, owner: AsyncClient, query: Query) -> None:
        self._owner = owner
        self._sync = query
        self.kind = query.kind

    has_next = _forwarded(Query.has_next)
    is_loading = _forwarded(Query.is_loading)

    async def load_next_page(self) -> List[Any]:
        """The next page's items (``[]`` past the end)."""
        items: List[Any] = await self._owner._await(self._sync.load_next_page_with_callback)
        return items

    async def pages(self) -> AsyncIterator[List[Any]]:
        while self.has_next:
            yield await self.load_next_page()

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for page in self.pages():
            for item in page:
                yield item

    def dispose(self) -> None:
        self._sync.dispose()

    def __enter__(self) -> AsyncQuery:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()


class AsyncView(Generic[ChangeT]):
    """What the async collections share: async iterators of changes and of freshness, and
    disposal. Callbacks run on the loop's thread (during dispatch). The :class:`AsyncClient`
    methods create them."""

    def __init__(self, owner: AsyncClient, collection: NativeCollection[ChangeT]) -> None:
        """Not for applications: the :class:`AsyncClient` methods create the async views."""
        self._owner = owner
        self._loop = owner._loop
        self._sync = collection
        self._queue: asyncio.Queue[Optional[ChangeT]] = asyncio.Queue()
        self._freshness_streams: weakref.WeakSet[EventStream[Freshness]] = weakref.WeakSet()
        collection.add_listener(self._queue.put_nowait)
        collection.add_freshness_listener(self._fan_out_freshness)

    freshness = _forwarded(NativeCollection.freshness)

    def freshness_changes(self) -> EventStream[Freshness]:
        """An async iterator of the view's freshness changes (:class:`parley.Freshness`), from
        the call on, until the view is disposed (then the iteration ends)::

            async for state in collection.freshness_changes():
                show_banner(state is not Freshness.LIVE)

        Read :attr:`freshness` first for the value it starts from. Several iterators each get
        every change; ``on_freshness_changed`` still gets them too."""
        return EventStream._joining(self._loop, self._freshness_streams, self._sync.disposed)

    def _fan_out_freshness(self, freshness: Freshness) -> None:
        for stream in list(self._freshness_streams):
            stream._put(freshness)

    async def changes(self) -> AsyncIterator[ChangeT]:
        """Every change, in order, until the collection is disposed."""
        while True:
            change = await self._queue.get()
            if change is None:
                return
            yield change

    def dispose(self) -> None:
        if not self._sync.disposed:
            self._sync.dispose()
            self._queue.put_nowait(None)
            _end_streams(self._freshness_streams)

    def __enter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()

    async def __aenter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.dispose()


@own_qualnames
class AsyncGroupChannelCollection(AsyncView[ChannelChange]):
    """A :class:`GroupChannelCollection` on an :class:`AsyncClient`: awaitable pages and an
    async iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: GroupChannelCollection) -> None:
        """Not for applications: :meth:`AsyncClient.group_channel_collection` creates it."""
        super().__init__(owner, collection)
        self.collection = collection

    load_more = _awaiting(GroupChannelCollection.load_more)

    has_more = _forwarded(GroupChannelCollection.has_more)
    channels = _forwarded(GroupChannelCollection.channels)
    channel_urls = _forwarded(GroupChannelCollection.channel_urls)


@own_qualnames
class AsyncMessageCollection(AsyncView[MessageChange]):
    """A :class:`MessageCollection` on an :class:`AsyncClient`: awaitable loads and an async
    iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: MessageCollection) -> None:
        """Not for applications: :meth:`AsyncClient.message_collection` creates it."""
        super().__init__(owner, collection)
        self.collection = collection

    async def start(self) -> Page[Message]:
        """Starts the view; returns the server's list (or, offline, the cache's after raising
        nothing: check ``messages``). Raises what the server's page raised, except NetworkError.
        The list is a :class:`parley.Page`: ``origin`` says which of the two it is."""
        cache, api = self.collection.start()
        cached: Page[Message] = await asyncio.wrap_future(cache, loop=self._loop)
        try:
            result: Page[Message] = await asyncio.wrap_future(api, loop=self._loop)
            return result
        except ParleyError as error:
            # Exactly NetworkError (the offline case): its subclasses Timeout and TLSError still raise.
            if type(error) is NetworkError:
                return cached
            raise

    load_previous = _awaiting(MessageCollection.load_previous)
    load_next = _awaiting(MessageCollection.load_next)

    has_previous = _forwarded(MessageCollection.has_previous)
    has_next = _forwarded(MessageCollection.has_next)
    messages = _forwarded(MessageCollection.messages)
    succeeded_messages = _forwarded(MessageCollection.succeeded_messages)
    pending_messages = _forwarded(MessageCollection.pending_messages)
    failed_messages = _forwarded(MessageCollection.failed_messages)

    # -- sending through the view ------------------------------------------------------

    async def send_user_message(self, message: Optional[str] = None, **params: Unpack[UserMessageParams]) -> PendingSend:
        """Sends a user message into this channel (as :meth:`AsyncClient.send_user_message`):
        it shows up as added (pending) at once, then as updated once the server has it."""
        return await self._owner.send_user_message(self.collection.channel_url, message, **params)

    async def send_file_message(
        self, progress: Optional[ProgressHandler] = None, **params: Unpack[FileMessageParams],
    ) -> PendingSend:
        """Sends a file message into this channel (as :meth:`AsyncClient.send_file_message`)."""
        return await self._owner.send_file_message(self.collection.channel_url, progress, **params)

    async def resend_message(self, req_id: str) -> Send:
        """Resends a failed message (as :meth:`AsyncClient.resend_message`)."""
        return await self._owner.resend_message(req_id)

    cancel_message = _forward(MessageCollection.cancel_message)
    remove_failed_messages = _forward(MessageCollection.remove_failed_messages)


@own_qualnames
class AsyncSyncView(AsyncView[SyncAction]):
    """A :class:`SyncView` on an :class:`AsyncClient`: awaitable fetches and an async iterator
    of actions. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, view: SyncView) -> None:
        """Not for applications: :meth:`AsyncClient.sync_view` creates it."""
        super().__init__(owner, view)
        self.view = view

    fetch = _awaiting(SyncView.fetch)
    fetch_all_next = _awaiting(SyncView.fetch_all_next)
    reset_viewpoint = _forward(SyncView.reset_viewpoint)

    def actions(self) -> AsyncIterator[SyncAction]:
        """Every action, in order, until the view is disposed."""
        return self.changes()

    messages = _forward(SyncView.messages)

    viewpoint = _forwarded(SyncView.viewpoint)
    succeeded_messages = _forwarded(SyncView.succeeded_messages)
    pending_messages = _forwarded(SyncView.pending_messages)
    failed_messages = _forwarded(SyncView.failed_messages)


@own_qualnames
class AsyncMessageSearch(AsyncView[SearchChange]):
    """A :class:`MessageSearch` on an :class:`AsyncClient`: ``await load_more()``, ``async for
    result in search`` (every result, loading page after page until none is left) and an
    async iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, search: MessageSearch) -> None:
        """Not for applications: :meth:`AsyncClient.search_messages` creates it."""
        super().__init__(owner, search)
        self.search = search

    load_more = _awaiting(MessageSearch.load_more)
    load_older = _awaiting(MessageSearch.load_older)

    async def __aiter__(self) -> AsyncIterator[SearchResult]:
        for result in self.search.results:
            yield result
        while self.search.has_more:
            for result in await self.load_more():
                yield result

    has_more = _forwarded(MessageSearch.has_more)
    relevance_window = _forwarded(MessageSearch.relevance_window)
    results = _forwarded(MessageSearch.results)


class _LoopDispatch:
    """The dispatch group of one event loop: its fd is the loop's one reader for every
    AsyncClient on the loop. Made with the loop's first client, closed with its last."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.group = DispatchGroup()
        self.fd = self.group.fd
        self.clients: weakref.WeakSet[Client] = weakref.WeakSet()
        loop.add_reader(self.fd, self._on_readable)

    def _on_readable(self) -> None:
        if not self.group.closed:
            self.group.dispatch()

    @classmethod
    def join(cls, loop: asyncio.AbstractEventLoop, client: Client) -> None:
        dispatch = _loop_dispatch.get(loop)
        if dispatch is None:
            dispatch = _loop_dispatch[loop] = cls(loop)
        client.set_dispatch_group(dispatch.group)
        dispatch.clients.add(client)

    @staticmethod
    def leave(loop: asyncio.AbstractEventLoop, client: Client) -> None:
        """After `client` closed: the last one out removes the reader and closes the group."""
        dispatch = _loop_dispatch.get(loop)
        if dispatch is None:
            return
        dispatch.clients.discard(client)
        if dispatch.clients:
            return
        try:
            dispatch.group.close()
        except ParleyError:
            return  # a client closed some other way is still attached: the group stays
        del _loop_dispatch[loop]
        if not loop.is_closed():
            loop.remove_reader(dispatch.fd)


# One per loop, forgotten with the loop.
_loop_dispatch: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopDispatch] = weakref.WeakKeyDictionary()


@own_qualnames
class AsyncClient(AsyncOperations):
    """Like :class:`Client`, with awaitable operations. Create it inside a running loop.

    Every operation of the library's catalog is a coroutine method with typed keyword
    parameters (``await client.get_group_channel(channel_url=url)``) giving the server's
    answer; cancelling the awaiting task cancels the operation. Sends are coroutines that
    return once the message is stored, with a :class:`PendingSend` (``sent.pending`` at once,
    ``await sent.delivered`` for the server's message). Connection changes and events are
    async iterators (:meth:`connection_events`, :meth:`events`) besides the handlers. The
    library's log lines go to ``logging.getLogger("parley")`` as with :class:`Client`.

    The AsyncClients of one loop share one :class:`parley.DispatchGroup`: the loop watches
    one fd however many clients it serves.
    """

    def __init__(self, config: Union[None, str, Mapping[str, Any]] = None, **options: Any) -> None:
        options["dispatch_mode"] = "manual"
        self._loop = asyncio.get_running_loop()
        self.client = Client(config, **options)
        self._sync = self.client
        self._connection_streams: weakref.WeakSet[EventStream[ConnectionEvent]] = weakref.WeakSet()
        self._event_streams: weakref.WeakSet[EventStream[ClientEvent]] = weakref.WeakSet()
        self._fanning_out_connection = self._fanning_out_events = False  # the listeners are added once
        try:
            _LoopDispatch.join(self._loop, self.client)
        except BaseException:
            self.client.close()
            raise

    async def _await(self, start: Callable[[Any], int]) -> Any:
        future: asyncio.Future[Any] = self._loop.create_future()

        def done(result: Optional[Any], error: Optional[ParleyError]) -> None:
            if not future.cancelled():
                _callbacks.settle(future, result, error)

        operation = start(done)
        try:
            return await future
        except asyncio.CancelledError:
            if not self.client.closed:
                try:
                    self.client.cancel(operation)
                except ParleyError:
                    pass  # it completed meanwhile
            raise

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Sends a raw REST request; returns the decoded JSON answer or raises ParleyError."""
        return await self._await(lambda done: self.client.request_with_callback(method, path, body, done))

    async def connect(self, user_id: str, session_token: str) -> User:
        """Connects as `user_id`; returns the user object."""
        user: User = await self._await(lambda done: self.client.connect_with_callback(user_id, session_token, done))
        return user

    async def disconnect(self) -> None:
        """Ends the session (operations then raise InvalidState until connect); returns once
        the event stream has stopped."""
        self.client.disconnect()

    current_user_id = _forwarded(Client.current_user_id)
    closed = _forwarded(Client.closed)

    async def perform(self, operation: str, params: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
        """Performs a catalog operation by name; returns the server's answer. Every operation is
        also a typed method: ``await client.create_group_channel(user_ids=["a", "b"])``."""
        merged = dict(params or {})
        merged.update(kwargs)
        return await self._await(lambda done: self.client.perform_with_callback(operation, merged, done))

    if not TYPE_CHECKING:  # type checkers report unknown names themselves
        def __getattr__(self, name: str) -> Any:
            """Only for names the client lacks: an AttributeError saying what was probably meant."""
            if name.startswith("_"):
                raise AttributeError(name)
            raise missing_attribute(self, name, operation_names())

    post = _forward(Client.post)

    # Handlers run on the loop's thread (during dispatch); the rest is synchronous.
    set_connection_handler = _forward(Client.set_connection_handler)
    set_event_handler = _forward(Client.set_event_handler)
    add_connection_handler = _forward(Client.add_connection_handler)
    remove_connection_handler = _forward(Client.remove_connection_handler)
    add_event_handler = _forward(Client.add_event_handler)
    remove_event_handler = _forward(Client.remove_event_handler)

    def create_query(self, kind: str, **options: Any) -> AsyncQuery:
        """As :meth:`Client.create_query`: an :class:`AsyncQuery`, whose pages are awaited
        (``await query.load_next_page()``) and whose items come with ``async for``."""
        return AsyncQuery(self, self.client.create_query(kind, **options))
    reconnect = _forward(Client.reconnect)
    set_session_token = _forward(Client.set_session_token)

    def set_log_handler(self, handler: Optional[LogHandler], level: int = LOG_INFO) -> None:
        """As :meth:`Client.set_log_handler`; the handler runs on the loop's thread."""
        self.client.set_log_handler(handler, level)

    def use_logging(self, logger: Optional[logging.Logger] = None, level: Optional[int] = None) -> None:
        """As :meth:`Client.use_logging`: the library's log lines to `logger` (by default
        ``logging.getLogger("parley")``), at `level` or the one the logger has now."""
        self.client.use_logging(logger, level)

    connection_state = _forwarded(Client.connection_state)

    # -- event iterators ---------------------------------------------------------------

    def connection_events(self) -> EventStream[ConnectionEvent]:
        """An async iterator of the connection changes, as :class:`parley.ConnectionEvent`
        values (``kind``: a :class:`parley.ConnectionEventKind`, ``error``), from now until
        the client closes (then the iteration ends)::

            async for event in client.connection_events():
                if event.kind is ConnectionEventKind.RECONNECT_FAILED: ...

        It receives from the call on, not from the first ``__anext__``: create it before
        :meth:`connect` to see ``connecting`` and ``connected``. Several iterators each get
        every change; the connection handler still gets them too."""
        if not self._fanning_out_connection and not self.client.closed:
            self.client._add_connection_listener(self._fan_out_connection)
            self._fanning_out_connection = True
        return EventStream._joining(self._loop, self._connection_streams, self.client.closed)

    def events(self) -> EventStream[ClientEvent]:
        """An async iterator of every event the event handler gets (:meth:`Client.set_event_handler`),
        as :class:`parley.ClientEvent` values (``category``, ``channel_url``, ``payload``),
        from now until the client closes (then the iteration ends)::

            async for event in client.events():
                if event.category is EventCategory.MESSAGE_RECEIVED: ...

        Like :meth:`connection_events`, it receives from the call on, and several iterators
        each get every event (each its own decoded payload)."""
        if not self._fanning_out_events and not self.client.closed:
            self.client._add_event_listener(self._fan_out_event)
            self._fanning_out_events = True
        return EventStream._joining(self._loop, self._event_streams, self.client.closed)

    def _fan_out_connection(self, event: int, details: Optional[_native.ErrorDetails]) -> None:
        kind = CONNECTION_EVENT_KINDS.get(event)
        error = error_for(*details) if details else None
        for stream in list(self._connection_streams):
            stream._put(ConnectionEvent(kind if kind is not None else str(event), error))

    def _fan_out_event(self, category: str, channel_url: str, payload: str) -> None:
        known = _CATEGORIES.get(category)
        for stream in list(self._event_streams):
            stream._put(ClientEvent(known if known is not None else category, channel_url, json.loads(payload)))

    # -- sending -------------------------------------------------------------------------

    def _delivery(self) -> Tuple[asyncio.Future[Message], ResultCallback]:
        delivered: asyncio.Future[Message] = self._loop.create_future()
        delivered.add_done_callback(_retrieve)
        return delivered, _resolving(self._loop, delivered)

    async def send_user_message(
        self, channel_url: str, message: Optional[str] = None, **params: Unpack[UserMessageParams],
    ) -> PendingSend:
        """Sends a user message; returns once it is stored, with a :class:`PendingSend`:
        ``pending`` (``sending_status`` "pending", its ``req_id``) and ``delivered``, a Future
        of the server's message (raising the failure). `params` are the send's fields
        (:class:`parley.UserMessageParams`). Raises at once what the library refuses
        (InvalidArgument, InvalidState when not connected)::

            sent = await client.send_user_message(url, "hello")
            show(sent.pending)
            message = await sent.delivered
        """
        delivered, done = self._delivery()
        pending, _ = self.client._send_with_callback(
            "parley_client_send_user_message", channel_url, user_message_document(message, params), None, done)
        return PendingSend(pending["req_id"], delivered, pending)

    async def send_file_message(
        self, channel_url: str, progress: Optional[ProgressHandler] = None, **params: Unpack[FileMessageParams],
    ) -> PendingSend:
        """Sends a file message (``url=...`` or ``file_path=...``; ``progress(req_id, sent,
        total)`` reports an upload, on the loop's thread); returns a :class:`PendingSend` as
        :meth:`send_user_message` does."""
        delivered, done = self._delivery()
        pending, _ = self.client._send_with_callback("parley_client_send_file_message", channel_url, params, progress, done)
        return PendingSend(pending["req_id"], delivered, pending)

    async def send_file_messages(
        self, channel_url: str, files: Sequence[FileMessageParams], progress: Optional[ProgressHandler] = None,
    ) -> List[PendingSend]:
        """Sends 1 to 20 file messages in one call (as :meth:`Client.send_file_messages`);
        returns a :class:`PendingSend` per file, in order."""
        deliveries = [self._delivery() for _ in files]
        pending = self.client._send_files_with_callbacks(channel_url, files, progress, [done for _, done in deliveries])
        return [PendingSend(message["req_id"], delivered, message) for message, (delivered, _) in zip(pending, deliveries)]

    async def resend_message(self, req_id: str, progress: Optional[ProgressHandler] = None) -> Send:
        """Resends a failed message (same req_id); returns once it is pending again, with a
        :class:`Send` whose ``delivered`` gives the server's message."""
        delivered, done = self._delivery()
        self.client._resend_with_callback(req_id, progress, done)
        return Send(req_id, delivered)

    cancel_message = _forward(Client.cancel_message)
    remove_failed_messages = _forward(Client.remove_failed_messages)
    cached_channels = _forward(Client.cached_channels)
    cached_channel = _forward(Client.cached_channel)
    cached_messages = _forward(Client.cached_messages)
    cached_message_page = _forward(Client.cached_message_page)
    clear_cached_data = _forward(Client.clear_cached_data)
    rekey_cache = _forward(Client.rekey_cache)
    metrics = _forward(Client.metrics)

    group_channel_collection = _wrapping(
        Client.group_channel_collection, AsyncGroupChannelCollection,
        """A live channel list whose changes are read with ``async for change in collection.changes()``
        and its freshness with ``async for state in collection.freshness_changes()`` (the on_*
        handlers of :meth:`Client.group_channel_collection` work too).""")
    message_collection = _wrapping(
        Client.message_collection, AsyncMessageCollection,
        """A live chat view whose changes are read with ``async for change in collection.changes()``
        and its freshness with ``async for state in collection.freshness_changes()`` (the on_*
        handlers of :meth:`Client.message_collection` work too).""")
    sync_view = _wrapping(
        Client.sync_view, AsyncSyncView,
        """The SyncManager-style view, its actions read with ``async for action in view.actions()``
        and its freshness with ``async for state in view.freshness_changes()`` (``on_action`` works too).""")
    search_messages = _wrapping(
        Client.search_messages, AsyncMessageSearch,
        """A live message search (see :meth:`Client.search_messages`): ``await search.load_more()``
        for a page, ``async for result in search`` for every result page after page, and
        ``async for change in search.changes()`` for what changes afterwards.""")

    async def close(self) -> None:
        """Closes the client (pending operations get Cancelled) and leaves the loop's dispatch
        group (the last client out removes its fd watch); the event iterators end after the
        events delivered while closing."""
        if not self.client.closed:
            self.client.close()
            _LoopDispatch.leave(self._loop, self.client)
        _end_streams(self._connection_streams, self._event_streams)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
