"""Parley: cached group channels and messages kept in sync with a server (ctypes binding)."""
from .aio import (
    AsyncClient, AsyncGroupChannelCollection, AsyncMessageSearch, AsyncQuery, AsyncMessageCollection, AsyncSyncView, EventStream,
    PendingSend, Send,
)
from .channel_collection import (
    ChangeKind, ChannelChange, ChannelContext, CollectionEventSource, GroupChannelCollection, GroupChannelListOptions,
    GroupChannelListOrder, GroupChannelListQuery, HiddenStateFilter, MemberStateFilter, PublicChannelFilter,
    SuperChannelFilter, UnreadChannelFilter, UserIdsQueryType, collection_sources,
)
from .client import (
    LOG_DEBUG, LOG_ERROR, LOG_INFO, LOG_OFF, LOG_TRACE, LOG_WARNING, TRACE, Client, DispatchGroup, configuration_keys, configure_runtime, event_categories, runtime_info, library_path,
    log_level_for, operations, version,
)
from .events import ClientEvent, ConnectionEvent, ConnectionEventKind, EventCategory
from .objects import (
    BasicUser, CachedMessagePage, Channel, ChannelChangelogPage, ChannelListPage, DeletedMessage, FileInfo,
    FileMessageParams, Member, MemberListPage, Message, MessageChangelogPage, MessageListPage, MetaArrayItem,
    ParentMessageInfo, Poll, PollChangelogPage, PollListPage, PollOption, PollVoters, DeletedPoll, Reaction, ThreadInfo,
    Thumbnail, ThumbnailSize, User, UserListPage, UserMessageParams,
)
from .query import QUERY_KINDS, Query
from .search import MessageSearch, RelevanceWindow, SearchChange, SearchChangeKind, SearchOrder, SearchResult
from .sync_view import (
    NEWEST_VIEWPOINT, FetchResult, SyncAction, SyncActionKind, SyncDirection, SyncList, SyncView, SyncViewOptions,
    SyncViewOverrides,
)
from .message_collection import (
    NEWEST, MessageChange, MessageChangeKind, MessageCollection, MessageContext, MessageListOptions, MessageListParams,
    MessageTypeFilter, ReplyType, SendingStatus,
)
from .freshness import Freshness, FreshnessHandler, Page, PageOrigin
from .metrics import ConnectionStateName, Metrics
from .errors import (
    CacheError, CacheKeyError, Cancelled, Forbidden, InternalError, InvalidArgument, InvalidHandle, InvalidJSON, InvalidState,
    IOFailure, LimitExceeded, NetworkError, NoMemory, NotFound, ParleyError, ProtocolError, ServerError, Timeout,
    TLSError, Unauthorized, error_for,
)

__all__ = [
    "AsyncGroupChannelCollection", "ChangeKind", "ChannelChange", "ChannelContext", "CollectionEventSource",
    "GroupChannelCollection", "GroupChannelListOrder", "GroupChannelListQuery", "HiddenStateFilter",
    "MemberStateFilter", "PublicChannelFilter", "SuperChannelFilter", "UnreadChannelFilter", "UserIdsQueryType",
    "collection_sources", "NEWEST", "MessageChange", "MessageChangeKind", "MessageCollection", "MessageContext",
    "MessageListParams", "MessageTypeFilter", "ReplyType", "SendingStatus", "AsyncMessageCollection",
    "NEWEST_VIEWPOINT", "FetchResult", "SyncAction", "SyncActionKind", "SyncDirection", "SyncList", "SyncView",
    "SyncViewOptions", "AsyncSyncView", "AsyncClient", "AsyncQuery", "Query", "QUERY_KINDS", "Client", "DispatchGroup", "EventCategory", "configuration_keys", "configure_runtime", "event_categories", "runtime_info", "library_path", "operations", "version", "ParleyError", "error_for",
    "LOG_OFF", "LOG_ERROR", "LOG_WARNING", "LOG_INFO", "LOG_DEBUG", "LOG_TRACE", "TRACE", "log_level_for",
    "ClientEvent", "ConnectionEvent", "ConnectionEventKind", "EventStream", "PendingSend", "Send",
    "Freshness", "FreshnessHandler", "Page", "PageOrigin", "ConnectionStateName", "Metrics",
    "CacheError", "CacheKeyError", "Cancelled", "Forbidden", "InternalError", "InvalidArgument", "InvalidHandle", "InvalidJSON",
    "InvalidState", "IOFailure", "LimitExceeded", "NetworkError", "NoMemory", "NotFound", "ProtocolError",
    "ServerError", "Timeout", "TLSError", "Unauthorized",
    # The protocol's objects and the options, for type checkers (parley.objects; docs/PROTOCOL.md).
    "BasicUser", "CachedMessagePage", "Channel", "ChannelChangelogPage", "ChannelListPage", "DeletedMessage", "FileInfo",
    "FileMessageParams", "Member", "MemberListPage", "Message", "MessageChangelogPage", "MessageListPage",
    "MetaArrayItem", "ParentMessageInfo", "Poll", "PollOption", "PollListPage", "PollVoters", "DeletedPoll",
    "PollChangelogPage", "Reaction", "ThreadInfo", "Thumbnail", "ThumbnailSize", "User", "UserListPage",
    "UserMessageParams", "GroupChannelListOptions", "MessageListOptions", "SyncViewOverrides",
    "MessageSearch", "AsyncMessageSearch", "RelevanceWindow", "SearchChange", "SearchChangeKind", "SearchOrder", "SearchResult",
]
# The loaded library's version: the package is built with the same number (setup.py reads it from
# include/parley/common.h), and bindings/python/tests/test_library.py checks that they agree.
__version__ = version()
