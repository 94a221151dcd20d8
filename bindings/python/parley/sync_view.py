"""The SyncManager-style message view (include/parley/sync_view.h), for applications written
against the older sync API.

A :class:`SyncView` shows one channel's messages around a viewpoint timestamp and reports
every change as a :class:`SyncAction` (insert / update / remove / clear) on one of three
lists: succeeded, pending and failed messages. It runs on a message collection: the same
cache and the same exactness rules.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import enum
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, TypedDict, Union, cast

from . import _callbacks, _native
from ._collection_base import ErrorHandler, NativeCollection, dataclass_document, options_document
from ._native import ACTION_FN, FETCH_FN
from .errors import ParleyError
from .freshness import FreshnessHandler, PageOrigin, origin_of
from .message_collection import MessageTypeFilter, ReplyType
from .objects import Message

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib

NEWEST_VIEWPOINT = 2**63 - 1
"""The viewpoint meaning "the newest end" (the default)."""


class SyncDirection(enum.IntEnum):
    """Which way a fetch pages (``PARLEY_SYNC_DIRECTION_*``)."""

    PREVIOUS = 1
    NEXT = 2


class SyncActionKind(enum.IntEnum):
    """What the application does to a list (``PARLEY_SYNC_ACTION_*``)."""

    INSERT = 1
    UPDATE = 2
    REMOVE = 3
    CLEAR = 4


class SyncList(enum.IntEnum):
    """The three lists (``PARLEY_SYNC_LIST_*``)."""

    SUCCEEDED = 1
    PENDING = 2
    FAILED = 3


@dataclass
class SyncViewOptions:
    """How many messages a fetch loads and which messages the view shows."""

    limit: int = 30
    message_type_filter: MessageTypeFilter = MessageTypeFilter.ALL
    custom_types: Optional[List[str]] = None
    sender_user_ids: Optional[List[str]] = None
    reply_type: ReplyType = ReplyType.ALL
    include_thread_info: bool = False
    include_parent_message_info: bool = False
    include_reactions: bool = False
    include_meta_array: bool = False

    def to_json(self) -> Dict[str, Any]:
        """The options document of ``parley_sync_view_create`` (None fields left out)."""
        return dataclass_document(self)


class SyncViewOverrides(TypedDict, total=False):
    """The fields of :class:`SyncViewOptions` as keyword options of :meth:`parley.Client.sync_view`
    (an enum field also takes its value's string)."""

    limit: int
    message_type_filter: Union[MessageTypeFilter, str]
    custom_types: Optional[List[str]]
    sender_user_ids: Optional[List[str]]
    reply_type: Union[ReplyType, str]
    include_thread_info: bool
    include_parent_message_info: bool
    include_reactions: bool
    include_meta_array: bool


@dataclass(frozen=True)
class SyncAction:
    """One action on one list (no messages for CLEAR)."""

    action: SyncActionKind
    list: SyncList
    messages: List[Message] = field(default_factory=lambda: [])


@dataclass(frozen=True)
class FetchResult:
    """How a fetch ended: more messages exist that way; the server could not be reached (the
    fetch gave what the cache holds); where the fetched messages came from (``origin``; for
    ``fetch_all_next`` ``SERVER`` only when every page was the server's; None when unknown)."""

    has_more: bool
    offline: bool
    origin: Optional[PageOrigin] = None


ActionHandler = Callable[[SyncAction], None]


def _action(user_data: Optional[int], action: int, list_: int, messages_json: Optional[bytes]) -> None:
    target = _callbacks._peek(user_data)
    if target is None:
        return
    _callbacks._run(target, SyncAction(SyncActionKind(action), SyncList(list_), json.loads((messages_json or b"[]").decode("utf-8"))))


def _fetched(user_data: Optional[int], error: Any, has_more: int, offline: int) -> None:
    _callbacks.finish(user_data, error, lambda: FetchResult(bool(has_more), bool(offline)))


_action_trampoline = ACTION_FN(_action)
_fetch_trampoline = FETCH_FN(_fetched)


def make_options(options: Union[None, SyncViewOptions, Mapping[str, Any]], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """An options document from a dataclass, a mapping, keyword options or a mix (keywords win)."""
    return options_document(options, SyncViewOptions, overrides)


class SyncView(NativeCollection[SyncAction]):
    """The SyncManager-style view of one channel. Create it with :meth:`parley.Client.sync_view`
    (``client.sync_view("general", limit=50, on_action=apply)``), :meth:`fetch` both ways, call
    :meth:`fetch_all_next` when coming back online, and dispose it with :meth:`dispose` (the
    older API's ``remove``) or a ``with`` block. ``on_action`` runs on the client's callback
    context, never after :meth:`dispose` returned."""

    _dispose_function = lib.parley_sync_view_dispose
    _freshness_function = lib.parley_sync_view_freshness

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Not for applications: :meth:`parley.Client.sync_view` creates the view (the arguments
        here are the binding's own and may change)."""
        super().__init__()
        self._setup(*args, **kwargs)

    @classmethod
    def _create(cls, client: Client, channel_url: str, viewpoint: int, options: Mapping[str, Any],
                on_action: Optional[ActionHandler] = None, on_error: Optional[ErrorHandler] = None,
                on_freshness_changed: Optional[FreshnessHandler] = None) -> SyncView:
        """Creates the library's view (what :meth:`parley.Client.sync_view` calls)."""
        return cls(client, channel_url, viewpoint, options, on_action, on_error, on_freshness_changed)

    def _setup(self, client: Client, channel_url: str, viewpoint: int, options: Mapping[str, Any],
               on_action: Optional[ActionHandler] = None, on_error: Optional[ErrorHandler] = None,
               on_freshness_changed: Optional[FreshnessHandler] = None) -> None:
        self.channel_url = channel_url
        self.on_action = on_action
        handler = _native.CSyncViewHandler(version=_native.SYNC_VIEW_HANDLER_VERSION, action=_action_trampoline)
        self._open(client, on_error, on_freshness_changed, lib.parley_sync_view_create, handler, channel_url.encode("utf-8"), viewpoint,
                   document=options)

    def _deliver(self, change: SyncAction) -> None:
        if self.on_action is not None:
            self.on_action(change)

    def _fetch(self, call: Callable[[Any, Any], int]) -> concurrent.futures.Future[FetchResult]:
        future: concurrent.futures.Future[FetchResult] = concurrent.futures.Future()
        handle = self.handle

        def complete(result: Optional[FetchResult], error: Optional[ParleyError]) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                # Read while the completion runs: this fetch's origin.
                origin = origin_of(lib.parley_sync_view_last_fetch_origin, handle)
                future.set_result(replace(cast(FetchResult, result), origin=origin))  # always given without an error

        _callbacks.start(complete, lambda key: call(_fetch_trampoline, key))
        return future

    def fetch(self, direction: SyncDirection = SyncDirection.PREVIOUS) -> concurrent.futures.Future[FetchResult]:
        """Fetches ``limit`` messages that way (the first fetch: around the viewpoint); they
        arrive as INSERT actions before the Future completes."""
        handle = self.handle
        return self._fetch(lambda fn, key: lib.parley_sync_view_fetch(handle, int(direction), fn, key))

    def fetch_all_next(self) -> concurrent.futures.Future[FetchResult]:
        """Fetches every newer message, whatever the limit (call it when back online)."""
        handle = self.handle
        return self._fetch(lambda fn, key: lib.parley_sync_view_fetch_all_next(handle, fn, key))

    def reset_viewpoint(self, viewpoint: int) -> None:
        """Starts over from `viewpoint` (ms, or NEWEST_VIEWPOINT): a CLEAR on each list first."""
        _native.check(lib.parley_sync_view_reset_viewpoint(self.handle, viewpoint))

    @property
    def viewpoint(self) -> int:
        out = ctypes.c_int64(0)
        _native.check(lib.parley_sync_view_viewpoint(self.handle, ctypes.byref(out)))
        return out.value

    def messages(self, which: SyncList) -> List[Message]:
        """One list as the actions delivered so far left it."""
        return self._list(lib.parley_sync_view_messages, int(which))

    @property
    def succeeded_messages(self) -> List[Message]:
        return self.messages(SyncList.SUCCEEDED)

    @property
    def pending_messages(self) -> List[Message]:
        return self.messages(SyncList.PENDING)

    @property
    def failed_messages(self) -> List[Message]:
        return self.messages(SyncList.FAILED)
