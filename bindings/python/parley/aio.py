"""asyncio integration: a manual-dispatch client driven by the event loop.

The library signals waiting callbacks through an event fd; the loop watches it with
``add_reader`` and runs them with ``dispatch`` on the loop's thread, so completions
resolve asyncio futures directly, with no extra threads and no locking.
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Generic, List, Mapping, Optional, TypeVar, Union

from .client import Client, operation_names
from .channel_collection import ChannelChange, GroupChannelCollection, GroupChannelListQuery
from .errors import ParleyError
from .message_collection import NEWEST, MessageChange, MessageCollection, MessageListParams
from .sync_view import NEWEST_VIEWPOINT, FetchResult, SyncAction, SyncDirection, SyncList, SyncView, SyncViewOptions


class AsyncClient:
    """Like :class:`Client`, with awaitable operations. Create it inside a running loop."""

    def __init__(self, config: Union[None, str, Mapping[str, Any]] = None, **options: Any) -> None:
        options["dispatch_mode"] = "manual"
        self._loop = asyncio.get_running_loop()
        self.client = Client(config, **options)
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

    def disconnect(self) -> None:
        self.client.disconnect()

    async def perform(self, operation: str, params: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
        """Performs a catalog operation; returns the server's answer."""
        merged = dict(params or {})
        merged.update(kwargs)
        return await self._await(lambda done: self.client.perform_with_callback(operation, merged, done))

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_") or name not in operation_names():
            raise AttributeError(name)
        return lambda params=None, **kwargs: self.perform(name, params, **kwargs)

    def post(self, function: Any) -> None:
        self.client.post(function)

    # Handlers run on the loop's thread (during dispatch); the rest is synchronous.
    def set_connection_handler(self, handler: Any) -> None:
        self.client.set_connection_handler(handler)

    def set_event_handler(self, handler: Any) -> None:
        self.client.set_event_handler(handler)

    def reconnect(self) -> None:
        self.client.reconnect()

    def set_session_token(self, token: str) -> None:
        self.client.set_session_token(token)

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

    async def resend_message(self, req_id: str, progress: Any = None) -> Any:
        return await asyncio.wrap_future(self.client.resend_message(req_id, progress), loop=self._loop)

    def cancel_message(self, req_id: str) -> None:
        self.client.cancel_message(req_id)

    def remove_failed_messages(self, channel_url: str) -> list:
        return self.client.remove_failed_messages(channel_url)

    def cached_channels(self, order: str = "latest_last_message", limit: int = 100) -> list:
        return self.client.cached_channels(order, limit)

    def cached_channel(self, channel_url: str) -> Any:
        return self.client.cached_channel(channel_url)

    def cached_messages(self, channel_url: str, before_ts: int = -1, limit: int = 30) -> list:
        return self.client.cached_messages(channel_url, before_ts, limit)

    def cached_message_page(self, channel_url: str, before_ts: int = -1, limit: int = 30) -> dict:
        """See :meth:`parley.Client.cached_message_page`."""
        return self.client.cached_message_page(channel_url, before_ts, limit)

    def clear_cached_data(self) -> None:
        self.client.clear_cached_data()

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
        self._collection = collection
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
        if not self._collection.disposed:
            self._collection.dispose()
            self._queue.put_nowait(None)

    def __enter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()

    async def __aenter__(self: AsyncSelfT) -> AsyncSelfT:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.dispose()


class AsyncGroupChannelCollection(AsyncView[ChannelChange]):
    """A :class:`GroupChannelCollection` on an :class:`AsyncClient`: awaitable pages and an
    async iterator of changes. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, collection: GroupChannelCollection) -> None:
        super().__init__(owner, collection)
        self.collection = collection

    async def load_more(self) -> List[Any]:
        """The next page: the channels it added."""
        return await asyncio.wrap_future(self.collection.load_more(), loop=self._owner._loop)

    @property
    def has_more(self) -> bool:
        return self.collection.has_more

    @property
    def channels(self) -> List[Any]:
        return self.collection.channels



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
        cached: List[Any] = await asyncio.wrap_future(cache, loop=self._owner._loop)
        try:
            result: List[Any] = await asyncio.wrap_future(api, loop=self._owner._loop)
            return result
        except ParleyError as error:
            if type(error).__name__ == "NetworkError":
                return cached
            raise

    async def load_previous(self) -> List[Any]:
        return await asyncio.wrap_future(self.collection.load_previous(), loop=self._owner._loop)

    async def load_next(self) -> List[Any]:
        return await asyncio.wrap_future(self.collection.load_next(), loop=self._owner._loop)

    @property
    def has_previous(self) -> bool:
        return self.collection.has_previous

    @property
    def has_next(self) -> bool:
        return self.collection.has_next

    @property
    def messages(self) -> List[Any]:
        return self.collection.messages


class AsyncSyncView(AsyncView[SyncAction]):
    """A :class:`SyncView` on an :class:`AsyncClient`: awaitable fetches and an async iterator
    of actions. Callbacks run on the loop's thread (during dispatch)."""

    def __init__(self, owner: AsyncClient, view: SyncView) -> None:
        super().__init__(owner, view)
        self.view = view

    async def fetch(self, direction: SyncDirection = SyncDirection.PREVIOUS) -> FetchResult:
        return await asyncio.wrap_future(self.view.fetch(direction), loop=self._owner._loop)

    async def fetch_all_next(self) -> FetchResult:
        return await asyncio.wrap_future(self.view.fetch_all_next(), loop=self._owner._loop)

    def reset_viewpoint(self, viewpoint: int) -> None:
        self.view.reset_viewpoint(viewpoint)

    def actions(self) -> AsyncIterator[SyncAction]:
        """Every action, in order, until the view is disposed."""
        return self.changes()

    def messages(self, which: SyncList) -> List[Any]:
        return self.view.messages(which)
