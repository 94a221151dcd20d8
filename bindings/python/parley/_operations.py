# Generated from the library's operation catalog (parley_operations) and the answer table of
# bindings/python/tools/generate_operations.py: do not edit. Regenerate with
#     python3 bindings/python/tools/generate_operations.py
# when the catalog changes (bindings/python/tests/test_operations_generated.py fails until then).
# mypy: disable-error-code="empty-body"
"""Every operation of the library's catalog as a typed method.

:class:`Operations` is part of :class:`parley.Client`: each method performs the operation as
the connected user and returns a Future of the server's answer. :class:`AsyncOperations` is
part of :class:`parley.AsyncClient`: the same methods, awaitable. Both call ``perform``
(:func:`parley._operation_support.operation`): the library checks the parameters (a required
one missing raises :class:`parley.InvalidArgument`), fills the path and sends the rest as the
query or the body, and applies the answer to the cache. Parameters are keyword-only and
named as on the wire (docs/PROTOCOL.md); an optional one left ``None`` is not sent, so the
server's default applies.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Dict, List, Optional

from ._operation_support import awaiting_operation, operation, own_qualnames
from .objects import (
    Channel, ChannelChangelogPage, ChannelListPage, MemberListPage, Message, MessageChangelogPage, MessageListPage,
    MetaArrayItem, Poll, PollChangelogPage, PollListPage, PollVoters, User, UserListPage,
)


class Operations:
    """The catalog operations of :class:`parley.Client`: each returns a Future of the server's answer."""

    @operation
    def get_current_user(
        self, *,
        user_id: Optional[str] = None,
        include_unread_count: Optional[bool] = None,
        custom_types: Optional[List[str]] = None,
        super_mode: Optional[str] = None,
    ) -> Future[User]:
        """The connected user's profile, or with ``user_id`` another user's.

        ``GET /v3/users/{user_id}`` (docs/PROTOCOL.md §5). ``user_id`` in the path is the connected
        user unless given.
        """

    @operation
    def update_current_user(
        self, *,
        user_id: Optional[str] = None,
        nickname: Optional[str] = None,
        profile_url: Optional[str] = None,
        is_active: Optional[bool] = None,
        metadata: Optional[Dict[str, str]] = None,
        discovery_keys: Optional[List[str]] = None,
        preferred_languages: Optional[List[str]] = None,
        last_seen_at: Optional[int] = None,
    ) -> Future[User]:
        """Changes the connected user's profile; answers the user.

        ``PUT /v3/users/{user_id}`` (docs/PROTOCOL.md §5). ``user_id`` in the path is the connected
        user unless given.
        """

    @operation
    def get_unread_message_count(
        self, *,
        user_id: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        super_mode: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """The messages the user has not read: ``{"unread_count"}``.

        ``GET /v3/users/{user_id}/unread_message_count`` (docs/PROTOCOL.md §5). ``user_id`` in the
        path is the connected user unless given.
        """

    @operation
    def get_unread_channel_count(
        self, *,
        user_id: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        super_mode: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """The channels with messages the user has not read: ``{"unread_count"}``.

        ``GET /v3/users/{user_id}/unread_channel_count`` (docs/PROTOCOL.md §5). ``user_id`` in the
        path is the connected user unless given.
        """

    @operation
    def mark_all_as_read(
        self, *,
        user_id: Optional[str] = None,
        channel_urls: Optional[List[str]] = None,
    ) -> Future[Dict[str, Any]]:
        """Marks every joined channel (or those of ``channel_urls``) read.

        ``PUT /v3/users/{user_id}/mark_as_read_all`` (docs/PROTOCOL.md §5). ``user_id`` in the path
        is the connected user unless given.
        """

    @operation
    def get_channel_invitation_preference(self, *, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """Whether the user joins the channels they are invited to at once: ``{"auto_accept"}``.

        ``GET /v3/users/{user_id}/channel_invitation_preference`` (docs/PROTOCOL.md §5). ``user_id``
        in the path is the connected user unless given.
        """

    @operation
    def set_channel_invitation_preference(
        self, *,
        auto_accept: bool,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Sets whether the user joins the channels they are invited to at once: ``{"auto_accept"}``.

        ``PUT /v3/users/{user_id}/channel_invitation_preference`` (docs/PROTOCOL.md §5). ``user_id``
        in the path is the connected user unless given.
        """

    @operation
    def register_push_token(
        self, *,
        token_type: str,
        token: str,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Registers a device token of the user: ``token_type`` ``gcm`` (FCM), ``apns`` or ``huawei``
        (HMS); answers ``{"token", "type", "user"}``.

        ``POST /v3/users/{user_id}/push/{token_type}`` (docs/PROTOCOL.md §5.1). ``user_id`` in the
        path is the connected user unless given.
        """

    @operation
    def unregister_push_token(
        self, *,
        token_type: str,
        token: str,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Unregisters one device token: ``{"token": [removed]}``.

        ``DELETE /v3/users/{user_id}/push/{token_type}/{token}`` (docs/PROTOCOL.md §5.1).
        ``user_id`` in the path is the connected user unless given.
        """

    @operation
    def unregister_all_push_tokens(self, *, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """Unregisters every device token of the user: ``{"token": [removed]}``.

        ``DELETE /v3/users/{user_id}/push`` (docs/PROTOCOL.md §5.1). ``user_id`` in the path is the
        connected user unless given.
        """

    @operation
    def list_push_tokens(self, *, token_type: str, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """The user's device tokens of a type, oldest first: ``{"tokens", "type"}``.

        ``GET /v3/users/{user_id}/push/{token_type}`` (docs/PROTOCOL.md §5.1). ``user_id`` in the
        path is the connected user unless given.
        """

    @operation
    def get_push_preference(self, *, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """When the user is notified: ``push_trigger_option`` (all, mention_only, off), do not disturb
        (``start_hour``... in ``timezone``) and snooze (``snooze_start_ts``, ``snooze_end_ts``).

        ``GET /v3/users/{user_id}/push_preference`` (docs/PROTOCOL.md §5.1). ``user_id`` in the path
        is the connected user unless given.
        """

    @operation
    def set_push_preference(
        self, *,
        user_id: Optional[str] = None,
        push_trigger_option: Optional[str] = None,
        do_not_disturb: Optional[bool] = None,
        start_hour: Optional[int] = None,
        start_min: Optional[int] = None,
        end_hour: Optional[int] = None,
        end_min: Optional[int] = None,
        timezone: Optional[str] = None,
        snooze_enabled: Optional[bool] = None,
        snooze_start_ts: Optional[int] = None,
        snooze_end_ts: Optional[int] = None,
    ) -> Future[Dict[str, Any]]:
        """Changes the fields given of the user's push preference; answers all of them.

        ``PUT /v3/users/{user_id}/push_preference`` (docs/PROTOCOL.md §5.1). ``user_id`` in the path
        is the connected user unless given.
        """

    @operation
    def get_channel_push_preference(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """The user's push trigger option for one channel: ``{"push_trigger_option"}``, ``default``
        following their own.

        ``GET /v3/users/{user_id}/push_preference/{channel_url}`` (docs/PROTOCOL.md §5.1).
        ``user_id`` in the path is the connected user unless given.
        """

    @operation
    def set_channel_push_preference(
        self, *,
        channel_url: str,
        push_trigger_option: str,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Sets the user's push trigger option for one channel: default, all, mention_only or off.

        ``PUT /v3/users/{user_id}/push_preference/{channel_url}`` (docs/PROTOCOL.md §5.1).
        ``user_id`` in the path is the connected user unless given.
        """

    @operation
    def list_users(
        self, *,
        token: Optional[str] = None,
        limit: Optional[int] = None,
        user_ids: Optional[List[str]] = None,
        nickname: Optional[str] = None,
        nickname_startswith: Optional[str] = None,
        active_mode: Optional[str] = None,
        metadatakey: Optional[str] = None,
        metadatavalues_in: Optional[List[str]] = None,
    ) -> Future[UserListPage]:
        """One page of users in ``user_id`` order, without their private fields.

        ``GET /v3/users`` (docs/PROTOCOL.md §5).
        """

    @operation
    def list_my_group_channels(
        self, *,
        user_id: Optional[str] = None,
        token: Optional[str] = None,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        metadata_order_key: Optional[str] = None,
        show_empty: Optional[bool] = None,
        show_frozen: Optional[bool] = None,
        show_member: Optional[bool] = None,
        show_metadata: Optional[bool] = None,
        show_metacounter: Optional[bool] = None,
        show_read_receipt: Optional[bool] = None,
        show_delivery_receipt: Optional[bool] = None,
        distinct_mode: Optional[str] = None,
        super_mode: Optional[str] = None,
        member_state_filter: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        custom_type_startswith: Optional[str] = None,
        channel_urls: Optional[List[str]] = None,
        name: Optional[str] = None,
        name_contains: Optional[str] = None,
        name_startswith: Optional[str] = None,
        members_exactly_in: Optional[List[str]] = None,
        members_include_in: Optional[List[str]] = None,
        query_type: Optional[str] = None,
        created_after: Optional[int] = None,
        created_before: Optional[int] = None,
        metadata_key: Optional[str] = None,
        metadata_values: Optional[List[str]] = None,
        metadata_value_startswith: Optional[str] = None,
        public_mode: Optional[str] = None,
        hidden_mode: Optional[str] = None,
        unread_filter: Optional[str] = None,
    ) -> Future[ChannelListPage]:
        """One page of the channels the user joined or is invited to; the cache stores them.

        ``GET /v3/users/{user_id}/my_group_channels`` (docs/PROTOCOL.md §6.2). ``user_id`` in the
        path is the connected user unless given.
        """

    @operation
    def list_group_channels(
        self, *,
        token: Optional[str] = None,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        metadata_order_key: Optional[str] = None,
        show_empty: Optional[bool] = None,
        show_frozen: Optional[bool] = None,
        show_member: Optional[bool] = None,
        show_metadata: Optional[bool] = None,
        show_metacounter: Optional[bool] = None,
        show_read_receipt: Optional[bool] = None,
        show_delivery_receipt: Optional[bool] = None,
        distinct_mode: Optional[str] = None,
        super_mode: Optional[str] = None,
        member_state_filter: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        custom_type_startswith: Optional[str] = None,
        channel_urls: Optional[List[str]] = None,
        name: Optional[str] = None,
        name_contains: Optional[str] = None,
        name_startswith: Optional[str] = None,
        members_exactly_in: Optional[List[str]] = None,
        members_include_in: Optional[List[str]] = None,
        query_type: Optional[str] = None,
        created_after: Optional[int] = None,
        created_before: Optional[int] = None,
        metadata_key: Optional[str] = None,
        metadata_values: Optional[List[str]] = None,
        metadata_value_startswith: Optional[str] = None,
        public_mode: Optional[str] = None,
        public_membership_filter: Optional[str] = None,
    ) -> Future[ChannelListPage]:
        """One page of the channels the user may see (public ones and their own); the cache stores
        them.

        ``GET /v3/group_channels`` (docs/PROTOCOL.md §6.2).
        """

    @operation
    def list_public_group_channels(
        self, *,
        token: Optional[str] = None,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        metadata_order_key: Optional[str] = None,
        show_empty: bool = False,
        show_frozen: Optional[bool] = None,
        show_member: Optional[bool] = None,
        show_metadata: Optional[bool] = None,
        show_metacounter: Optional[bool] = None,
        show_read_receipt: Optional[bool] = None,
        show_delivery_receipt: Optional[bool] = None,
        distinct_mode: Optional[str] = None,
        super_mode: Optional[str] = None,
        member_state_filter: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        custom_type_startswith: Optional[str] = None,
        channel_urls: Optional[List[str]] = None,
        name: Optional[str] = None,
        name_contains: Optional[str] = None,
        name_startswith: Optional[str] = None,
        members_exactly_in: Optional[List[str]] = None,
        members_include_in: Optional[List[str]] = None,
        query_type: Optional[str] = None,
        created_after: Optional[int] = None,
        created_before: Optional[int] = None,
        metadata_key: Optional[str] = None,
        metadata_values: Optional[List[str]] = None,
        metadata_value_startswith: Optional[str] = None,
        public_membership_filter: Optional[str] = None,
    ) -> Future[ChannelListPage]:
        """One page of public channels, as the reference SDK's public channel list: empty ones only
        with ``show_empty=true``, ``public_membership_filter="joined"`` for those the user joined;
        the cache stores them.

        ``GET /v3/group_channels`` (docs/PROTOCOL.md §6.2). The library sends ``show_empty=False``
        unless told otherwise.
        """

    @operation
    def list_channel_changelogs(
        self, *,
        user_id: Optional[str] = None,
        token: Optional[str] = None,
        change_ts: Optional[int] = None,
        limit: Optional[int] = None,
        show_member: Optional[bool] = None,
        show_metadata: Optional[bool] = None,
        show_metacounter: Optional[bool] = None,
        show_read_receipt: Optional[bool] = None,
        show_delivery_receipt: Optional[bool] = None,
        show_empty: Optional[bool] = None,
        show_frozen: Optional[bool] = None,
        custom_types: Optional[List[str]] = None,
    ) -> Future[ChannelChangelogPage]:
        """The user's channels changed or gone since ``token`` (or ``change_ts``), applied to the cache
        like the engine's own catch-up.

        ``GET /v3/users/{user_id}/my_group_channels/changelogs`` (docs/PROTOCOL.md §8.3).
        ``user_id`` in the path is the connected user unless given.
        """

    @operation
    def create_group_channel(
        self, *,
        user_ids: Optional[List[str]] = None,
        name: Optional[str] = None,
        cover_url: Optional[str] = None,
        cover_file_path: Optional[str] = None,
        custom_type: Optional[str] = None,
        data: Optional[str] = None,
        channel_url: Optional[str] = None,
        is_distinct: Optional[bool] = None,
        is_super: Optional[bool] = None,
        is_public: Optional[bool] = None,
        is_ephemeral: Optional[bool] = None,
        operator_ids: Optional[List[str]] = None,
        inviter_id: Optional[str] = None,
        strict: Optional[bool] = None,
    ) -> Future[Channel]:
        """Creates a channel with the user and ``user_ids`` as members; answers it, with
        ``is_created``. ``cover_file_path``: a local image uploaded as the channel's cover (its
        ``cover_url`` is then the server's copy).

        ``POST /v3/group_channels`` (docs/PROTOCOL.md §6.1).
        """

    @operation
    def get_group_channel(
        self, *,
        channel_url: str,
        show_member: Optional[bool] = None,
        show_read_receipt: Optional[bool] = None,
        show_delivery_receipt: Optional[bool] = None,
        show_metadata: Optional[bool] = None,
        show_metacounter: Optional[bool] = None,
    ) -> Future[Channel]:
        """One channel as the user sees it; the cache stores it.

        ``GET /v3/group_channels/{channel_url}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def update_group_channel(
        self, *,
        channel_url: str,
        name: Optional[str] = None,
        cover_url: Optional[str] = None,
        cover_file_path: Optional[str] = None,
        custom_type: Optional[str] = None,
        data: Optional[str] = None,
        is_public: Optional[bool] = None,
        is_distinct: Optional[bool] = None,
        operator_ids: Optional[List[str]] = None,
    ) -> Future[Channel]:
        """Changes the channel's settings (operators only); ``operator_ids`` are added.
        ``cover_file_path``: a local image uploaded as the new cover, replacing the old one.

        ``PUT /v3/group_channels/{channel_url}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def delete_group_channel(self, *, channel_url: str) -> Future[Dict[str, Any]]:
        """Deletes the channel (operators only); it leaves the cache.

        ``DELETE /v3/group_channels/{channel_url}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def invite_users(
        self, *,
        channel_url: str,
        user_ids: List[str],
        inviter_id: Optional[str] = None,
    ) -> Future[Channel]:
        """Invites users; those who accept invitations automatically join at once.

        ``POST /v3/group_channels/{channel_url}/invite`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def accept_invitation(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Channel]:
        """Accepts the user's invitation to the channel.

        ``PUT /v3/group_channels/{channel_url}/accept`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def decline_invitation(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """Declines the user's invitation; the channel leaves the cache.

        ``PUT /v3/group_channels/{channel_url}/decline`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def join_channel(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Channel]:
        """Joins a public channel.

        ``PUT /v3/group_channels/{channel_url}/join`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def leave_channel(
        self, *,
        channel_url: str,
        user_ids: Optional[List[str]] = None,
        should_leave_all: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Leaves the channel; it leaves the cache.

        ``PUT /v3/group_channels/{channel_url}/leave`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def freeze_channel(self, *, channel_url: str) -> Future[Channel]:
        """Freezes the channel: only operators may send then (operators only).

        ``PUT /v3/group_channels/{channel_url}/freeze`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def unfreeze_channel(self, *, channel_url: str) -> Future[Channel]:
        """Unfreezes the channel (operators only).

        ``PUT /v3/group_channels/{channel_url}/freeze`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def hide_channel(
        self, *,
        channel_url: str,
        user_id: Optional[str] = None,
        hide_previous_messages: Optional[bool] = None,
        allow_auto_unhide: Optional[bool] = None,
        should_hide_all: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Hides the channel from the user's list, with ``hide_previous_messages`` also its messages so
        far.

        ``PUT /v3/group_channels/{channel_url}/hide`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def unhide_channel(
        self, *,
        channel_url: str,
        user_id: Optional[str] = None,
        should_unhide_all: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Shows the hidden channel again.

        ``DELETE /v3/group_channels/{channel_url}/hide`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def reset_my_history(
        self, *,
        channel_url: str,
        user_id: Optional[str] = None,
        reset_all: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Hides the channel's messages so far from the user: ``{"ts_message_offset"}``.

        ``PUT /v3/group_channels/{channel_url}/reset_user_history`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def start_typing(self, *, channel_url: str, user_ids: Optional[List[str]] = None) -> Future[Dict[str, Any]]:
        """Tells the channel the user is typing.

        ``POST /v3/group_channels/{channel_url}/typing`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def end_typing(self, *, channel_url: str, user_ids: Optional[List[str]] = None) -> Future[Dict[str, Any]]:
        """Tells the channel the user stopped typing.

        ``DELETE /v3/group_channels/{channel_url}/typing`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def mark_as_read(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """Marks the channel read up to now: ``{"ts"}``.

        ``PUT /v3/group_channels/{channel_url}/messages/mark_as_read`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def mark_as_delivered(self, *, channel_url: str, user_id: Optional[str] = None) -> Future[Dict[str, Any]]:
        """Marks the channel's messages delivered: ``{"ts"}``.

        ``PUT /v3/group_channels/{channel_url}/messages/mark_as_delivered`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def list_members(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        operator_filter: Optional[str] = None,
        member_state_filter: Optional[str] = None,
        muted_member_filter: Optional[str] = None,
        nickname_startswith: Optional[str] = None,
    ) -> Future[MemberListPage]:
        """One page of the channel's members.

        ``GET /v3/group_channels/{channel_url}/members`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def get_member_state(self, *, channel_url: str, member_id: str) -> Future[Dict[str, Any]]:
        """Whether ``member_id`` is a member: ``{"is_member", "state"}``.

        ``GET /v3/group_channels/{channel_url}/members/{member_id}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def list_operators(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Future[Dict[str, Any]]:
        """One page of the channel's operators: ``{"operators", "next"}``.

        ``GET /v3/group_channels/{channel_url}/operators`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def add_operators(self, *, channel_url: str, operator_ids: List[str]) -> Future[Dict[str, Any]]:
        """Makes joined members operators (operators only).

        ``POST /v3/group_channels/{channel_url}/operators`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def remove_operators(self, *, channel_url: str, operator_ids: List[str]) -> Future[Dict[str, Any]]:
        """Takes the operator role from users (operators only).

        ``DELETE /v3/group_channels/{channel_url}/operators`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def remove_all_operators(self, *, channel_url: str) -> Future[Dict[str, Any]]:
        """Takes the operator role from every operator (operators only).

        ``DELETE /v3/group_channels/{channel_url}/operators`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def ban_user(
        self, *,
        channel_url: str,
        user_id: str,
        seconds: Optional[int] = None,
        description: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Bans ``user_id`` from the channel for ``seconds`` (-1, the default: for good); a member is
        removed (operators only).

        ``POST /v3/group_channels/{channel_url}/ban`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def unban_user(self, *, channel_url: str, target_user_id: str) -> Future[Dict[str, Any]]:
        """Lifts the ban of ``target_user_id`` (operators only).

        ``DELETE /v3/group_channels/{channel_url}/ban/{target_user_id}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def get_ban(self, *, channel_url: str, target_user_id: str) -> Future[Dict[str, Any]]:
        """Whether ``target_user_id`` is banned: ``{"is_banned", ...}``.

        ``GET /v3/group_channels/{channel_url}/ban/{target_user_id}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def list_banned_users(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Future[Dict[str, Any]]:
        """One page of the channel's bans (operators only): ``{"banned_list", "next"}``.

        ``GET /v3/group_channels/{channel_url}/ban`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def mute_user(
        self, *,
        channel_url: str,
        user_id: str,
        seconds: Optional[int] = None,
        description: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Mutes the member ``user_id`` for ``seconds`` (-1, the default: until unmuted) (operators
        only).

        ``POST /v3/group_channels/{channel_url}/mute`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def unmute_user(self, *, channel_url: str, target_user_id: str) -> Future[Dict[str, Any]]:
        """Lifts the mute of ``target_user_id`` (operators only).

        ``DELETE /v3/group_channels/{channel_url}/mute/{target_user_id}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def get_mute(self, *, channel_url: str, target_user_id: str) -> Future[Dict[str, Any]]:
        """Whether ``target_user_id`` is muted: ``{"is_muted", ...}``.

        ``GET /v3/group_channels/{channel_url}/mute/{target_user_id}`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def list_muted_users(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Future[Dict[str, Any]]:
        """One page of the channel's mutes (operators only): ``{"muted_list", "next"}``.

        ``GET /v3/group_channels/{channel_url}/mute`` (docs/PROTOCOL.md §6.3).
        """

    @operation
    def report_channel(
        self, *,
        channel_url: str,
        report_category: str,
        reporting_user_id: Optional[str] = None,
        report_description: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Reports the channel; ``report_category``: suspicious, harassing, inappropriate or spam.

        ``POST /v3/report/group_channels/{channel_url}`` (docs/PROTOCOL.md §7.5).
        """

    @operation
    def report_message(
        self, *,
        channel_url: str,
        message_id: int,
        report_category: str,
        reporting_user_id: Optional[str] = None,
        report_description: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Reports a message; ``report_category``: suspicious, harassing, inappropriate or spam.

        ``POST /v3/report/group_channels/{channel_url}/messages/{message_id}`` (docs/PROTOCOL.md
        §7.5).
        """

    @operation
    def report_user(
        self, *,
        offending_user_id: str,
        report_category: str,
        channel_url: Optional[str] = None,
        reporting_user_id: Optional[str] = None,
        report_description: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Reports a user, in the channel ``channel_url`` if given; ``report_category``: suspicious,
        harassing, inappropriate or spam.

        ``POST /v3/report/users/{offending_user_id}`` (docs/PROTOCOL.md §7.5).
        """

    @operation
    def get_metadata(self, *, channel_url: str, keys: Optional[List[str]] = None) -> Future[Dict[str, Any]]:
        """The channel's metadata (all of it, or ``keys``).

        ``GET /v3/group_channels/{channel_url}/metadata`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def create_metadata(
        self, *,
        channel_url: str,
        metadata: Dict[str, str],
        include_ts: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Adds metadata keys (a key that exists is an error); answers them.

        ``POST /v3/group_channels/{channel_url}/metadata`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def update_metadata(
        self, *,
        channel_url: str,
        metadata: Dict[str, str],
        upsert: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Changes metadata values (``upsert`` adds missing keys); answers them.

        ``PUT /v3/group_channels/{channel_url}/metadata`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def delete_metadata(self, *, channel_url: str, key: str) -> Future[Dict[str, Any]]:
        """Removes the metadata key ``key``.

        ``DELETE /v3/group_channels/{channel_url}/metadata/{key}`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def delete_all_metadata(self, *, channel_url: str) -> Future[Dict[str, Any]]:
        """Removes every metadata key.

        ``DELETE /v3/group_channels/{channel_url}/metadata`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def get_metacounters(self, *, channel_url: str, keys: Optional[List[str]] = None) -> Future[Dict[str, Any]]:
        """The channel's metacounters (all of them, or ``keys``).

        ``GET /v3/group_channels/{channel_url}/metacounter`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def create_metacounters(self, *, channel_url: str, metacounter: Dict[str, int]) -> Future[Dict[str, Any]]:
        """Adds metacounters (a key that exists is an error); answers them.

        ``POST /v3/group_channels/{channel_url}/metacounter`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def update_metacounters(
        self, *,
        channel_url: str,
        metacounter: Dict[str, int],
        mode: Optional[str] = None,
        upsert: Optional[bool] = None,
    ) -> Future[Dict[str, Any]]:
        """Sets, increases or decreases metacounters (``mode``: set, increase, decrease); answers them.

        ``PUT /v3/group_channels/{channel_url}/metacounter`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def delete_metacounter(self, *, channel_url: str, key: str) -> Future[Dict[str, Any]]:
        """Removes the metacounter ``key``.

        ``DELETE /v3/group_channels/{channel_url}/metacounter/{key}`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def delete_all_metacounters(self, *, channel_url: str) -> Future[Dict[str, Any]]:
        """Removes every metacounter.

        ``DELETE /v3/group_channels/{channel_url}/metacounter`` (docs/PROTOCOL.md §6.4).
        """

    @operation
    def list_messages(
        self, *,
        channel_url: str,
        message_ts: Optional[int] = None,
        message_id: Optional[int] = None,
        prev_limit: Optional[int] = None,
        next_limit: Optional[int] = None,
        include: bool = False,
        reverse: Optional[bool] = None,
        message_type: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        sender_ids: Optional[List[str]] = None,
        include_reply_type: Optional[str] = None,
        include_reactions: Optional[bool] = None,
        include_thread_info: Optional[bool] = None,
        include_parent_message_info: Optional[bool] = None,
        with_sorted_meta_array: Optional[bool] = None,
        include_meta_array: Optional[bool] = None,
    ) -> Future[MessageListPage]:
        """Messages around an anchor (``message_ts`` or ``message_id``; the newest end without one);
        the cache stores them. As the reference SDK: the anchor's own messages only with
        ``include=true``, and ``message_type`` also by the collections' names "all", "user", "file",
        "admin".

        ``GET /v3/group_channels/{channel_url}/messages`` (docs/PROTOCOL.md §7.2). The library sends
        ``include=False`` unless told otherwise.
        """

    @operation
    def list_thread_replies(
        self, *,
        channel_url: str,
        parent_message_id: int,
        message_ts: Optional[int] = None,
        message_id: Optional[int] = None,
        prev_limit: Optional[int] = None,
        next_limit: Optional[int] = None,
        include: bool = False,
        reverse: Optional[bool] = None,
        message_type: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        sender_ids: Optional[List[str]] = None,
        include_reply_type: Optional[str] = None,
        include_reactions: Optional[bool] = None,
        include_thread_info: Optional[bool] = None,
        include_parent_message_info: Optional[bool] = None,
        with_sorted_meta_array: Optional[bool] = None,
        include_meta_array: Optional[bool] = None,
    ) -> Future[MessageListPage]:
        """The replies to ``parent_message_id`` around an anchor, as ``list_messages``.

        ``GET /v3/group_channels/{channel_url}/messages`` (docs/PROTOCOL.md §7.2). The library sends
        ``include=False`` unless told otherwise.
        """

    @operation
    def get_total_message_count(self, *, channel_url: str) -> Future[Dict[str, Any]]:
        """How many messages the channel holds: ``{"total"}``.

        ``GET /v3/group_channels/{channel_url}/messages/total_count`` (docs/PROTOCOL.md §7.4).
        """

    @operation
    def list_message_changelogs(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        change_ts: Optional[int] = None,
        limit: Optional[int] = None,
        message_type: Optional[str] = None,
        custom_types: Optional[List[str]] = None,
        sender_ids: Optional[List[str]] = None,
        include_reply_type: Optional[str] = None,
        include_reactions: Optional[bool] = None,
        include_thread_info: Optional[bool] = None,
        include_parent_message_info: Optional[bool] = None,
        with_sorted_meta_array: Optional[bool] = None,
        include_meta_array: Optional[bool] = None,
    ) -> Future[MessageChangelogPage]:
        """The channel's messages changed or deleted since ``token`` (or ``change_ts``), applied to the
        cache.

        ``GET /v3/group_channels/{channel_url}/messages/changelogs`` (docs/PROTOCOL.md §8.2).
        """

    @operation
    def get_message(self, *, channel_url: str, message_id: int) -> Future[Message]:
        """One message; the cache stores it.

        ``GET /v3/group_channels/{channel_url}/messages/{message_id}`` (docs/PROTOCOL.md §7.4).
        """

    @operation
    def update_message(
        self, *,
        channel_url: str,
        message_id: int,
        message_type: Optional[str] = None,
        message: Optional[str] = None,
        custom_type: Optional[str] = None,
        data: Optional[str] = None,
        mention_type: Optional[str] = None,
        mentioned_user_ids: Optional[List[str]] = None,
        sorted_metaarray: Optional[List[MetaArrayItem]] = None,
        url: Optional[str] = None,
    ) -> Future[Message]:
        """Edits a message (its sender or an operator).

        ``PUT /v3/group_channels/{channel_url}/messages/{message_id}`` (docs/PROTOCOL.md §7.4).
        """

    @operation
    def delete_message(self, *, channel_url: str, message_id: int) -> Future[Dict[str, Any]]:
        """Deletes a message (its sender or an operator); it leaves the cache.

        ``DELETE /v3/group_channels/{channel_url}/messages/{message_id}`` (docs/PROTOCOL.md §7.4).
        """

    @operation
    def copy_message(self, *, channel_url: str, message_id: int, dest_channel_url: str) -> Future[Message]:
        """Copies a message (its sender only) into ``dest_channel_url``; answers the copy.

        ``POST /v3/group_channels/{channel_url}/messages/{message_id}/copy`` (docs/PROTOCOL.md
        §7.4).
        """

    @operation
    def add_reaction(
        self, *,
        channel_url: str,
        message_id: int,
        reaction: str,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Adds the user's ``reaction`` to a message.

        ``POST /v3/group_channels/{channel_url}/messages/{message_id}/reactions`` (docs/PROTOCOL.md
        §7.4).
        """

    @operation
    def remove_reaction(
        self, *,
        channel_url: str,
        message_id: int,
        reaction: str,
        user_id: Optional[str] = None,
    ) -> Future[Dict[str, Any]]:
        """Removes the user's ``reaction`` from a message.

        ``DELETE /v3/group_channels/{channel_url}/messages/{message_id}/reactions``
        (docs/PROTOCOL.md §7.4).
        """

    @operation
    def list_reactions(self, *, channel_url: str, message_id: int) -> Future[Dict[str, Any]]:
        """The reactions to a message: ``{"reactions"}``.

        ``GET /v3/group_channels/{channel_url}/messages/{message_id}/reactions`` (docs/PROTOCOL.md
        §7.4).
        """

    @operation
    def translate_message(
        self, *,
        channel_url: str,
        message_id: int,
        target_languages: Optional[List[str]] = None,
    ) -> Future[Message]:
        """Translates a user message into ``target_languages`` (default: the user's preferred
        languages) through the server's translator; answers the message with its ``translations``,
        which a cached copy takes.

        ``POST /v3/group_channels/{channel_url}/messages/{message_id}/translation``
        (docs/PROTOCOL.md §7.8).
        """

    @operation
    def pin_message(self, *, channel_url: str, message_id: int) -> Future[Dict[str, Any]]:
        """Pins a message to the channel.

        ``POST /v3/group_channels/{channel_url}/messages/{message_id}/pin`` (docs/PROTOCOL.md §7.4).
        """

    @operation
    def unpin_message(self, *, channel_url: str, message_id: int) -> Future[Dict[str, Any]]:
        """Unpins a message.

        ``DELETE /v3/group_channels/{channel_url}/messages/{message_id}/pin`` (docs/PROTOCOL.md
        §7.4).
        """

    @operation
    def add_message_meta_array(
        self, *,
        channel_url: str,
        message_id: int,
        sorted_metaarray: List[MetaArrayItem],
    ) -> Future[Message]:
        """Adds keys to a message's sorted meta array, or values to its keys; answers the message.

        ``POST /v3/group_channels/{channel_url}/messages/{message_id}/sorted_metaarray``
        (docs/PROTOCOL.md §7.4).
        """

    @operation
    def update_message_meta_array(
        self, *,
        channel_url: str,
        message_id: int,
        sorted_metaarray: List[MetaArrayItem],
        mode: Optional[str] = None,
        upsert: Optional[bool] = None,
    ) -> Future[Message]:
        """Adds or removes (``mode``) values of a message's sorted meta array; answers the message.

        ``PUT /v3/group_channels/{channel_url}/messages/{message_id}/sorted_metaarray``
        (docs/PROTOCOL.md §7.4).
        """

    @operation
    def create_poll(
        self, *,
        channel_url: str,
        title: str,
        options: List[str],
        allow_user_suggestion: Optional[bool] = None,
        allow_multiple_votes: Optional[bool] = None,
        close_at: Optional[int] = None,
        user_id: Optional[str] = None,
    ) -> Future[Poll]:
        """Creates a poll in the channel; send a message with its ``poll_id`` to show it.

        ``POST /v3/group_channels/{channel_url}/polls`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def list_polls(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Future[PollListPage]:
        """The channel's polls, newest first: ``{"polls", "next"}``.

        ``GET /v3/group_channels/{channel_url}/polls`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def get_poll(self, *, channel_url: str, poll_id: int) -> Future[Poll]:
        """One poll, with the user's votes.

        ``GET /v3/group_channels/{channel_url}/polls/{poll_id}`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def update_poll(
        self, *,
        channel_url: str,
        poll_id: int,
        title: Optional[str] = None,
        allow_user_suggestion: Optional[bool] = None,
        allow_multiple_votes: Optional[bool] = None,
        close_at: Optional[int] = None,
    ) -> Future[Poll]:
        """Changes a poll's title, options' rules or closing time (its creator or an operator).

        ``PUT /v3/group_channels/{channel_url}/polls/{poll_id}`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def delete_poll(self, *, channel_url: str, poll_id: int) -> Future[Dict[str, Any]]:
        """Deletes a poll (its creator or an operator); its message stays.

        ``DELETE /v3/group_channels/{channel_url}/polls/{poll_id}`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def close_poll(self, *, channel_url: str, poll_id: int) -> Future[Poll]:
        """Closes a poll: it takes no more votes.

        ``PUT /v3/group_channels/{channel_url}/polls/{poll_id}/close`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def add_poll_option(
        self, *,
        channel_url: str,
        poll_id: int,
        text: str,
        user_id: Optional[str] = None,
    ) -> Future[Poll]:
        """Adds an option to a poll.

        ``POST /v3/group_channels/{channel_url}/polls/{poll_id}/options`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def update_poll_option(self, *, channel_url: str, poll_id: int, option_id: int, text: str) -> Future[Poll]:
        """Changes an option's text.

        ``PUT /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}``
        (docs/PROTOCOL.md §7.6).
        """

    @operation
    def delete_poll_option(self, *, channel_url: str, poll_id: int, option_id: int) -> Future[Poll]:
        """Deletes an option and its votes.

        ``DELETE /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}``
        (docs/PROTOCOL.md §7.6).
        """

    @operation
    def vote_poll(
        self, *,
        channel_url: str,
        poll_id: int,
        option_ids: List[int],
        user_id: Optional[str] = None,
    ) -> Future[Poll]:
        """Replaces the user's votes of a poll with ``option_ids`` (``[]`` retracts them).

        ``PUT /v3/group_channels/{channel_url}/polls/{poll_id}/vote`` (docs/PROTOCOL.md §7.6).
        """

    @operation
    def list_poll_voters(
        self, *,
        channel_url: str,
        poll_id: int,
        option_id: int,
        token: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Future[PollVoters]:
        """Who voted for an option: ``{"vote_count", "voters", "next"}``.

        ``GET /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}/voters``
        (docs/PROTOCOL.md §7.6).
        """

    @operation
    def list_poll_changelogs(
        self, *,
        channel_url: str,
        token: Optional[str] = None,
        change_ts: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> Future[PollChangelogPage]:
        """The channel's polls changed or deleted since ``token`` (or ``change_ts``), applied to the
        cache.

        ``GET /v3/group_channels/{channel_url}/polls/changelogs`` (docs/PROTOCOL.md §7.6).
        """


@own_qualnames
class AsyncOperations:
    """The catalog operations of :class:`parley.AsyncClient`: each is awaited for the server's answer."""

    get_current_user = awaiting_operation(Operations.get_current_user)
    update_current_user = awaiting_operation(Operations.update_current_user)
    get_unread_message_count = awaiting_operation(Operations.get_unread_message_count)
    get_unread_channel_count = awaiting_operation(Operations.get_unread_channel_count)
    mark_all_as_read = awaiting_operation(Operations.mark_all_as_read)
    get_channel_invitation_preference = awaiting_operation(Operations.get_channel_invitation_preference)
    set_channel_invitation_preference = awaiting_operation(Operations.set_channel_invitation_preference)
    register_push_token = awaiting_operation(Operations.register_push_token)
    unregister_push_token = awaiting_operation(Operations.unregister_push_token)
    unregister_all_push_tokens = awaiting_operation(Operations.unregister_all_push_tokens)
    list_push_tokens = awaiting_operation(Operations.list_push_tokens)
    get_push_preference = awaiting_operation(Operations.get_push_preference)
    set_push_preference = awaiting_operation(Operations.set_push_preference)
    get_channel_push_preference = awaiting_operation(Operations.get_channel_push_preference)
    set_channel_push_preference = awaiting_operation(Operations.set_channel_push_preference)
    list_users = awaiting_operation(Operations.list_users)
    list_my_group_channels = awaiting_operation(Operations.list_my_group_channels)
    list_group_channels = awaiting_operation(Operations.list_group_channels)
    list_public_group_channels = awaiting_operation(Operations.list_public_group_channels)
    list_channel_changelogs = awaiting_operation(Operations.list_channel_changelogs)
    create_group_channel = awaiting_operation(Operations.create_group_channel)
    get_group_channel = awaiting_operation(Operations.get_group_channel)
    update_group_channel = awaiting_operation(Operations.update_group_channel)
    delete_group_channel = awaiting_operation(Operations.delete_group_channel)
    invite_users = awaiting_operation(Operations.invite_users)
    accept_invitation = awaiting_operation(Operations.accept_invitation)
    decline_invitation = awaiting_operation(Operations.decline_invitation)
    join_channel = awaiting_operation(Operations.join_channel)
    leave_channel = awaiting_operation(Operations.leave_channel)
    freeze_channel = awaiting_operation(Operations.freeze_channel)
    unfreeze_channel = awaiting_operation(Operations.unfreeze_channel)
    hide_channel = awaiting_operation(Operations.hide_channel)
    unhide_channel = awaiting_operation(Operations.unhide_channel)
    reset_my_history = awaiting_operation(Operations.reset_my_history)
    start_typing = awaiting_operation(Operations.start_typing)
    end_typing = awaiting_operation(Operations.end_typing)
    mark_as_read = awaiting_operation(Operations.mark_as_read)
    mark_as_delivered = awaiting_operation(Operations.mark_as_delivered)
    list_members = awaiting_operation(Operations.list_members)
    get_member_state = awaiting_operation(Operations.get_member_state)
    list_operators = awaiting_operation(Operations.list_operators)
    add_operators = awaiting_operation(Operations.add_operators)
    remove_operators = awaiting_operation(Operations.remove_operators)
    remove_all_operators = awaiting_operation(Operations.remove_all_operators)
    ban_user = awaiting_operation(Operations.ban_user)
    unban_user = awaiting_operation(Operations.unban_user)
    get_ban = awaiting_operation(Operations.get_ban)
    list_banned_users = awaiting_operation(Operations.list_banned_users)
    mute_user = awaiting_operation(Operations.mute_user)
    unmute_user = awaiting_operation(Operations.unmute_user)
    get_mute = awaiting_operation(Operations.get_mute)
    list_muted_users = awaiting_operation(Operations.list_muted_users)
    report_channel = awaiting_operation(Operations.report_channel)
    report_message = awaiting_operation(Operations.report_message)
    report_user = awaiting_operation(Operations.report_user)
    get_metadata = awaiting_operation(Operations.get_metadata)
    create_metadata = awaiting_operation(Operations.create_metadata)
    update_metadata = awaiting_operation(Operations.update_metadata)
    delete_metadata = awaiting_operation(Operations.delete_metadata)
    delete_all_metadata = awaiting_operation(Operations.delete_all_metadata)
    get_metacounters = awaiting_operation(Operations.get_metacounters)
    create_metacounters = awaiting_operation(Operations.create_metacounters)
    update_metacounters = awaiting_operation(Operations.update_metacounters)
    delete_metacounter = awaiting_operation(Operations.delete_metacounter)
    delete_all_metacounters = awaiting_operation(Operations.delete_all_metacounters)
    list_messages = awaiting_operation(Operations.list_messages)
    list_thread_replies = awaiting_operation(Operations.list_thread_replies)
    get_total_message_count = awaiting_operation(Operations.get_total_message_count)
    list_message_changelogs = awaiting_operation(Operations.list_message_changelogs)
    get_message = awaiting_operation(Operations.get_message)
    update_message = awaiting_operation(Operations.update_message)
    delete_message = awaiting_operation(Operations.delete_message)
    copy_message = awaiting_operation(Operations.copy_message)
    add_reaction = awaiting_operation(Operations.add_reaction)
    remove_reaction = awaiting_operation(Operations.remove_reaction)
    list_reactions = awaiting_operation(Operations.list_reactions)
    translate_message = awaiting_operation(Operations.translate_message)
    pin_message = awaiting_operation(Operations.pin_message)
    unpin_message = awaiting_operation(Operations.unpin_message)
    add_message_meta_array = awaiting_operation(Operations.add_message_meta_array)
    update_message_meta_array = awaiting_operation(Operations.update_message_meta_array)
    create_poll = awaiting_operation(Operations.create_poll)
    list_polls = awaiting_operation(Operations.list_polls)
    get_poll = awaiting_operation(Operations.get_poll)
    update_poll = awaiting_operation(Operations.update_poll)
    delete_poll = awaiting_operation(Operations.delete_poll)
    close_poll = awaiting_operation(Operations.close_poll)
    add_poll_option = awaiting_operation(Operations.add_poll_option)
    update_poll_option = awaiting_operation(Operations.update_poll_option)
    delete_poll_option = awaiting_operation(Operations.delete_poll_option)
    vote_poll = awaiting_operation(Operations.vote_poll)
    list_poll_voters = awaiting_operation(Operations.list_poll_voters)
    list_poll_changelogs = awaiting_operation(Operations.list_poll_changelogs)
