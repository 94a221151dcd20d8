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
    TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Generic, List, Mapping, Optional, Tuple, TypeVar, Union, cast,
)

from ._collection_base import NativeCollection
from ._operation_support import awaited, missing_attribute, own_qualnames
from ._operations import AsyncOperations
from .channel_collection import (
    ChannelChange, ChannelsHandler, DeletedHandler, GroupChannelCollection, GroupChannelListOptions, GroupChannelListQuery,
)
from .client import Client, operation_names
from .errors import NetworkError, ParleyError
from .message_collection import (
    NEWEST, ChannelDeletedHandler, ChannelHandler, ErrorHandler, HugeGapHandler, MessageChange, MessageCollection,
    MessageListOptions, MessageListParams, MessagesHandler, ProgressHandler,
)
from .objects import Channel, FileMessageParams, Message, User, UserMessageParams
from .sync_view import ActionHandler, NEWEST_VIEWPOINT, SyncAction, SyncView, SyncViewOptions, SyncViewOverrides

if TYPE_CHECKING:  # read by type checkers only
    from typing_extensions import Concatenate, ParamSpec, Unpack

    P = ParamSpec("P")
R = TypeVar("R")

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
    result = awaited(method.__annotations__.get("return"))
    forward.__annotations__ = {key: value for key, value in forward.__annotations__.items() if key != "return"}
    if result is not inspect.Signature.empty:
        forward.__annotations__["return"] = result
    setattr(forward, "__signature__", inspect.signature(method).replace(return_annotation=result))
    setattr(forward, "_forwards", True)
    return cast("Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]", forward)


@own_qualnames
class AsyncClient(AsyncOperations):
    """Like :class:`Client`, with awaitable operations. Create it inside a running loop.

    Every operation of the library's catalog is a coroutine method with typed keyword
    parameters (``await client.get_group_channel(channel_url=url)``) giving the server's
    answer; cancelling the awaiting task cancels the operation.
    """

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
        future: asyncio.Future[Any] = self._loop.create_future()

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

    async def connect(self, user_id: str, session_token: str) -> User:
        """Connects as `user_id`; returns the user object."""
        user: User = await self._await(lambda done: self.client.connect_with_callback(user_id, session_token, done))
        return user

    disconnect = _forward(Client.disconnect)

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
    reconnect = _forward(Client.reconnect)
    set_session_token = _forward(Client.set_session_token)

    @property
    def connection_state(self) -> str:
        return self.client.connection_state

    def send_user_message(
        self, channel_url: str, message: Optional[str] = None, **params: Unpack[UserMessageParams],
    ) -> Tuple[Message, asyncio.Future[Message]]:
        """Returns (pending_message, awaitable of the server's message)."""
        pending, future = self.client.send_user_message(channel_url, message, **params)
        return pending, asyncio.wrap_future(future, loop=self._loop)

    def send_file_message(
        self, channel_url: str, progress: Optional[ProgressHandler] = None, **params: Unpack[FileMessageParams],
    ) -> Tuple[Message, asyncio.Future[Message]]:
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
        self, query: Union[None, GroupChannelListQuery, Mapping[str, Any]] = None, *,
        on_added: Optional[ChannelsHandler] = None, on_updated: Optional[ChannelsHandler] = None,
        on_deleted: Optional[DeletedHandler] = None, on_error: Optional[ErrorHandler] = None,
        on_deleted_channels: Optional[ChannelsHandler] = None, **options: Unpack[GroupChannelListOptions],
    ) -> AsyncGroupChannelCollection:
        """A live channel list whose changes are read with ``async for change in collection.changes()``
        (the on_* handlers of :meth:`Client.group_channel_collection` work too)."""
        return AsyncGroupChannelCollection(self, self.client.group_channel_collection(
            query, on_added=on_added, on_updated=on_updated, on_deleted=on_deleted, on_error=on_error,
            on_deleted_channels=on_deleted_channels, **options))

    def message_collection(
        self, channel_url: str, starting_point: int = NEWEST, params: Union[None, MessageListParams, Mapping[str, Any]] = None,
        *, on_added: Optional[MessagesHandler] = None, on_updated: Optional[MessagesHandler] = None,
        on_deleted: Optional[MessagesHandler] = None, on_channel_updated: Optional[ChannelHandler] = None,
        on_channel_deleted: Optional[ChannelDeletedHandler] = None, on_huge_gap_detected: Optional[HugeGapHandler] = None,
        on_error: Optional[ErrorHandler] = None, **options: Unpack[MessageListOptions],
    ) -> AsyncMessageCollection:
        """A live chat view whose changes are read with ``async for change in collection.changes()``
        (the on_* handlers of :meth:`Client.message_collection` work too)."""
        return AsyncMessageCollection(self, self.client.message_collection(
            channel_url, starting_point, params, on_added=on_added, on_updated=on_updated, on_deleted=on_deleted,
            on_channel_updated=on_channel_updated, on_channel_deleted=on_channel_deleted,
            on_huge_gap_detected=on_huge_gap_detected, on_error=on_error, **options))

    def sync_view(
        self, channel_url: str, viewpoint: int = NEWEST_VIEWPOINT, options: Union[None, SyncViewOptions, Mapping[str, Any]] = None,
        *, on_action: Optional[ActionHandler] = None, on_error: Optional[ErrorHandler] = None,
        **overrides: Unpack[SyncViewOverrides],
    ) -> AsyncSyncView:
        """The SyncManager-style view, its actions read with ``async for action in view.actions()``
        (``on_action`` works too)."""
        return AsyncSyncView(self, self.client.sync_view(channel_url, viewpoint, options, on_action=on_action, on_error=on_error,
                                                         **overrides))

    async def close(self) -> None:
        """Removes the fd watch and closes the client (pending operations get Cancelled)."""
        if self.client.closed:
            return
        self._loop.remove_reader(self._fd)
        self.client.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


ChangeT = TypeVar("ChangeT")
AsyncSelfT = TypeVar("AsyncSelfT", bound="AsyncView[Any]")


class AsyncView(Generic[ChangeT]):
    """What the async collections share: an async iterator of changes and disposal.
    Callbacks run on the loop's thread (during dispatch). The :class:`AsyncClient` methods
    create them."""

    def __init__(self, owner: AsyncClient, collection: NativeCollection[ChangeT]) -> None:
        """Not for applications: the :class:`AsyncClient` methods create the async views."""
        self._owner = owner
        self._loop = owner._loop
        self._sync = collection
        self._queue: asyncio.Queue[Optional[ChangeT]] = asyncio.Queue()
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


@own_qualnames
class AsyncGroupChannelCollection(AsyncView[ChannelChange]):
    """A :class:`GroupChannelCollection` on an :class:`AsyncClient`: awaitable pages and an
    async iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: GroupChannelCollection) -> None:
        """Not for applications: :meth:`AsyncClient.group_channel_collection` creates it."""
        super().__init__(owner, collection)
        self.collection = collection

    load_more = _awaiting(GroupChannelCollection.load_more)

    @property
    def has_more(self) -> bool:
        return self.collection.has_more

    @property
    def channels(self) -> List[Channel]:
        return self.collection.channels


@own_qualnames
class AsyncMessageCollection(AsyncView[MessageChange]):
    """A :class:`MessageCollection` on an :class:`AsyncClient`: awaitable loads and an async
    iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: MessageCollection) -> None:
        """Not for applications: :meth:`AsyncClient.message_collection` creates it."""
        super().__init__(owner, collection)
        self.collection = collection

    async def start(self) -> List[Message]:
        """Starts the view; returns the server's list (or, offline, the cache's after raising
        nothing: check ``messages``). Raises what the server's page raised, except NetworkError."""
        cache, api = self.collection.start()
        cached: List[Message] = await asyncio.wrap_future(cache, loop=self._loop)
        try:
            result: List[Message] = await asyncio.wrap_future(api, loop=self._loop)
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
    def messages(self) -> List[Message]:
        return self.collection.messages


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
