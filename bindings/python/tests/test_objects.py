"""The TypedDicts of parley.objects describe what the package really hands out: objects taken
from the server's answers, the cache, the collections and the outbox carry every required key,
and every key they share with the TypedDict has its type."""
from __future__ import annotations

import typing
from typing import Any, List, Union

import parley
from parley import objects

TIMEOUT = 15


def problems(value: Any, hint: Any, where: str) -> List[str]:
    """Where `value` does not fit the type `hint` (TypedDicts, List, Dict, Union, Optional, scalars)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return []
    if origin is Union:
        options = [problems(value, option, where) for option in typing.get_args(hint)]
        return [] if any(not found for found in options) else options[0]
    if isinstance(hint, type) and typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        found = [f"{where}: missing required key {key!r}" for key in sorted(hint.__required_keys__) if key not in value]
        hints = typing.get_type_hints(hint)
        for key, item in value.items():
            if key in hints:
                found += problems(item, hints[key], f"{where}.{key}")
        return found
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {value!r}"]
        (item_hint,) = typing.get_args(hint)
        return [problem for index, item in enumerate(value) for problem in problems(item, item_hint, f"{where}[{index}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        _, item_hint = typing.get_args(hint)
        return [problem for key, item in value.items() for problem in problems(item, item_hint, f"{where}.{key}")]
    if hint is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{where}: expected int, got {value!r}"]
    if hint in (str, bool):
        return [] if isinstance(value, hint) else [f"{where}: expected {hint.__name__}, got {value!r}"]
    if hint is type(None):
        return [] if value is None else [f"{where}: expected None, got {value!r}"]
    raise AssertionError(f"{where}: no check for {hint!r}")


def check(value: Any, hint: Any, where: str) -> None:
    found = problems(value, hint, where)
    assert not found, "\n".join(found)


def test_objects_from_every_source_fit_their_types(server, admin) -> None:
    tokens = {name: admin.user(name, metadata={"team": "a"}) for name in ("alice", "bob")}
    with parley.Client(server_url=server.url) as client:
        user = client.connect("alice", tokens["alice"]).result(TIMEOUT)
        check(user, objects.User, "connect")
        check(client.get_current_user(include_unread_count=True).result(TIMEOUT), objects.User, "get_current_user")
        check(client.list_users().result(TIMEOUT), objects.UserListPage, "list_users")

        created = client.create_group_channel(user_ids=["bob"], name="Team", operator_ids=["alice"]).result(TIMEOUT)
        check(created, objects.Channel, "create_group_channel")
        url = created["channel_url"]
        client.create_metadata(channel_url=url, metadata={"topic": "x"}).result(TIMEOUT)
        client.create_metacounters(channel_url=url, metacounter={"likes": 1}).result(TIMEOUT)

        first = admin.send(url, "bob", "hello @alice", mentioned_user_ids=["alice"], sorted_metaarray=[{"key": "k", "value": ["v"]}])
        admin.send(url, "alice", "a reply", parent_message_id=first["message_id"])
        admin.call("POST", f"/v3/group_channels/{url}/messages",
                   {"message_type": "FILE", "user_id": "bob", "url": "https://example.com/a.png", "file_name": "a.png",
                    "file_size": 3, "file_type": "image/png",
                    "thumbnails": [{"url": "https://example.com/t.png", "width": 1, "height": 1, "real_width": 1,
                                    "real_height": 1}]})
        client.add_reaction(channel_url=url, message_id=first["message_id"], reaction="ok").result(TIMEOUT)

        check(client.get_group_channel(channel_url=url, show_member=True, show_metadata=True, show_metacounter=True,
                                       show_read_receipt=True, show_delivery_receipt=True).result(TIMEOUT),
              objects.Channel, "get_group_channel")
        check(client.list_my_group_channels(show_member=True, show_empty=True).result(TIMEOUT), objects.ChannelListPage,
              "list_my_group_channels")
        check(client.list_channel_changelogs(change_ts=0, show_member=True, show_metadata=True).result(TIMEOUT),
              objects.ChannelChangelogPage, "list_channel_changelogs")
        check(client.list_members(channel_url=url).result(TIMEOUT), objects.MemberListPage, "list_members")
        page = client.list_messages(channel_url=url, prev_limit=10, include_reply_type="ALL", include_reactions=True,
                                    include_thread_info=True, include_parent_message_info=True,
                                    with_sorted_meta_array=True).result(TIMEOUT)
        check(page, objects.MessageListPage, "list_messages")
        assert {"file", "thumbnails", "reactions", "thread_info", "parent_message_info", "sorted_metaarray"} <= {
            key for message in page["messages"] for key in message}
        check(client.get_message(channel_url=url, message_id=first["message_id"]).result(TIMEOUT), objects.Message,
              "get_message")
        check(client.list_message_changelogs(channel_url=url, change_ts=0).result(TIMEOUT), objects.MessageChangelogPage,
              "list_message_changelogs")

        pending, delivered = client.send_user_message(url, "sent", custom_type="greeting", mentioned_user_ids=["bob"])
        check(pending, objects.Message, "pending message")
        check(delivered.result(TIMEOUT), objects.Message, "sent message")
        check(client.cached_channels(), List[objects.Channel], "cached_channels")
        check(client.cached_channel(url), objects.Channel, "cached_channel")
        check(client.cached_messages(url), List[objects.Message], "cached_messages")
        check(client.cached_message_page(url), objects.CachedMessagePage, "cached_message_page")

        with client.group_channel_collection(include_empty=True) as channels:
            check(channels.load_more().result(TIMEOUT), List[objects.Channel], "group_channel_collection")
            check(channels.channels, List[objects.Channel], "group_channel_collection.channels")
        changes: List[parley.MessageChange] = []
        with client.message_collection(url, previous_result_size=10) as view:
            view.add_listener(changes.append)
            cached, from_server = view.start()
            check(cached.result(TIMEOUT), List[objects.Message], "message_collection (cache)")
            check(from_server.result(TIMEOUT), List[objects.Message], "message_collection (server)")
            view.send_user_message("through the view")[1].result(TIMEOUT)
            check(view.messages, List[objects.Message], "message_collection.messages")
        for change in changes:
            check(change.messages, List[objects.Message], f"MessageChange {change.kind.name}")
            check(change.channel, Union[objects.Channel, None], f"MessageChange {change.kind.name} channel")
        with client.sync_view(url) as sync:
            sync.fetch().result(TIMEOUT)
            check(sync.succeeded_messages, List[objects.Message], "sync_view")
