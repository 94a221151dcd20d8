"""Stateful list queries (include/parley/query.h): each load gives the page after the last one.

A query is a plain read of the server's listing: its pages are not stored in the cache. Create
one with :meth:`parley.Client.create_query` (or :meth:`parley.AsyncClient.create_query`); the
options of each kind are in docs/C-API.md, "Queries".
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import select
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional

from . import _callbacks, _native
from .errors import ParleyError, Status, error_for

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib

#: The kinds of query by name, with their PARLEY_QUERY_* numbers.
QUERY_KINDS: Dict[str, int] = {
    "previous_messages": 1,
    "group_channels": 2,
    "public_group_channels": 3,
    "members": 4,
    "operators": 5,
    "banned_users": 6,
    "muted_users": 7,
}

PageCallback = Callable[[Optional[List[Any]], Optional[ParleyError]], None]


class Query(_native.HandleOwner):
    """A stateful list query of one of :data:`QUERY_KINDS`: :meth:`load_next_page` gives the
    next page (a Future of the list of items: messages, channels, members, or users / bans /
    mutes as the server gives them), :attr:`has_next` whether another may follow. Iterating
    the query gives its items, page after page, until the end (:meth:`pages` the pages).
    A second load while one runs raises :class:`parley.InvalidState` ("query in progress").
    Release it with :meth:`dispose` or a ``with`` block."""

    _released = "the query is disposed"

    def __init__(self, client: Client, kind: str, options: Mapping[str, Any]) -> None:
        from .client import _encode_json

        super().__init__()
        number = QUERY_KINDS.get(kind)
        if number is None:
            raise error_for(Status.INVALID_ARGUMENT, f"unknown query kind {kind!r}; expected one of {', '.join(QUERY_KINDS)}")
        handle = ctypes.c_void_p()
        _native.check(lib.parley_query_create(ctypes.byref(handle), client.handle, number, _encode_json(dict(options))))
        self._client = client
        self._handle = handle.value
        self.kind = kind

    @property
    def has_next(self) -> bool:
        """Whether another page may follow (false once a page's answer said it was the last)."""
        return _native.read_flag(lib.parley_query_has_next, self.handle)

    @property
    def is_loading(self) -> bool:
        """Whether a load runs (its completion has not run yet)."""
        return _native.read_flag(lib.parley_query_is_loading, self.handle)

    def load_next_page_with_callback(self, callback: PageCallback) -> int:
        """Loads the next page; `callback(items, error)` runs exactly once on the callback
        context. Returns the operation id (for :meth:`parley.Client.cancel`)."""
        operation = ctypes.c_uint64(0)
        handle = self.handle
        _callbacks.start(_callbacks.decoding(callback, empty="[]"), lambda key: lib.parley_query_load_next_page(
            handle, ctypes.byref(operation), _callbacks.result_trampoline, key))
        return operation.value

    def load_next_page(self) -> concurrent.futures.Future[List[Any]]:
        """A Future of the next page's items (``[]`` past the end). In manual dispatch mode it
        completes during :meth:`parley.Client.dispatch`."""
        future: concurrent.futures.Future[List[Any]] = concurrent.futures.Future()
        operation = self.load_next_page_with_callback(lambda items, error: _callbacks.settle(future, items or [], error))
        setattr(future, "operation_id", operation)
        return future

    def _wait(self, future: concurrent.futures.Future[List[Any]]) -> List[Any]:
        # In manual mode nobody else runs the callbacks: run them here until the page is in.
        if self._client.dispatch_mode == "manual":
            fd = self._client.event_fd
            while not future.done():
                select.select([fd], [], [], 0.1)
                self._client.dispatch()
        return future.result()

    def pages(self) -> Iterator[List[Any]]:
        """The remaining pages, each loaded when asked for, until :attr:`has_next` is false."""
        while self.has_next:
            yield self._wait(self.load_next_page())

    def __iter__(self) -> Iterator[Any]:
        for page in self.pages():
            yield from page

    def dispose(self) -> None:
        """Releases the query; a load in flight completes with :class:`parley.Cancelled`.
        Safe to call twice."""
        handle = self._release()
        if handle is not None:
            _native.check(lib.parley_query_dispose(handle))

    def __enter__(self) -> Query:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()

    def __del__(self) -> None:
        try:
            self.dispose()
        except Exception:
            pass
