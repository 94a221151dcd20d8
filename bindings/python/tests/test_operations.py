"""Every catalog operation through the Python binding, against the real server, with
the permission rules surfacing as exceptions carrying the server's code."""
from __future__ import annotations

import asyncio

import pytest

import parley
from test_engine import poll_until

TIMEOUT = 15


def connected(server, user_id: str, token: str) -> parley.Client:
    client = parley.Client(server_url=server.url)
    user = client.connect(user_id, token).result(TIMEOUT)
    assert user["user_id"] == user_id
    assert client.current_user_id == user_id
    return client


def test_event_categories_enum_is_the_librarys_list():
    listed = {entry["name"]: entry["source"] for entry in parley.event_categories()}
    assert listed == {category.value: category.source for category in parley.EventCategory}
    assert parley.EventCategory.CHANNEL_CHANGELOG_DELETED == "channel_changelog_deleted"
    assert f"{parley.EventCategory.MESSAGE_SENT}" == "message_sent"


def test_catalog_lists_operations_with_their_routes():
    names = {entry["name"]: entry for entry in parley.operations()}
    assert names["create_group_channel"]["method"] == "POST"
    assert names["invite_users"]["required"] == ["user_ids"]
    assert len(names) == len(parley.operations())


def test_operations_need_a_session_and_valid_params(server, admin):
    token = admin.user("solo")
    with parley.Client(server_url=server.url) as client:
        assert client.current_user_id is None
        with pytest.raises(parley.InvalidState):
            client.perform("list_my_group_channels").result(TIMEOUT)
        with pytest.raises(parley.Unauthorized):
            client.connect("solo", "not-a-token").result(TIMEOUT)
        client.connect("solo", token).result(TIMEOUT)
        with pytest.raises(parley.InvalidArgument):
            client.perform("no_such_operation")
        with pytest.raises(parley.InvalidArgument) as raised:
            client.perform("get_group_channel").result(TIMEOUT)  # channel_url missing
        assert "channel_url" in raised.value.message
        with pytest.raises(parley.InvalidArgument) as raised:
            client.perform("invite_users", channel_url="x").result(TIMEOUT)
        assert "user_ids" in raised.value.message
        with pytest.raises(parley.NotFound) as raised:
            client.get_group_channel(channel_url="missing").result(TIMEOUT)
        assert raised.value.http_status == 404 and raised.value.server_code == 400201
        with pytest.raises(parley.InvalidState):
            client.connect("someone_else", token).result(TIMEOUT)
        client.disconnect()
        assert client.current_user_id is None


def test_every_operation_against_the_real_server(server, admin):
    tokens = {name: admin.user(name) for name in ("alice", "bob", "carol", "dave", "erin")}
    exercised: set[str] = set()
    alice = connected(server, "alice", tokens["alice"])
    bob = connected(server, "bob", tokens["bob"])

    def run(client: parley.Client, operation: str, **params):
        exercised.add(operation)
        return client.perform(operation, params).result(TIMEOUT)

    try:
        me = run(alice, "get_current_user")
        assert me["user_id"] == "alice"
        assert run(alice, "update_current_user", nickname="Al")["nickname"] == "Al"

        channel = run(alice, "create_group_channel", user_ids=["bob"], name="Team", operator_ids=["alice"])
        url = channel["channel_url"]
        assert {member["user_id"] for member in channel["members"]} == {"alice", "bob"}
        assert run(alice, "get_group_channel", channel_url=url)["name"] == "Team"
        assert run(alice, "update_group_channel", channel_url=url, name="Team 2")["name"] == "Team 2"

        # Invitations: dave and erin do not auto-accept.
        for name in ("dave", "erin"):
            with connected(server, name, tokens[name]) as invitee:
                assert run(invitee, "set_channel_invitation_preference", auto_accept=False) == {"auto_accept": False}
                assert run(invitee, "get_channel_invitation_preference") == {"auto_accept": False}
        invited = run(alice, "invite_users", channel_url=url, user_ids=["carol", "dave", "erin"])
        states = {member["user_id"]: member["state"] for member in invited["members"]}
        assert states["carol"] == "joined" and states["dave"] == "invited"
        with connected(server, "dave", tokens["dave"]) as dave:
            assert run(dave, "accept_invitation", channel_url=url)["member_state"] == "joined"
        with connected(server, "erin", tokens["erin"]) as erin:
            run(erin, "decline_invitation", channel_url=url)
            with pytest.raises(parley.Forbidden):
                run(erin, "list_members", channel_url=url)

        users = run(bob, "list_users", user_ids=["alice", "carol"])["users"]
        assert [user["user_id"] for user in users] == ["alice", "carol"]
        changes = run(bob, "list_channel_changelogs", change_ts=0, show_metadata=True)
        assert url in [entry["channel_url"] for entry in changes["updated"]] and changes["has_more"] is False
        before = run(alice, "list_message_changelogs", channel_url=url, change_ts=0)
        assert before["updated"] == [] and before["deleted"] == []

        listed = run(alice, "list_my_group_channels", show_empty=True)
        assert url in [entry["channel_url"] for entry in listed["channels"]]
        assert listed["next"] == ""
        assert url in [entry["channel_url"] for entry in run(alice, "list_group_channels")["channels"]]

        members = run(alice, "list_members", channel_url=url)["members"]
        assert {member["user_id"] for member in members} == {"alice", "bob", "carol", "dave"}
        assert run(alice, "get_member_state", channel_url=url, member_id="bob")["state"] == "joined"
        run(alice, "add_operators", channel_url=url, operator_ids=["bob"])
        assert {op["user_id"] for op in run(alice, "list_operators", channel_url=url)["operators"]} == {"alice", "bob"}
        run(alice, "remove_operators", channel_url=url, operator_ids=["bob"])
        assert {op["user_id"] for op in run(alice, "list_operators", channel_url=url)["operators"]} == {"alice"}

        # Permission rules surface with the server's code.
        with pytest.raises(parley.Forbidden) as raised:
            run(bob, "freeze_channel", channel_url=url)
        assert raised.value.server_code == 400108
        assert run(alice, "freeze_channel", channel_url=url)["freeze"] is True
        assert run(alice, "unfreeze_channel", channel_url=url)["freeze"] is False

        # Metadata and metacounters.
        assert run(alice, "create_metadata", channel_url=url, metadata={"topic": "x"}) == {"topic": "x"}
        assert run(alice, "update_metadata", channel_url=url, metadata={"topic": "y"}) == {"topic": "y"}
        assert run(alice, "get_metadata", channel_url=url) == {"topic": "y"}
        run(alice, "delete_metadata", channel_url=url, key="topic")
        assert run(alice, "get_metadata", channel_url=url) == {}
        run(alice, "create_metadata", channel_url=url, metadata={"a": "1", "b": "2"})
        run(alice, "delete_all_metadata", channel_url=url)
        assert run(alice, "get_metadata", channel_url=url) == {}
        assert run(alice, "create_metacounters", channel_url=url, metacounter={"likes": 1}) == {"likes": 1}
        assert run(alice, "update_metacounters", channel_url=url, metacounter={"likes": 2}, mode="increase") == {"likes": 3}
        assert run(alice, "get_metacounters", channel_url=url) == {"likes": 3}
        run(alice, "delete_metacounter", channel_url=url, key="likes")
        run(alice, "create_metacounters", channel_url=url, metacounter={"x": 1})
        run(alice, "delete_all_metacounters", channel_url=url)
        assert run(alice, "get_metacounters", channel_url=url) == {}

        # Messages (sent by the admin API for now; the outbox sends them from the client).
        first = admin.send(url, "alice", "hello")
        second = admin.send(url, "bob", "hi alice", custom_type="greeting")
        reply = admin.send(url, "bob", "a reply", parent_message_id=first["message_id"])
        page = run(alice, "list_messages", channel_url=url, message_ts=second["created_at"] + 1, prev_limit=10, next_limit=0)
        assert [message["message_id"] for message in page["messages"]] == [first["message_id"], second["message_id"]]
        assert page["has_next"] is False
        # The reference SDK's defaults: the anchor's own message only when asked, its type names.
        around = run(alice, "list_messages", channel_url=url, message_id=second["message_id"], prev_limit=10, next_limit=10)
        assert [message["message_id"] for message in around["messages"]] == [first["message_id"]]
        around = run(alice, "list_messages", channel_url=url, message_id=second["message_id"], prev_limit=10, next_limit=10,
                     include=True)
        assert [message["message_id"] for message in around["messages"]] == [first["message_id"], second["message_id"]]
        for name, count in (("user", 2), ("all", 2), ("file", 0), ("admin", 0), ("MESG", 2)):
            assert len(run(alice, "list_messages", channel_url=url, prev_limit=10, message_type=name)["messages"]) == count, name
        with pytest.raises(parley.InvalidArgument):
            run(alice, "list_messages", channel_url=url, message_type="text")
        replies = run(alice, "list_thread_replies", channel_url=url, parent_message_id=first["message_id"], message_ts=0, next_limit=10, prev_limit=0)
        assert [message["message_id"] for message in replies["messages"]] == [reply["message_id"]]
        assert run(alice, "get_message", channel_url=url, message_id=second["message_id"])["message"] == "hi alice"
        assert run(alice, "get_total_message_count", channel_url=url)["total"] >= 2
        updated = run(alice, "update_message", channel_url=url, message_id=first["message_id"], message="hello!")
        assert updated["message"] == "hello!" and updated["updated_at"] > 0
        with pytest.raises(parley.Forbidden):
            run(bob, "update_message", channel_url=url, message_id=first["message_id"], message="not yours")
        run(alice, "add_reaction", channel_url=url, message_id=second["message_id"], reaction="thumbs_up")
        reactions = run(alice, "list_reactions", channel_url=url, message_id=second["message_id"])["reactions"]
        assert reactions[0]["key"] == "thumbs_up" and reactions[0]["user_ids"] == ["alice"]
        run(alice, "remove_reaction", channel_url=url, message_id=second["message_id"], reaction="thumbs_up")
        run(alice, "pin_message", channel_url=url, message_id=second["message_id"])
        assert run(alice, "get_group_channel", channel_url=url)["pinned_message_ids"] == [second["message_id"]]
        run(alice, "unpin_message", channel_url=url, message_id=second["message_id"])
        # Polls (§7.6): created, carried by a message, voted on, changed, closed, deleted.
        poll = run(alice, "create_poll", channel_url=url, title="Lunch?", options=["pizza", "sushi"], allow_user_suggestion=True)
        assert poll["message_id"] == 0 and [o["text"] for o in poll["options"]] == ["pizza", "sushi"]
        carrier = admin.send(url, "bob", "vote", poll_id=poll["id"])
        assert run(bob, "vote_poll", channel_url=url, poll_id=poll["id"], option_ids=[2])["voted_option_ids"] == [2]
        assert run(bob, "get_poll", channel_url=url, poll_id=poll["id"])["voter_count"] == 1
        assert len(run(bob, "add_poll_option", channel_url=url, poll_id=poll["id"], text="tacos")["options"]) == 3
        assert run(alice, "update_poll_option", channel_url=url, poll_id=poll["id"], option_id=3, text="tacos!")["options"][2]["text"] == "tacos!"
        assert len(run(alice, "delete_poll_option", channel_url=url, poll_id=poll["id"], option_id=1)["options"]) == 2
        voters = run(alice, "list_poll_voters", channel_url=url, poll_id=poll["id"], option_id=2)
        assert voters["vote_count"] == 1 and [v["user_id"] for v in voters["voters"]] == ["bob"]
        assert run(alice, "update_poll", channel_url=url, poll_id=poll["id"], title="Lunch today?")["title"] == "Lunch today?"
        with pytest.raises(parley.Forbidden):
            run(bob, "update_poll", channel_url=url, poll_id=poll["id"], title="mine")
        assert [p["id"] for p in run(bob, "list_polls", channel_url=url)["polls"]] == [poll["id"]]
        assert [p["id"] for p in run(bob, "list_poll_changelogs", channel_url=url, change_ts=0)["updated"]] == [poll["id"]]
        assert run(alice, "close_poll", channel_url=url, poll_id=poll["id"])["status"] == "closed"
        with pytest.raises(parley.Forbidden):
            run(bob, "vote_poll", channel_url=url, poll_id=poll["id"], option_ids=[3])
        # The answers were applied to the cached message carrying the poll (bob's own votes).
        poll_until(lambda: next((m.get("poll", {}).get("status") for m in alice.cached_messages(url, limit=100)
                                 if m["message_id"] == carrier["message_id"]), None) == "closed")
        run(alice, "delete_poll", channel_url=url, poll_id=poll["id"])
        with pytest.raises(parley.NotFound):
            run(bob, "get_poll", channel_url=url, poll_id=poll["id"])
        with_meta = run(alice, "add_message_meta_array", channel_url=url, message_id=first["message_id"],
                        sorted_metaarray=[{"key": "tags", "value": ["a"]}])
        assert with_meta["sorted_metaarray"] == [{"key": "tags", "value": ["a"]}]
        with_meta = run(alice, "update_message_meta_array", channel_url=url, message_id=first["message_id"],
                        sorted_metaarray=[{"key": "tags", "value": ["b"]}], mode="add")
        assert with_meta["sorted_metaarray"][0]["value"] == ["a", "b"]
        other = run(alice, "create_group_channel", user_ids=["bob"], name="Other")
        with pytest.raises(parley.Forbidden):
            run(bob, "copy_message", channel_url=url, message_id=first["message_id"], dest_channel_url=other["channel_url"])
        copied = run(alice, "copy_message", channel_url=url, message_id=first["message_id"], dest_channel_url=other["channel_url"])
        assert copied["channel_url"] == other["channel_url"] and copied["message"] == "hello!"
        run(alice, "delete_message", channel_url=url, message_id=first["message_id"])
        with pytest.raises(parley.NotFound):
            run(alice, "get_message", channel_url=url, message_id=first["message_id"])

        # Read state, typing, counts.
        run(bob, "start_typing", channel_url=url)
        run(bob, "end_typing", channel_url=url)
        assert run(alice, "get_unread_message_count")["unread_count"] >= 1
        assert run(alice, "get_unread_channel_count")["unread_count"] >= 1
        assert "ts" in run(alice, "mark_as_read", channel_url=url)
        assert "ts" in run(alice, "mark_as_delivered", channel_url=url)
        run(alice, "mark_all_as_read")
        assert run(alice, "get_unread_message_count")["unread_count"] == 0

        # Reports.
        assert run(alice, "report_message", channel_url=url, message_id=second["message_id"], report_category="spam")["report_type"] == "message"
        assert run(alice, "report_user", offending_user_id="bob", channel_url=url, report_category="harassing")["report_type"] == "user"
        assert run(alice, "report_channel", channel_url=url, report_category="suspicious")["report_type"] == "channel"

        # Moderation.
        # Muting and banning work alike: (apply, state, listing, lift) operations, the state's and the listing's keys.
        for target, options, (apply, state, listing, lift), (flag, listed) in [
            ("carol", {"seconds": 60, "description": "calm down"}, ("mute_user", "get_mute", "list_muted_users", "unmute_user"),
             ("is_muted", "muted_list")),
            ("dave", {"seconds": -1}, ("ban_user", "get_ban", "list_banned_users", "unban_user"), ("is_banned", "banned_list")),
        ]:
            run(alice, apply, channel_url=url, user_id=target, **options)
            assert run(alice, state, channel_url=url, target_user_id=target)[flag] is True
            assert [entry["user"]["user_id"] for entry in run(alice, listing, channel_url=url)[listed]] == [target]
            with pytest.raises(parley.Forbidden):
                run(bob, listing, channel_url=url)  # operators only
            run(alice, lift, channel_url=url, target_user_id=target)
            assert run(alice, state, channel_url=url, target_user_id=target)[flag] is False

        # Push tokens and preferences; translation, refused by a server without a translator.
        assert run(bob, "register_push_token", token_type="apns", token="bob-phone")["token"] == "bob-phone"
        assert run(bob, "list_push_tokens", token_type="apns")["tokens"] == ["bob-phone"]
        assert run(bob, "unregister_push_token", token_type="apns", token="bob-phone")["token"] == ["bob-phone"]
        run(bob, "register_push_token", token_type="gcm", token="bob-tablet")
        assert run(bob, "unregister_all_push_tokens")["token"] == ["bob-tablet"]
        assert run(bob, "set_push_preference", push_trigger_option="off")["push_trigger_option"] == "off"
        assert run(bob, "get_push_preference")["push_trigger_option"] == "off"
        assert run(bob, "set_channel_push_preference", channel_url=url, push_trigger_option="all") == {"push_trigger_option": "all"}
        assert run(bob, "get_channel_push_preference", channel_url=url) == {"push_trigger_option": "all"}
        with pytest.raises(parley.InvalidArgument, match="not configured"):
            run(bob, "translate_message", channel_url=url, message_id=first["message_id"], target_languages=["fr"])

        # Hide / unhide / reset history.
        run(bob, "hide_channel", channel_url=url, hide_previous_messages=False)
        hidden = run(bob, "list_my_group_channels", show_empty=True, hidden_mode="hidden_only")
        assert [entry["channel_url"] for entry in hidden["channels"]] == [url]
        run(bob, "unhide_channel", channel_url=url)
        offset = run(bob, "reset_my_history", channel_url=url)["ts_message_offset"]
        assert offset > 0
        assert run(bob, "list_messages", channel_url=url, message_ts=offset + 10_000_000, prev_limit=50)["messages"] == []

        # Public channel: join and leave.
        public = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "is_public": True, "name": "Lobby"})
        assert run(bob, "join_channel", channel_url=public["channel_url"])["member_state"] == "joined"
        run(bob, "leave_channel", channel_url=public["channel_url"])
        # The public channel list: without empty channels unless asked; all or only joined ones.
        lobby = [public["channel_url"]]

        def public_urls(user: parley.Client, **params: object) -> list:
            return [c["channel_url"] for c in run(user, "list_public_group_channels", channel_urls=lobby, **params)["channels"]]

        assert public_urls(bob) == [] and public_urls(bob, show_empty=True) == lobby
        admin.send(public["channel_url"], "alice", "welcome")
        assert public_urls(bob) == public_urls(bob, public_membership_filter="all") == lobby
        assert public_urls(bob, public_membership_filter="joined") == []
        assert public_urls(alice, public_membership_filter="joined") == lobby
        assert run(alice, "list_public_group_channels", channel_urls=[url])["channels"] == []  # not public
        private = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "name": "Private"})
        with pytest.raises(parley.Forbidden) as raised:
            run(bob, "join_channel", channel_url=private["channel_url"])
        assert raised.value.server_code == 400109
        run(alice, "remove_all_operators", channel_url=url)
        assert run(alice, "list_operators", channel_url=url)["operators"] == []
        with pytest.raises(parley.Forbidden):
            run(alice, "delete_group_channel", channel_url=url)  # no longer an operator
        admin.call("POST", f"/v3/group_channels/{url}/operators", {"operator_ids": ["alice"]})
        run(alice, "delete_group_channel", channel_url=url)
        with pytest.raises(parley.NotFound):
            run(alice, "get_group_channel", channel_url=url)
    finally:
        alice.close()
        bob.close()

    missing = {entry["name"] for entry in parley.operations()} - exercised
    assert missing == set(), f"operations without a test: {sorted(missing)}"


def test_async_client_connects_and_performs(server, admin):
    token = admin.user("async_user")

    async def scenario():
        async with parley.AsyncClient(server_url=server.url) as client:
            user = await client.connect("async_user", token)
            assert user["user_id"] == "async_user"
            channel = await client.create_group_channel(name="Async")
            fetched = await client.perform("get_group_channel", channel_url=channel["channel_url"])
            assert fetched["name"] == "Async"
            with pytest.raises(parley.NotFound):
                await client.get_group_channel(channel_url="nope")

    asyncio.run(scenario())


def _pages(client: parley.Client, operation: str, key: str, **params) -> list:
    """Follows `next` tokens to the end; every page respects the limit."""
    items, token, pages = [], None, 0
    while True:
        query = dict(params, limit=2)
        if token:
            query["token"] = token
        answer = client.perform(operation, query).result(TIMEOUT)
        assert len(answer[key]) <= 2
        items += answer[key]
        pages += 1
        token = answer["next"]
        if not token:
            return items
        assert pages < 50, "paging did not end"


def test_list_queries_page_with_tokens_without_skips_or_duplicates(server, admin):
    tokens = {name: admin.user(name) for name in ["owner", "m1", "m2", "m3", "m4"]}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": list(tokens), "channel_url": "paged",
                                                    "operator_ids": ["owner", "m1", "m2"]})["channel_url"]
    for i in range(4):
        admin.call("POST", "/v3/group_channels", {"user_ids": ["owner", "m1"], "channel_url": f"extra-{i}"})
    for name in ["b1", "b2", "b3"]:
        admin.user(name)
        admin.call("POST", f"/v3/group_channels/{url}/ban", {"user_id": name})
    for name in ["m3", "m4"]:
        admin.call("POST", f"/v3/group_channels/{url}/mute", {"user_id": name})
    for i in range(5):
        admin.send(url, "m1", f"message {i}")
    with connected(server, "owner", tokens["owner"]) as client:
        channels = [c["channel_url"] for c in _pages(client, "list_my_group_channels", "channels", show_empty=True)]
        assert sorted(channels) == sorted(["paged"] + [f"extra-{i}" for i in range(4)])
        members = [m["user_id"] for m in _pages(client, "list_members", "members", channel_url=url)]
        assert sorted(members) == sorted(tokens)
        operators = [o["user_id"] for o in _pages(client, "list_operators", "operators", channel_url=url)]
        assert sorted(operators) == ["m1", "m2", "owner"]
        banned = [b["user"]["user_id"] for b in _pages(client, "list_banned_users", "banned_list", channel_url=url)]
        assert sorted(banned) == ["b1", "b2", "b3"]
        muted = [m["user"]["user_id"] for m in _pages(client, "list_muted_users", "muted_list", channel_url=url)]
        assert sorted(muted) == ["m3", "m4"]
        # The previous-message list pages backwards from the oldest message it has (by id,
        # so that equal timestamps are neither lost nor repeated).
        newest = client.list_messages(channel_url=url, prev_limit=2).result(TIMEOUT)["messages"]
        older = client.list_messages(channel_url=url, prev_limit=10, next_limit=0, include=False,
                                     message_id=newest[0]["message_id"]).result(TIMEOUT)["messages"]
        texts = [m["message"] for m in older + newest]
        assert texts == [f"message {i}" for i in range(5)]
