"""Collections: live views over the cache (include/parley/group_channel_collection.h).

A :class:`GroupChannelCollection` lists the connected user's group channels for a
:class:`GroupChannelListQuery`, page by page, and reports every change to the loaded part
as added / updated / deleted, each with a :class:`ChannelContext` saying why. A deletion
carries both the channels' URLs and the channels as the view last held them.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import enum
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, TypedDict, Union

from . import _callbacks, _native
from ._collection_base import ErrorHandler, NativeCollection, dataclass_document, options_document
from ._native import CHANNELS_EVENT_FN
from .errors import ParleyError, error_for
from .freshness import FreshnessHandler, Page, origin_of
from .objects import Channel

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib


class GroupChannelListOrder(str, enum.Enum):
    CHRONOLOGICAL = "chronological"
    LATEST_LAST_MESSAGE = "latest_last_message"
    CHANNEL_NAME_ALPHABETICAL = "channel_name_alphabetical"
    METADATA_VALUE_ALPHABETICAL = "metadata_value_alphabetical"


class MemberStateFilter(str, enum.Enum):
    ALL = "all"
    JOINED_ONLY = "joined_only"
    INVITED_ONLY = "invited_only"
    INVITED_BY_FRIEND = "invited_by_friend"
    INVITED_BY_NON_FRIEND = "invited_by_non_friend"


class HiddenStateFilter(str, enum.Enum):
    UNHIDDEN_ONLY = "unhidden_only"
    HIDDEN_ONLY = "hidden_only"
    HIDDEN_ALLOW_AUTO_UNHIDE = "hidden_allow_auto_unhide"
    HIDDEN_PREVENT_AUTO_UNHIDE = "hidden_prevent_auto_unhide"
    ALL = "all"


class SuperChannelFilter(str, enum.Enum):
    ALL = "all"
    SUPER = "super"
    NONSUPER = "nonsuper"


class PublicChannelFilter(str, enum.Enum):
    ALL = "all"
    PUBLIC = "public"
    PRIVATE = "private"


class UnreadChannelFilter(str, enum.Enum):
    ALL = "all"
    UNREAD_MESSAGE = "unread_message"


class UserIdsQueryType(str, enum.Enum):
    AND = "and"
    OR = "or"


class CollectionEventSource(str, enum.Enum):
    """Why a collection reported a change (the C ``PARLEY_SOURCE_*`` by name). The members
    are generated from the library's Swift table (docs/C-API.md, "Event sources", says what
    each one reports): ``MESSAGE_SENT`` confirms this client's own send, ``MENTION`` a
    message mentioning the user, ``CHANNEL_MEMBER_COUNT_CHANGED`` another user's membership
    change in a channel collection, ``CHANNEL_REFRESH`` a message view's channel refresh."""

    # BEGIN GENERATED from CollectionEventSource.allCases: do not edit (docs/C-API.md, "Event sources")
    MESSAGE_RECEIVED = "message_received"
    MESSAGE_UPDATED = "message_updated"
    MESSAGE_DELETED = "message_deleted"
    MENTION = "mention"
    REACTION_UPDATED = "reaction_updated"
    THREAD_INFO_UPDATED = "thread_info_updated"
    READ_STATUS = "read_status"
    DELIVERY_STATUS = "delivery_status"
    TYPING_STATUS = "typing_status"
    USER_MUTED = "user_muted"
    USER_UNMUTED = "user_unmuted"
    USER_BANNED = "user_banned"
    USER_UNBANNED = "user_unbanned"
    CHANNEL_FROZEN = "channel_frozen"
    CHANNEL_UNFROZEN = "channel_unfrozen"
    CHANNEL_CHANGED = "channel_changed"
    CHANNEL_DELETED = "channel_deleted"
    CHANNEL_HIDDEN = "channel_hidden"
    METADATA_CREATED = "metadata_created"
    METADATA_UPDATED = "metadata_updated"
    METADATA_DELETED = "metadata_deleted"
    METACOUNTER_CREATED = "metacounter_created"
    METACOUNTER_UPDATED = "metacounter_updated"
    METACOUNTER_DELETED = "metacounter_deleted"
    OPERATOR_UPDATED = "operator_updated"
    INVITATION_RECEIVED = "invitation_received"
    INVITATION_DECLINED = "invitation_declined"
    USER_JOINED = "user_joined"
    USER_LEFT = "user_left"
    PINNED_MESSAGE_UPDATED = "pinned_message_updated"
    POLL_UPDATED = "poll_updated"
    POLL_VOTED = "poll_voted"
    POLL_DELETED = "poll_deleted"
    CHANNEL_CHANGELOG = "channel_changelog"
    MESSAGE_CHANGELOG = "message_changelog"
    MESSAGE_FILL = "message_fill"
    LOCAL_OPERATION = "local_operation"
    LOCAL_SEND = "local_send"
    LOCAL_CACHE = "local_cache"
    CACHE_LOAD = "cache_load"
    API_LOAD = "api_load"
    UNKNOWN_EVENT = "unknown_event"
    MESSAGE_SENT = "message_sent"
    CHANNEL_MEMBER_COUNT_CHANGED = "channel_member_count_changed"
    CHANNEL_REFRESH = "channel_refresh"
    POLL_CHANGELOG = "poll_changelog"
    # END GENERATED


@dataclass
class GroupChannelListQuery:
    """Which of the user's channels a collection lists, and in which order (defaults as
    the reference SDK: newest activity first, channels without a message left out, frozen
    channels included)."""

    order: GroupChannelListOrder = GroupChannelListOrder.LATEST_LAST_MESSAGE
    metadata_order_key: Optional[str] = None
    include_empty: bool = False
    include_frozen: bool = True
    include_member_list: bool = True
    include_metadata: bool = True
    member_state_filter: MemberStateFilter = MemberStateFilter.ALL
    hidden_state_filter: HiddenStateFilter = HiddenStateFilter.UNHIDDEN_ONLY
    custom_types: Optional[List[str]] = None
    custom_type_starts_with: Optional[str] = None
    channel_name_contains: Optional[str] = None
    channel_urls: Optional[List[str]] = None
    user_ids_exact_filter: Optional[List[str]] = None
    user_ids_include_filter: Optional[List[str]] = None
    user_ids_include_query_type: UserIdsQueryType = UserIdsQueryType.AND
    super_channel_filter: SuperChannelFilter = SuperChannelFilter.ALL
    public_channel_filter: PublicChannelFilter = PublicChannelFilter.ALL
    unread_channel_filter: UnreadChannelFilter = UnreadChannelFilter.ALL
    limit: int = 20

    def to_json(self) -> Dict[str, Any]:
        """The query document of ``parley_group_channel_collection_create`` (None fields left out)."""
        return dataclass_document(self)


class GroupChannelListOptions(TypedDict, total=False):
    """The fields of :class:`GroupChannelListQuery` as keyword options of
    :meth:`parley.Client.group_channel_collection` (an enum field also takes its value's string)."""

    order: Union[GroupChannelListOrder, str]
    metadata_order_key: Optional[str]
    include_empty: bool
    include_frozen: bool
    include_member_list: bool
    include_metadata: bool
    member_state_filter: Union[MemberStateFilter, str]
    hidden_state_filter: Union[HiddenStateFilter, str]
    custom_types: Optional[List[str]]
    custom_type_starts_with: Optional[str]
    channel_name_contains: Optional[str]
    channel_urls: Optional[List[str]]
    user_ids_exact_filter: Optional[List[str]]
    user_ids_include_filter: Optional[List[str]]
    user_ids_include_query_type: Union[UserIdsQueryType, str]
    super_channel_filter: Union[SuperChannelFilter, str]
    public_channel_filter: Union[PublicChannelFilter, str]
    unread_channel_filter: Union[UnreadChannelFilter, str]
    limit: int


@dataclass(frozen=True)
class ChannelContext:
    """Why a change was reported: its source and, for real-time events, the category (for
    local operations, the operation's name)."""

    source: CollectionEventSource
    detail: str = ""


class ChangeKind(str, enum.Enum):
    ADDED = "added"
    UPDATED = "updated"
    DELETED = "deleted"


@dataclass(frozen=True)
class ChannelChange:
    """One report of a collection: the channels (for deleted, as the view last held them)
    and, for deleted, also their URLs (same order)."""

    kind: ChangeKind
    context: ChannelContext
    channels: List[Channel] = field(default_factory=list)
    channel_urls: List[str] = field(default_factory=list)


ChannelsHandler = Callable[[ChannelContext, List[Channel]], None]
DeletedHandler = Callable[[ChannelContext, List[str]], None]


def event_source(name: Optional[bytes]) -> CollectionEventSource:
    """The source a C event names (``source_name``); UNKNOWN_EVENT for one this binding does not know."""
    try:
        return CollectionEventSource((name or b"").decode("utf-8"))
    except ValueError:
        return CollectionEventSource.UNKNOWN_EVENT


def _context(pointer: Any) -> ChannelContext:
    c = pointer.contents
    return ChannelContext(event_source(c.source_name), (c.detail or b"").decode("utf-8"))


def _changes(kind: ChangeKind) -> Any:
    """The trampoline of one kind of change: it hands the view's `_receive` a :class:`ChannelChange`
    (a deletion comes through ``deleted_channels``: the channels, their URLs taken from them)."""

    def receive(user_data: Optional[int], context: Any, text: Optional[bytes]) -> None:
        target = _callbacks._peek(user_data)
        if target is None:
            return
        channels = json.loads((text or b"[]").decode("utf-8"))
        urls = [channel["channel_url"] for channel in channels] if kind is ChangeKind.DELETED else []
        _callbacks._run(target, ChannelChange(kind, _context(context), channels=channels, channel_urls=urls))

    return CHANNELS_EVENT_FN(receive)


_added_trampoline = _changes(ChangeKind.ADDED)
_updated_trampoline = _changes(ChangeKind.UPDATED)
_deleted_trampoline = _changes(ChangeKind.DELETED)


def collection_sources() -> List[Dict[str, Any]]:
    """The table of sources: ``[{"code", "name"}, ...]``."""
    out = ctypes.c_void_p()
    _native.check(lib.parley_collection_sources(ctypes.byref(out)))
    table: List[Dict[str, Any]] = _native.take_json(out)
    return table


def make_query(query: Union[None, GroupChannelListQuery, Mapping[str, Any]], options: Mapping[str, Any]) -> Dict[str, Any]:
    """A query document from a dataclass, a mapping, keyword options or a mix (options win)."""
    return options_document(query, GroupChannelListQuery, options)


class GroupChannelCollection(NativeCollection[ChannelChange]):
    """The live list of the user's channels for one query. Create it with
    :meth:`parley.Client.group_channel_collection` (``client.group_channel_collection(limit=30)``);
    dispose it with :meth:`dispose` or a ``with`` block. Callbacks run on the client's
    callback context, never after :meth:`dispose` returned."""

    _dispose_function = lib.parley_group_channel_collection_dispose
    _freshness_function = lib.parley_group_channel_collection_freshness

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Not for applications: :meth:`parley.Client.group_channel_collection` creates the
        collection (the arguments here are the binding's own and may change)."""
        super().__init__()
        self._setup(*args, **kwargs)

    @classmethod
    def _create(cls, client: Client, query: Mapping[str, Any], on_added: Optional[ChannelsHandler] = None,
                on_updated: Optional[ChannelsHandler] = None, on_deleted: Optional[DeletedHandler] = None,
                on_error: Optional[ErrorHandler] = None,
                on_deleted_channels: Optional[ChannelsHandler] = None,
                on_freshness_changed: Optional[FreshnessHandler] = None) -> GroupChannelCollection:
        """Creates the library's collection (what :meth:`parley.Client.group_channel_collection` calls)."""
        return cls(client, query, on_added, on_updated, on_deleted, on_error, on_deleted_channels, on_freshness_changed)

    def _setup(self, client: Client, query: Mapping[str, Any], on_added: Optional[ChannelsHandler] = None,
               on_updated: Optional[ChannelsHandler] = None, on_deleted: Optional[DeletedHandler] = None,
               on_error: Optional[ErrorHandler] = None, on_deleted_channels: Optional[ChannelsHandler] = None,
               on_freshness_changed: Optional[FreshnessHandler] = None) -> None:
        self.on_added = on_added
        self.on_updated = on_updated
        self.on_deleted = on_deleted
        self.on_deleted_channels = on_deleted_channels
        handler = _native.CGroupChannelCollectionHandler(
            version=_native.GROUP_CHANNEL_COLLECTION_HANDLER_VERSION, added=_added_trampoline, updated=_updated_trampoline,
            deleted_channels=_deleted_trampoline)
        self._open(client, on_error, on_freshness_changed, lib.parley_group_channel_collection_create, handler, document=query)

    def _deliver(self, change: ChannelChange) -> None:
        if change.kind is ChangeKind.DELETED:
            if self.on_deleted is not None:
                self.on_deleted(change.context, change.channel_urls)
            if self.on_deleted_channels is not None:
                self.on_deleted_channels(change.context, change.channels)
        else:
            handler = self.on_added if change.kind is ChangeKind.ADDED else self.on_updated
            if handler is not None:
                handler(change.context, change.channels)

    def load_more_with_callback(self, callback: Callable[[Optional[Page[Channel]], Optional[ParleyError]], None]) -> None:
        """Loads the next page; `callback(channels, error)` runs once on the callback context
        (`channels` a :class:`parley.Page`: its ``origin`` says whether the cache or the server gave it)."""
        handle = self.handle

        def complete(result_json: Optional[str], error: Optional[_native.ErrorDetails]) -> None:
            if error is not None:
                callback(None, error_for(*error))
            else:
                origin = origin_of(lib.parley_group_channel_collection_last_page_origin, handle)
                callback(Page(json.loads(result_json or "[]"), origin), None)

        _callbacks.start(complete, lambda key: lib.parley_group_channel_collection_load_more(
            handle, _callbacks.result_trampoline, key))

    def load_more(self) -> concurrent.futures.Future[Page[Channel]]:
        """Loads the next page (the first call: the first page): a Future of the channels it added,
        a :class:`parley.Page` (a list) whose ``origin`` says whether the cache or the server gave it."""
        future: concurrent.futures.Future[Page[Channel]] = concurrent.futures.Future()
        self.load_more_with_callback(lambda channels, error: _callbacks.settle(future, channels, error))
        return future

    @property
    def has_more(self) -> bool:
        """True while channels follow the loaded ones (as of the callbacks delivered so far)."""
        return self._flag(lib.parley_group_channel_collection_has_more)

    @property
    def channels(self) -> List[Channel]:
        """The loaded channels in the query's order (as of the callbacks delivered so far)."""
        return self._list(lib.parley_group_channel_collection_channels)

    @property
    def channel_urls(self) -> List[str]:
        return [channel["channel_url"] for channel in self.channels]
