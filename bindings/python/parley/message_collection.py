"""The chat view of one channel (include/parley/message_collection.h).

A :class:`MessageCollection` shows a channel's messages around a starting point, pages
both ways, and reports every change to what it shows as a :class:`MessageChange`
(added / updated / deleted messages, channel updated / deleted, huge gap detected), each
with a :class:`MessageContext` saying why and in which sending state.
"""
from __future__ import annotations

import concurrent.futures
import enum
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, TypedDict, Union

from . import _callbacks, _native
from ._collection_base import ErrorHandler, NativeCollection, dataclass_document, options_document
from ._native import MESSAGE_EVENT_FN
from .channel_collection import CollectionEventSource, event_source
from .errors import error_for
from .freshness import FreshnessHandler, Page, PageOrigin, origin_of
from .objects import Channel, FileMessageParams, Message, UserMessageParams

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .client import Client

lib = _native.lib

NEWEST = 2**63 - 1
"""The starting point meaning "the newest end" (the default)."""


class MessageTypeFilter(str, enum.Enum):
    ALL = "all"
    USER = "user"
    FILE = "file"
    ADMIN = "admin"


class ReplyType(str, enum.Enum):
    NONE = "none"
    ALL = "all"
    ONLY_REPLY_TO_CHANNEL = "only_reply_to_channel"


class SendingStatus(enum.IntEnum):
    """The sending state of the messages a change carries (``PARLEY_SENDING_STATUS_*``)."""

    NONE = 0
    PENDING = 1
    FAILED = 2
    CANCELED = 3
    SUCCEEDED = 4


class MessageChangeKind(enum.IntEnum):
    """What a change reports (``PARLEY_MESSAGE_EVENT_*``)."""

    ADDED = 1
    UPDATED = 2
    DELETED = 3
    CHANNEL_UPDATED = 4
    CHANNEL_DELETED = 5
    HUGE_GAP_DETECTED = 6


@dataclass
class MessageListParams:
    """Which messages the view shows and how many a page holds (defaults as the reference
    SDK's message list parameters)."""

    previous_result_size: int = 20
    next_result_size: int = 0
    is_inclusive: bool = False
    reverse: bool = False
    message_type_filter: MessageTypeFilter = MessageTypeFilter.ALL
    custom_types: Optional[List[str]] = None
    sender_user_ids: Optional[List[str]] = None
    reply_type: ReplyType = ReplyType.NONE
    include_thread_info: bool = False
    include_parent_message_info: bool = False
    include_reactions: bool = False
    include_meta_array: bool = False
    huge_gap_threshold: int = 300

    def to_json(self) -> Dict[str, Any]:
        """The params document of ``parley_message_collection_create`` (None fields left out)."""
        return dataclass_document(self)


class MessageListOptions(TypedDict, total=False):
    """The fields of :class:`MessageListParams` as keyword options of
    :meth:`parley.Client.message_collection` (an enum field also takes its value's string)."""

    previous_result_size: int
    next_result_size: int
    is_inclusive: bool
    reverse: bool
    message_type_filter: Union[MessageTypeFilter, str]
    custom_types: Optional[List[str]]
    sender_user_ids: Optional[List[str]]
    reply_type: Union[ReplyType, str]
    include_thread_info: bool
    include_parent_message_info: bool
    include_reactions: bool
    include_meta_array: bool
    huge_gap_threshold: int


@dataclass(frozen=True)
class MessageContext:
    """Why a change was reported: its source, the real-time category (or operation), and
    the sending state of the messages it carries."""

    source: CollectionEventSource
    detail: str = ""
    sending_status: SendingStatus = SendingStatus.NONE


@dataclass(frozen=True)
class MessageChange:
    """One report of a message collection: the channel as cached (None when it is not, or gone)
    and the messages (none for channel events)."""

    kind: MessageChangeKind
    context: MessageContext
    channel: Optional[Channel] = None
    messages: List[Message] = field(default_factory=list)


MessagesHandler = Callable[[MessageContext, Optional[Channel], List[Message]], None]
ChannelHandler = Callable[[MessageContext, Optional[Channel]], None]
ChannelDeletedHandler = Callable[[MessageContext, str], None]
HugeGapHandler = Callable[[], None]
#: ``progress(req_id, sent, total)`` of a file upload.
ProgressHandler = Callable[[str, int, int], None]


def _event(user_data: Optional[int], event: Any) -> None:
    target = _callbacks._peek(user_data)
    if target is None:
        return
    e = event.contents
    context = MessageContext(event_source(e.source_name), (e.detail or b"").decode("utf-8"), SendingStatus(e.sending_status))
    change = MessageChange(
        MessageChangeKind(e.kind), context, json.loads((e.channel_json or b"null").decode("utf-8")),
        json.loads((e.messages_json or b"[]").decode("utf-8")))
    _callbacks._run(target, change)


_event_trampoline = MESSAGE_EVENT_FN(_event)


def make_params(params: Union[None, MessageListParams, Mapping[str, Any]], options: Mapping[str, Any]) -> Dict[str, Any]:
    """A params document from a dataclass, a mapping, keyword options or a mix (options win)."""
    return options_document(params, MessageListParams, options)


def _future_callback(future: concurrent.futures.Future[Page[Message]], handle: Optional[int]) -> _callbacks.Completion:
    def complete(result_json: Optional[str], error: Optional[_native.ErrorDetails]) -> None:
        if error is not None:
            future.set_exception(error_for(*error))
        else:
            # Read while the completion runs: the origin of this result.
            origin: Optional[PageOrigin] = origin_of(lib.parley_message_collection_last_page_origin, handle)
            future.set_result(Page(json.loads(result_json or "[]"), origin))
    return complete


class MessageCollection(NativeCollection[MessageChange]):
    """The live chat view of one channel. Create it with :meth:`parley.Client.message_collection`
    (``client.message_collection("general", previous_result_size=30)``), :meth:`start` it,
    page with :meth:`load_previous` / :meth:`load_next`, and dispose it with :meth:`dispose`
    or a ``with`` block. Callbacks run on the client's callback context, never after
    :meth:`dispose` returned."""

    _dispose_function = lib.parley_message_collection_dispose
    _freshness_function = lib.parley_message_collection_freshness

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Not for applications: :meth:`parley.Client.message_collection` creates the view (the
        arguments here are the binding's own and may change)."""
        super().__init__()
        self._setup(*args, **kwargs)

    @classmethod
    def _create(cls, client: Client, channel_url: str, starting_point: int, params: Mapping[str, Any],
                on_added: Optional[MessagesHandler] = None, on_updated: Optional[MessagesHandler] = None,
                on_deleted: Optional[MessagesHandler] = None, on_channel_updated: Optional[ChannelHandler] = None,
                on_channel_deleted: Optional[ChannelDeletedHandler] = None,
                on_huge_gap_detected: Optional[HugeGapHandler] = None,
                on_error: Optional[ErrorHandler] = None,
                on_freshness_changed: Optional[FreshnessHandler] = None) -> MessageCollection:
        """Creates the library's view (what :meth:`parley.Client.message_collection` calls)."""
        return cls(client, channel_url, starting_point, params, on_added, on_updated, on_deleted, on_channel_updated,
                   on_channel_deleted, on_huge_gap_detected, on_error, on_freshness_changed)

    def _setup(self, client: Client, channel_url: str, starting_point: int, params: Mapping[str, Any],
               on_added: Optional[MessagesHandler] = None, on_updated: Optional[MessagesHandler] = None,
               on_deleted: Optional[MessagesHandler] = None, on_channel_updated: Optional[ChannelHandler] = None,
               on_channel_deleted: Optional[ChannelDeletedHandler] = None,
               on_huge_gap_detected: Optional[HugeGapHandler] = None, on_error: Optional[ErrorHandler] = None,
               on_freshness_changed: Optional[FreshnessHandler] = None) -> None:
        self.channel_url = channel_url
        self.on_added = on_added
        self.on_updated = on_updated
        self.on_deleted = on_deleted
        self.on_channel_updated = on_channel_updated
        self.on_channel_deleted = on_channel_deleted
        self.on_huge_gap_detected = on_huge_gap_detected
        handler = _native.CMessageCollectionHandler(version=_native.MESSAGE_COLLECTION_HANDLER_VERSION, event=_event_trampoline)
        self._open(client, on_error, on_freshness_changed, lib.parley_message_collection_create, handler,
                   channel_url.encode("utf-8"), starting_point, document=params)

    def _deliver(self, change: MessageChange) -> None:
        kind = change.kind
        if kind in (MessageChangeKind.ADDED, MessageChangeKind.UPDATED, MessageChangeKind.DELETED):
            handler = {MessageChangeKind.ADDED: self.on_added, MessageChangeKind.UPDATED: self.on_updated,
                       MessageChangeKind.DELETED: self.on_deleted}[kind]
            if handler is not None:
                handler(change.context, change.channel, change.messages)
        elif kind is MessageChangeKind.CHANNEL_UPDATED and self.on_channel_updated is not None:
            self.on_channel_updated(change.context, change.channel)
        elif kind is MessageChangeKind.CHANNEL_DELETED and self.on_channel_deleted is not None:
            self.on_channel_deleted(change.context, self.channel_url)
        elif kind is MessageChangeKind.HUGE_GAP_DETECTED and self.on_huge_gap_detected is not None:
            self.on_huge_gap_detected()

    def start(self) -> Tuple[concurrent.futures.Future[Page[Message]], concurrent.futures.Future[Page[Message]]]:
        """Starts the view: two futures, the cache's list (at once) and the server's list that
        replaces it (raises NetworkError offline; the view then keeps the cached list). Each is a
        :class:`parley.Page`: ``origin`` is ``CACHE`` for the first, ``SERVER`` for the second."""
        cache_future: concurrent.futures.Future[Page[Message]] = concurrent.futures.Future()
        api_future: concurrent.futures.Future[Page[Message]] = concurrent.futures.Future()
        handle = self.handle
        # Both completions share one user_data; the cache's always comes first.
        results = [_future_callback(cache_future, handle), _future_callback(api_future, handle)]

        def complete(result_json: Optional[str], error: Optional[_native.ErrorDetails]) -> None:
            results.pop(0)(result_json, error)

        key = _callbacks.register(complete, persistent=True)
        api_future.add_done_callback(lambda _: _callbacks.unregister(key))
        _callbacks.calling(key, lambda user_data: lib.parley_message_collection_start(handle, _START_FN, _START_FN, user_data))
        return cache_future, api_future

    def _load(self, function: Any) -> concurrent.futures.Future[Page[Message]]:
        future: concurrent.futures.Future[Page[Message]] = concurrent.futures.Future()
        handle = self.handle
        _callbacks.start(_future_callback(future, handle), lambda key: function(handle, _callbacks.result_trampoline, key))
        return future

    def load_previous(self) -> concurrent.futures.Future[Page[Message]]:
        """Loads older messages: a Future of those it added (in the view's order), a
        :class:`parley.Page` whose ``origin`` says whether the cache or the server gave them."""
        return self._load(lib.parley_message_collection_load_previous)

    def load_next(self) -> concurrent.futures.Future[Page[Message]]:
        """Loads newer messages: a Future of those it added (a :class:`parley.Page`)."""
        return self._load(lib.parley_message_collection_load_next)

    @property
    def has_previous(self) -> bool:
        return self._flag(lib.parley_message_collection_has_previous)

    @property
    def has_next(self) -> bool:
        return self._flag(lib.parley_message_collection_has_next)

    @property
    def messages(self) -> List[Message]:
        """The shown messages: the server's in order, then pending and failed ones (as of the
        callbacks delivered so far)."""
        return self._list(lib.parley_message_collection_messages)

    @property
    def succeeded_messages(self) -> List[Message]:
        return [m for m in self.messages if "sending_status" not in m]

    @property
    def pending_messages(self) -> List[Message]:
        return [m for m in self.messages if m.get("sending_status") == "pending"]

    @property
    def failed_messages(self) -> List[Message]:
        return [m for m in self.messages if m.get("sending_status") == "failed"]

    # -- sending through the view ------------------------------------------------------

    def send_user_message(
        self, message: Optional[str] = None, **params: Unpack[UserMessageParams],
    ) -> Tuple[Message, concurrent.futures.Future[Message]]:
        """Sends a user message into this channel; it shows up as added (pending) at once."""
        return self._client.send_user_message(self.channel_url, message, **params)

    def send_file_message(
        self, progress: Optional[ProgressHandler] = None, **params: Unpack[FileMessageParams],
    ) -> Tuple[Message, concurrent.futures.Future[Message]]:
        """Sends a file message into this channel (as :meth:`parley.Client.send_file_message`)."""
        return self._client.send_file_message(self.channel_url, progress, **params)

    def resend_message(self, req_id: str) -> concurrent.futures.Future[Message]:
        """Resends a failed message (same req_id); the future gives the server's message."""
        return self._client.resend_message(req_id)

    def cancel_message(self, req_id: str) -> None:
        """Cancels a pending message not on the wire yet, or a failed one: the view reports it
        once, as ``updated`` with ``SendingStatus.CANCELED`` (no ``deleted``), already gone
        from :attr:`messages`."""
        self._client.cancel_message(req_id)

    def remove_failed_messages(self) -> List[str]:
        """Removes the channel's failed messages (their req_ids): each is reported as for
        :meth:`cancel_message`."""
        return self._client.remove_failed_messages(self.channel_url)


def _start_result(user_data: Optional[int], error: Any, result_json: Optional[bytes]) -> None:
    # Like _callbacks.result_trampoline, but the callable stays registered for the second call.
    _callbacks.deliver_result(_callbacks._peek(user_data), error, result_json)


_START_FN = _native.RESULT_FN(_start_result)
