"""The event categories the event handler receives (the library's own list:
:func:`parley.event_categories`)."""
from __future__ import annotations

import enum


class EventCategory(str, enum.Enum):
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
    #: The stream resumed past the server's retention: events were lost. Payload
    #: ``{"reason", "channel_urls"}``: the channels the changelogs found changed meanwhile.
    RESYNC = "resync"

    def __str__(self) -> str:
        return str(self.value)

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
                   EventCategory.MESSAGE_CHANGELOG, EventCategory.MESSAGE_CHANGELOG_DELETED, EventCategory.RESYNC})
