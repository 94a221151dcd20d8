"""The protocol's objects as type checkers see them (docs/PROTOCOL.md, "4. Objects").

At run time every object the package hands out is a plain ``dict`` decoded from JSON; these
:class:`~typing.TypedDict` classes only tell a type checker which keys it may hold and of
which types. A key the protocol marks as present only in some cases (``members`` with
``show_member``, ``file`` on file messages, the per-user fields of a channel, ...) is
optional here: read it with ``.get()``. The required keys are the ones every object of the
kind carries wherever the package gets it from — the server's answers, the cache, and, for
messages, the pending and failed messages of the outbox.

The protocol documents no poll object, so there is no ``Poll`` here.
"""
from __future__ import annotations

from typing import Any, Dict, List, TypedDict, Union

__all__ = [
    "BasicUser", "User", "Member", "Channel", "Message", "FileInfo", "Thumbnail", "MetaArrayItem", "Reaction",
    "ThreadInfo", "ParentMessageInfo", "DeletedMessage", "ChannelListPage", "MessageListPage", "UserListPage",
    "MemberListPage", "ChannelChangelogPage", "MessageChangelogPage", "CachedMessagePage", "UserMessageParams",
    "FileMessageParams", "Poll", "PollOption", "PollListPage", "PollVoters", "DeletedPoll", "PollChangelogPage",
]


# -- users (§4.1, §4.3) -------------------------------------------------------------------


class _UserID(TypedDict):
    user_id: str


class BasicUser(_UserID, total=False):
    """A user inside a message, a channel or a list: the sender, an operator, the creator."""

    nickname: str
    profile_url: str
    is_active: bool
    require_auth_for_profile_image: bool
    metadata: Dict[str, str]
    #: ``"operator"`` or ``""`` when the user is described as a channel participant.
    role: str


class User(_UserID, total=False):
    """A user (§4.1): what ``connect`` completes with and ``list_users`` lists."""

    nickname: str
    profile_url: str
    is_active: bool
    #: True while the user has an open event stream.
    is_online: bool
    #: ms; 0 if never connected or while online.
    last_seen_at: int
    created_at: int
    has_ever_logged_in: bool
    metadata: Dict[str, str]
    #: Private: only in the user's own object.
    discovery_keys: List[str]
    preferred_languages: List[str]
    require_auth_for_profile_image: bool
    is_hide_me_from_friends: bool
    is_shadow_blocked: bool
    locale: str
    #: Only when asked for with ``include_unread_count``.
    unread_message_count: int
    unread_channel_count: int


class Member(BasicUser, total=False):
    """A channel member (§4.3): a basic user with the member's state in the channel."""

    #: ``"joined"`` or ``"invited"``.
    state: str
    is_muted: bool
    #: Only while muted; -1: indefinitely.
    muted_end_at: int
    #: Only while muted.
    muted_description: str
    is_online: bool
    last_seen_at: int
    read_ts: int
    delivered_ts: int
    push_enabled: bool
    is_blocked_by_me: bool
    is_blocking_me: bool


# -- messages (§4.4) ------------------------------------------------------------------------


class FileInfo(TypedDict, total=False):
    """The ``file`` of a file message."""

    #: Absolute; ``""`` for a pending upload.
    url: str
    name: str
    size: int
    #: The MIME type.
    type: str
    require_auth: bool


class Thumbnail(TypedDict, total=False):
    url: str
    width: int
    height: int
    real_width: int
    real_height: int


class ThumbnailSize(TypedDict):
    """A box of a file send's ``thumbnail_sizes``: the thumbnail fits in it (sides 1 to 4096)."""

    max_width: int
    max_height: int


class MetaArrayItem(TypedDict):
    """One entry of a message's ``sorted_metaarray``."""

    key: str
    value: List[str]


class Reaction(TypedDict, total=False):
    key: str
    user_ids: List[str]
    updated_at: int


class ThreadInfo(TypedDict, total=False):
    """The replies of a parent message (with ``include_thread_info``)."""

    reply_count: int
    last_replied_at: int
    updated_at: int
    most_replies: List[BasicUser]


class ParentMessageInfo(TypedDict, total=False):
    """The parent of a reply (with ``include_parent_message_info``)."""

    message_id: int
    type: str
    message: str
    custom_type: str
    ts: int
    user: BasicUser


class PollOption(TypedDict, total=False):
    """One option of a poll (§7.6); ids count 1, 2, … within the poll."""

    poll_id: int
    id: int
    text: str
    vote_count: int
    created_by: str
    created_at: int
    updated_at: int


class Poll(TypedDict, total=False):
    """A poll (§7.6), as a message carries it (``poll``), in events and in the poll
    operations' answers. ``status`` is ``"open"`` or ``"closed"``; ``close_at`` -1 = never;
    ``voted_option_ids`` are the viewing user's own votes."""

    id: int
    title: str
    channel_url: str
    #: The message that carries it; 0 until one does.
    message_id: int
    allow_user_suggestion: bool
    allow_multiple_votes: bool
    close_at: int
    status: str
    created_by: str
    created_at: int
    updated_at: int
    voter_count: int
    options: List[PollOption]
    voted_option_ids: List[int]


class _MessageKeys(TypedDict):
    # Also in every pending and failed message of the outbox.
    message_id: int
    type: str
    message: str
    channel_url: str
    channel_type: str
    created_at: int
    updated_at: int
    req_id: str


class Message(_MessageKeys, total=False):
    """A message (§4.4). ``message_id`` is unique across the server, 0 for a message not
    sent yet; ``type`` is ``"MESG"``, ``"FILE"`` or ``"ADMM"``; times are ms.

    Messages of this client's outbox also carry ``sending_status`` (``"pending"``,
    ``"failed"``, ``"canceled"`` or, once the server accepted them, ``"succeeded"``), and
    failed ones ``error_code`` / ``error_message``."""

    #: The sender; omitted for admin messages.
    user: BasicUser
    custom_type: str
    data: str
    #: ``"users"`` or ``"channel"``.
    mention_type: str
    mentioned_users: List[BasicUser]
    is_removed: bool
    is_op_msg: bool
    silent: bool
    message_retention_hour: int
    message_survival_seconds: int
    translations: Dict[str, str]
    #: 0 if not a reply.
    parent_message_id: int
    is_reply_to_channel: bool
    is_pinned: bool
    #: File messages only.
    file: FileInfo
    thumbnails: List[Thumbnail]
    sorted_metaarray: List[MetaArrayItem]
    reactions: List[Reaction]
    thread_info: ThreadInfo
    parent_message_info: ParentMessageInfo
    #: The poll the message carries (§7.6).
    poll: Poll
    # The library's own fields (docs/C-API.md, "Sending and the outbox").
    sending_status: str
    error_code: int
    error_message: str


# -- channels (§4.2) --------------------------------------------------------------------------


class _ChannelKeys(TypedDict):
    # "Always present" in §4.2.
    channel_url: str
    channel_type: str
    name: str
    cover_url: str
    custom_type: str
    data: str
    created_at: int
    updated_at: int
    is_distinct: bool
    is_super: bool
    is_public: bool
    is_ephemeral: bool
    freeze: bool
    is_broadcast: bool
    is_exclusive: bool
    is_access_code_required: bool
    is_discoverable: bool
    member_count: int
    joined_member_count: int
    max_length_message: int
    message_survival_seconds: int
    unread_message_count: int
    unread_mention_count: int
    pinned_message_ids: List[int]
    operators: List[BasicUser]


class Channel(_ChannelKeys, total=False):
    """A group channel (§4.2). The keys §4.2 calls "always present" (``channel_url``, ``name``,
    ``custom_type``, the flags and counts, ``operators``, ...) are required; the others are
    there when they apply: ``last_message`` when there is one, ``members`` / ``metadata`` /
    ``metacounter`` / the receipts when asked for, and the per-user fields (``member_state``,
    ``my_role``, ``hidden_state``, ``user_last_read``, ...) when the channel is seen as a user,
    which is how this client sees its channels."""

    created_by: BasicUser
    last_message: Message
    members: List[Member]
    metadata: Dict[str, str]
    metacounter: Dict[str, int]
    read_receipt: Dict[str, int]
    delivery_receipt: Dict[str, int]
    # Per user.
    #: ``"joined"``, ``"invited"`` or ``"none"``.
    member_state: str
    #: ``"operator"`` or ``""``.
    my_role: str
    #: ``"unhidden"``, ``"hidden_allow_auto_unhide"`` or ``"hidden_prevent_auto_unhide"``.
    hidden_state: str
    is_hidden: bool
    is_muted: bool
    is_push_enabled: bool
    count_preference: str
    user_last_read: int
    ts_message_offset: int
    invited_at: int
    inviter: BasicUser
    joined_ts: int
    #: Only in the answer of ``create_group_channel``: false when a distinct channel existed.
    is_created: bool


# -- answers that list them ---------------------------------------------------------------------


class DeletedMessage(TypedDict):
    message_id: int
    deleted_at: int


class ChannelListPage(TypedDict):
    """The answer of the channel lists (§6.2): ``next`` is ``""`` on the last page."""

    channels: List[Channel]
    next: str
    ts: int


class MessageListPage(TypedDict):
    """The answer of ``list_messages`` and ``list_thread_replies`` (§7.2)."""

    messages: List[Message]
    has_prev: bool
    has_next: bool
    is_continuous_prev_messages: bool
    is_continuous_next_messages: bool


class UserListPage(TypedDict):
    users: List[User]
    next: str


class MemberListPage(TypedDict):
    members: List[Member]
    next: str


class ChannelChangelogPage(TypedDict):
    """The answer of ``list_channel_changelogs`` (§8.3): ``deleted`` lists channel URLs."""

    updated: List[Channel]
    deleted: List[str]
    has_more: bool
    next: str


class MessageChangelogPage(TypedDict):
    """The answer of ``list_message_changelogs`` (§8.2)."""

    updated: List[Message]
    deleted: List[DeletedMessage]
    has_more: bool
    next: str


class PollListPage(TypedDict):
    """The answer of ``list_polls`` (§7.6): newest first."""

    polls: List[Poll]
    next: str


class PollVoters(TypedDict):
    """The answer of ``list_poll_voters`` (§7.6)."""

    vote_count: int
    voters: List[BasicUser]
    next: str


class DeletedPoll(TypedDict):
    poll_id: int
    deleted_at: int


class PollChangelogPage(TypedDict):
    """The answer of ``list_poll_changelogs`` (§7.6): created polls are in ``updated`` too."""

    updated: List[Poll]
    deleted: List[DeletedPoll]
    has_more: bool
    next: str


class CachedMessagePage(TypedDict):
    """What :meth:`parley.Client.cached_message_page` returns."""

    messages: List[Message]
    #: True only when the cache knows no message is missing within the page.
    continuous: bool


# -- what a send takes (§7.1; docs/C-API.md, "Sending and the outbox") ------------------------


class _SendParams(TypedDict, total=False):
    #: The idempotency key (1 to 64 bytes); the library makes one when not given.
    req_id: str
    custom_type: str
    data: str
    #: ``"users"`` (the default) or ``"channel"``.
    mention_type: str
    mentioned_user_ids: List[str]
    sorted_metaarray: List[MetaArrayItem]
    #: Makes the message a reply to this top-level message.
    parent_message_id: int
    is_reply_to_channel: bool
    is_silent: bool
    mark_as_read: bool
    #: Sends the message carrying this poll (``create_poll`` first; §7.6).
    poll_id: int
    #: ``"default"`` or ``"suppress"`` (no member is notified of this message).
    push_notification_delivery_option: str
    #: ``{"name": sound, "volume": 0 to 1}``: a critical alert, which reaches iOS devices in
    #: do-not-disturb or snooze too.
    apple_critical_alert_options: Dict[str, Any]


class UserMessageParams(_SendParams, total=False):
    """The fields of :meth:`parley.Client.send_user_message` besides the text (the library
    refuses any other)."""

    #: Languages (``"fr"``, ``"de"``) the server's translator translates the message into;
    #: the translations arrive as an update of the message (``translations``).
    target_languages: List[str]


class FileMessageParams(_SendParams, total=False):
    """The fields of :meth:`parley.Client.send_file_message`: exactly one of ``url`` (a hosted
    file) and ``file_path`` (a local file to upload), and the rest as for a user message."""

    url: str
    file_path: str
    file_name: str
    file_size: int
    #: The MIME type.
    file_type: str
    #: The reference SDK's name of ``file_type``.
    mime_type: str
    #: URLs, or ``{url, width, height, real_width, real_height}`` objects.
    thumbnails: List[Union[str, Thumbnail]]
    #: Up to 3 boxes the server makes thumbnails of an uploaded image for.
    thumbnail_sizes: List[ThumbnailSize]
