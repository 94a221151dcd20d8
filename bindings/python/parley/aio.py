"""asyncio integration: a manual-dispatch client driven by the event loop.

The library signals waiting callbacks through an event fd; the loop watches it with
``add_reader`` and runs them with ``dispatch`` on the loop's thread, so completions
resolve asyncio futures directly, with no extra threads and no locking.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from typing import (
    TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine, Dict, Generic, List, Mapping, Optional, TypeVar,
    Union,
)

from .client import Client, operation_names
from .channel_collection import ChannelChange, GroupChannelCollection, GroupChannelListQuery
from .errors import NetworkError, ParleyError
from .message_collection import NEWEST, MessageChange, MessageCollection, MessageListParams
from .sync_view import NEWEST_VIEWPOINT, SyncAction, SyncView, SyncViewOptions

if TYPE_CHECKING:  # Python 3.10+, read by type checkers only
    from typing import Concatenate, ParamSpec

    P = ParamSpec("P")
R = TypeVar("R")
ClassT = TypeVar("ClassT", bound=type)

# The async classes are described by the sync ones: a method that only forwards to the sync
# object (`self._sync`: the Client, collection or view) is one line naming the sync method,
# which gives it its signature, docstring and type.


def _forward(method: "Callable[Concatenate[Any, P], R]") -> "Callable[Concatenate[Any, P], R]":
    """A method that calls `method` of the sync object and returns what it returns."""
    name = method.__name__

    @functools.wraps(method)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._sync, name)(*args, **kwargs)

    setattr(forward, "_forwards", True)
    return forward


def _awaiting(
    method: "Callable[Concatenate[Any, P], concurrent.futures.Future[R]]",
) -> "Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]":
    """A coroutine method that calls `method` of the sync object and awaits the Future it returns
    (on the object's event loop, `self._loop`)."""
    name = method.__name__

    @functools.wraps(method)
    async def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.wrap_future(getattr(self._sync, name)(*args, **kwargs), loop=self._loop)

    # It returns what the Future gives, not the Future: no return annotation.
    forward.__annotations__ = {key: value for key, value in forward.__annotations__.items() if key != "return"}
    setattr(forward, "__signature__", inspect.signature(method).replace(return_annotation=inspect.Signature.empty))
    setattr(forward, "_forwards", True)
    return forward


def _forwarding(cls: ClassT) -> ClassT:
    """Class decorator: names the class's forwarding methods as its own (``__qualname__``)."""
    for name, value in vars(cls).items():
        if getattr(value, "_forwards", False):
            value.__qualname__ = f"{cls.__qualname__}.{name}"
    return cls


@_forwarding
class AsyncClient:
    """Like :class:`Client`, with awaitable operations. Create it inside a running loop."""

    def __init__(self, config: Union[None, str, Mapping[str, Any]] = None, **options: Any) -> None:
        options["dispatch_mode"] = "manual"
        self._loop = asyncio.get_running_loop()
        self.client = Client(config, **options)
        self._sync = self.client
        self._fd = self.client.event_fd
        self._loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        if not self.client.closed:
            self.client.dispatch()

    async def _await(self, start: Callable[[Any], int]) -> Any:
        future: "asyncio.Future[Any]" = self._loop.create_future()

        def done(result: Optional[Any], error: Optional[ParleyError]) -> None:
            if future.cancelled():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

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

    async def connect(self, user_id: str, session_token: str) -> Any:
        """Connects as `user_id`; returns the user object."""
        return await self._await(lambda done: self.client.connect_with_callback(user_id, session_token, done))

    disconnect = _forward(Client.disconnect)

    async def perform(self, operation: str, params: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
        """Performs a catalog operation; returns the server's answer."""
        merged = dict(params or {})
        merged.update(kwargs)
        return await self._await(lambda done: self.client.perform_with_callback(operation, merged, done))

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_") or name not in operation_names():
            raise AttributeError(name)
        return lambda params=None, **kwargs: self.perform(name, params, **kwargs)

    post = _forward(Client.post)

    # Handlers run on the loop's thread (during dispatch); the rest is synchronous.
    set_connection_handler = _forward(Client.set_connection_handler)
    set_event_handler = _forward(Client.set_event_handler)
    reconnect = _forward(Client.reconnect)
    set_session_token = _forward(Client.set_session_token)

    @property
    def connection_state(self) -> str:
        return self.client.connection_state

    def send_user_message(self, channel_url: str, message: Optional[str] = None, **params: Any) -> "tuple[Any, asyncio.Future[Any]]":
        """Returns (pending_message, awaitable of the server's message)."""
        pending, future = self.client.send_user_message(channel_url, message, **params)
        return pending, asyncio.wrap_future(future, loop=self._loop)

    def send_file_message(self, channel_url: str, progress: Any = None, **params: Any) -> "tuple[Any, asyncio.Future[Any]]":
        """Returns (pending_message, awaitable of the server's message); progress(req_id, sent, total)."""
        pending, future = self.client.send_file_message(channel_url, progress, **params)
        return pending, asyncio.wrap_future(future, loop=self._loop)

    resend_message = _awaiting(Client.resend_message)
    cancel_message = _forward(Client.cancel_message)
    remove_failed_messages = _forward(Client.remove_failed_messages)
    cached_channels = _forward(Client.cached_channels)
    cached_channel = _forward(Client.cached_channel)
    cached_messages = _forward(Client.cached_messages)
    cached_message_page = _forward(Client.cached_message_page)
    clear_cached_data = _forward(Client.clear_cached_data)

    def group_channel_collection(
        self, query: Union[None, GroupChannelListQuery, Dict[str, Any]] = None, **options: Any
    ) -> "AsyncGroupChannelCollection":
        """A live channel list whose changes are read with ``async for change in collection.changes()``
        (the on_* handlers of :meth:`Client.group_channel_collection` work too)."""
        return AsyncGroupChannelCollection(self, self.client.group_channel_collection(query, **options))

    def message_collection(
        self, channel_url: str, starting_point: int = NEWEST, params: Union[None, MessageListParams, Dict[str, Any]] = None,
        **options: Any,
    ) -> "AsyncMessageCollection":
        """A live chat view whose changes are read with ``async for change in collection.changes()``."""
        return AsyncMessageCollection(self, self.client.message_collection(channel_url, starting_point, params, **options))

    def sync_view(
        self, channel_url: str, viewpoint: int = NEWEST_VIEWPOINT, options: Union[None, SyncViewOptions, Dict[str, Any]] = None,
        **overrides: Any,
    ) -> "AsyncSyncView":
        """The SyncManager-style view, its actions read with ``async for action in view.actions()``."""
        return AsyncSyncView(self, self.client.sync_view(channel_url, viewpoint, options, **overrides))

    async def close(self) -> None:
        """Removes the fd watch and closes the client (pending operations get Cancelled)."""
        if self.client.closed:
            return
        self._loop.remove_reader(self._fd)
        self.client.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


ChangeT = TypeVar("ChangeT")
AsyncSelfT = TypeVar("AsyncSelfT", bound="AsyncView[Any]")


class AsyncView(Generic[ChangeT]):
    """What the async collections share: an async iterator of changes and disposal.
    Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: Any) -> None:
        self._owner = owner
        self._loop = owner._loop
        self._sync = collection
        self._queue: "asyncio.Queue[Optional[ChangeT]]" = asyncio.Queue()
        collection.add_listener(self._queue.put_nowait)

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

    def __enter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()

    async def __aenter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.dispose()


@_forwarding
class AsyncGroupChannelCollection(AsyncView[ChannelChange]):
    """A :class:`GroupChannelCollection` on an :class:`AsyncClient`: awaitable pages and an
    async iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: GroupChannelCollection) -> None:
        super().__init__(owner, collection)
        self.collection = collection

    load_more = _awaiting(GroupChannelCollection.load_more)

    @property
    def has_more(self) -> bool:
        return self.collection.has_more

    @property
    def channels(self) -> List[Any]:
        return self.collection.channels


@_forwarding
class AsyncMessageCollection(AsyncView[MessageChange]):
    """A :class:`MessageCollection` on an :class:`AsyncClient`: awaitable loads and an async
    iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: MessageCollection) -> None:
        super().__init__(owner, collection)
        self.collection = collection

    async def start(self) -> List[Any]:
        """Starts the view; returns the server's list (or, offline, the cache's after raising
        nothing: check ``messages``). Raises what the server's page raised, except NetworkError."""
        cache, api = self.collection.start()
        cached: List[Any] = await asyncio.wrap_future(cache, loop=self._loop)
        try:
            result: List[Any] = await asyncio.wrap_future(api, loop=self._loop)
            return result
        except ParleyError as error:
            # Exactly NetworkError (the offline case): its subclasses Timeout and TLSError still raise.
            if type(error) is NetworkError:
                return cached
            raise

    load_previous = _awaiting(MessageCollection.load_previous)
    load_next = _awaiting(MessageCollection.load_next)

    @property
    def has_previous(self) -> bool:
        return self.collection.has_previous

    @property
    def has_next(self) -> bool:
        return self.collection.has_next

    @property
    def messages(self) -> List[Any]:
        return self.collection.messages


@_forwarding
class AsyncSyncView(AsyncView[SyncAction]):
    """A :class:`SyncView` on an :class:`AsyncClient`: awaitable fetches and an async iterator
    of actions. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, view: SyncView) -> None:
        super().__init__(owner, view)
        self.view = view

    fetch = _awaiting(SyncView.fetch)
    fetch_all_next = _awaiting(SyncView.fetch_all_next)
    reset_viewpoint = _forward(SyncView.reset_viewpoint)

    def actions(self) -> AsyncIterator[SyncAction]:
        """Every action, in order, until the view is disposed."""
        return self.changes()

    messages = _forward(SyncView.messages)
