"""The event categories the event handler receives (the library's own list:
:func:`parley.event_categories`), the connection events, and the values the async client's
event iterators yield."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Union

from .errors import ParleyError


class _NamedByValue(str, enum.Enum):
    """A str enum whose str() is its value (the wire name), as handlers print or compare it."""

    def __str__(self) -> str:
        return str(self.value)


class EventCategory(_NamedByValue):
    """A category of event. It compares equal to its name, so handlers may use either."""

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
    #: A poll changed or a user voted (payload ``{"poll"}``, with the recipient's own
    #: ``voted_option_ids``); ``POLL_DELETED``'s payload names ``poll_id``.
    POLL_UPDATED = "poll_updated"
    POLL_VOTED = "poll_voted"
    POLL_DELETED = "poll_deleted"
    MESSAGE_PENDING = "message_pending"
    MESSAGE_SENT = "message_sent"
    MESSAGE_FAILED = "message_failed"
    MESSAGE_CANCELED = "message_canceled"
    MESSAGE_RESEND_STARTED = "message_resend_started"
    CACHE_UNAVAILABLE = "cache_unavailable"
    #: The cache file was damaged and replaced. Payload ``{"reason", "moved_to",
    #: "restored_req_ids", "restored_from_journal", "lost", "unreadable"?,
    #: "journal_unreadable"?, "lost_unknown"}``: the unsent messages carried over (from the
    #: file, or from the outbox journal ``<file>.outbox`` when the file could not give them
    #: back), those lost (also reported as ``message_failed``), and ``lost_unknown`` true
    #: only when neither the file nor the journal could list them all.
    CACHE_RECOVERED = "cache_recovered"
    CHANNEL_CHANGELOG = "channel_changelog"
    CHANNEL_CHANGELOG_DELETED = "channel_changelog_deleted"
    MESSAGE_CHANGELOG = "message_changelog"
    MESSAGE_CHANGELOG_DELETED = "message_changelog_deleted"
    #: The catch-up's poll changelog changed the poll a cached message carries (payload: the message).
    POLL_CHANGELOG = "poll_changelog"
    #: The stream resumed past the server's retention: events were lost. Payload
    #: ``{"reason", "channel_urls"}``: the channels the changelogs found changed meanwhile.
    RESYNC = "resync"

    @property
    def source(self) -> str:
        """"server" (the real-time stream), "sync" (the changelog catch-up) or "local" (sending, the cache)."""
        if self in _LOCAL:
            return "local"
        if self in _SYNC:
            return "sync"
        return "server"


_LOCAL = frozenset({EventCategory.MESSAGE_PENDING, EventCategory.MESSAGE_SENT, EventCategory.MESSAGE_FAILED,
                    EventCategory.MESSAGE_CANCELED, EventCategory.MESSAGE_RESEND_STARTED,
                    EventCategory.CACHE_UNAVAILABLE, EventCategory.CACHE_RECOVERED})
_SYNC = frozenset({EventCategory.CHANNEL_CHANGELOG, EventCategory.CHANNEL_CHANGELOG_DELETED,
                   EventCategory.MESSAGE_CHANGELOG, EventCategory.MESSAGE_CHANGELOG_DELETED, EventCategory.POLL_CHANGELOG,
                   EventCategory.RESYNC})


class ConnectionEventKind(_NamedByValue):
    """A change of the connection (``PARLEY_CONNECTION_*``). It compares equal to its name, so
    connection handlers may use either."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECT_STARTED = "reconnect_started"
    RECONNECT_SUCCEEDED = "reconnect_succeeded"
    RECONNECT_FAILED = "reconnect_failed"
    DISCONNECTED = "disconnected"
    SESSION_TOKEN_REQUIRED = "session_token_required"


@dataclass(frozen=True)
class ConnectionEvent:
    """What :meth:`parley.AsyncClient.connection_events` yields: the change and why, for
    ``RECONNECT_STARTED``, ``RECONNECT_FAILED`` and a ``DISCONNECTED`` the application did
    not ask for (the stream stopped for good); None otherwise."""

    #: A :class:`ConnectionEventKind`, or the number (as a str) of one this binding does not know.
    kind: Union[ConnectionEventKind, str]
    error: Optional[ParleyError] = None


@dataclass(frozen=True)
class ClientEvent:
    """What :meth:`parley.AsyncClient.events` yields: the arguments of the event handler
    (:meth:`parley.Client.set_event_handler`). ``category`` is an :class:`EventCategory`, or
    the plain name (a str) of a category the library does not know, as a newer server may
    stream; ``payload`` is the event's JSON object, whose keys depend on the category
    (docs/C-API.md, "Connecting and the event stream")."""

    category: Union[EventCategory, str]
    channel_url: str
    payload: Any
