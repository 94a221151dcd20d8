"""Stateful queries and keyed handlers through the binding, against the real server: each walk
equals the server's own listing, handlers hear each event in order and may remove themselves
and each other, and the async client iterates queries with ``async for``."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import parley


def wait_until(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture
def room(admin):
    """alice (operator) and five others in "q-room", with 19 messages in groups sharing a millisecond."""
    token = admin.user("alice")
    for user in ("bob", "carol", "dave", "erin", "frank"):
        admin.user(user)
    admin.call("POST", "/v3/group_channels", {
        "user_ids": ["alice", "bob", "carol", "dave", "erin", "frank"], "channel_url": "q-room", "operator_ids": ["alice"],
    })
    base = int(time.time() * 1000) - 60_000
    count = 0
    for group, size in enumerate([3, 1, 4, 2, 5, 1, 3]):
        for _ in range(size):
            admin.send("q-room", "bob" if count % 2 else "carol", f"old{count}", created_at=base + group,
                       custom_type="odd" if count % 2 else "even")
            count += 1
    return token


def test_previous_messages_walk_to_the_servers_listing(server, admin, room):
    with parley.Client(server_url=server.url, cache_mode="memory") as client:
        client.connect("alice", room).result(timeout=20)
        truth = [m["message_id"] for m in client.list_messages(channel_url="q-room", prev_limit=200, include=True).result()["messages"]]
        assert len(truth) == 19
        query = client.create_query("previous_messages", channel_url="q-room", limit=4)
        pages = list(query.pages())
        assert [len(page) for page in pages] == [4, 4, 4, 4, 3]
        assert [m["message_id"] for page in reversed(pages) for m in page] == truth
        assert not query.has_next
        assert query.load_next_page().result(timeout=20) == []

        # Items, newest first with reverse, exactly the listing backwards.
        items = list(client.create_query("previous_messages", channel_url="q-room", limit=3, reverse=True))
        assert [m["message_id"] for m in items] == truth[::-1]

        filtered = client.list_messages(channel_url="q-room", prev_limit=200, include=True, custom_types=["odd"],
                                        sender_ids=["bob"]).result()["messages"]
        query = client.create_query("previous_messages", channel_url="q-room", limit=2, custom_types=["odd"],
                                    sender_user_ids=["bob"], reverse=True)
        assert [m["message_id"] for m in query] == [m["message_id"] for m in reversed(filtered)]
        query.dispose()
        query.dispose()
        with pytest.raises(parley.InvalidHandle):
            query.load_next_page()


def test_list_queries_walk_to_the_servers_listings(server, admin, room):
    for user in ("erin", "frank"):
        admin.call("POST", "/v3/group_channels/q-room/mute", {"user_id": user})
    for user in ("dave",):
        admin.call("POST", "/v3/group_channels/q-room/ban", {"user_id": user})
    for index in range(5):
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": f"c{index}",
                                                  "is_public": index % 2 == 0, "name": f"n{5 - index}"})
    with parley.Client(server_url=server.url, cache_mode="memory") as client:
        client.connect("alice", room).result(timeout=20)
        cases = [
            ("members", {"channel_url": "q-room"}, "list_members", {"channel_url": "q-room"}, "members", lambda m: m["user_id"]),
            ("operators", {"channel_url": "q-room"}, "list_operators", {"channel_url": "q-room"}, "operators", lambda u: u["user_id"]),
            ("muted_users", {"channel_url": "q-room"}, "list_muted_users", {"channel_url": "q-room"}, "muted_list",
             lambda m: m["user"]["user_id"]),
            ("banned_users", {"channel_url": "q-room"}, "list_banned_users", {"channel_url": "q-room"}, "banned_list",
             lambda b: b["user"]["user_id"]),
            ("group_channels", {"include_empty": True, "order": "channel_name_alphabetical"}, "list_my_group_channels",
             {"show_empty": True, "order": "channel_name_alphabetical"}, "channels", lambda c: c["channel_url"]),
            ("public_group_channels", {"include_empty": True}, "list_public_group_channels", {"show_empty": True},
             "channels", lambda c: c["channel_url"]),
        ]
        for kind, options, operation, params, member, key in cases:
            truth = [key(item) for item in client.perform(operation, dict(params, limit=100)).result()[member]]
            assert truth, kind
            with client.create_query(kind, limit=1, **options) as query:
                walked = [key(item) for item in query]
            assert walked == truth, kind
        with pytest.raises(parley.InvalidArgument, match="unknown query kind"):
            client.create_query("friends")
        with pytest.raises(parley.InvalidArgument, match="options.order"):
            client.create_query("members", channel_url="q-room", order="by-height")


def test_a_second_load_while_one_runs_is_refused(server, admin, room):
    with parley.Client(server_url=server.url, cache_mode="memory", dispatch_mode="manual") as client:
        connected = client.connect("alice", room)
        while not connected.done():
            client.dispatch()
        query = client.create_query("members", channel_url="q-room", limit=2)
        first = query.load_next_page()
        assert query.is_loading
        with pytest.raises(parley.InvalidState, match="query in progress"):
            query.load_next_page()
        while not first.done():
            client.dispatch()
        # The manual client's pages come through dispatch: iterating runs it.
        rest = list(query)
        assert len(first.result(timeout=0)) == 2 and len(rest) == 4


def test_keyed_handlers_hear_each_event_in_order_and_may_remove_each_other(server, admin, room):
    heard = []
    lock = threading.Lock()
    with parley.Client(server_url=server.url, cache_mode="memory") as client:
        def named(name):
            def handler(category, channel_url, payload):
                if category != "message_received":
                    return
                text = payload["message"]["message"]
                with lock:
                    heard.append(f"{name}:{text}")
                if name == "a" and text == "m2":
                    client.remove_event_handler("b")
                if name == "c" and text == "m3":
                    client.remove_event_handler("c")
            return handler

        client.add_event_handler("a", named("a"))
        client.add_event_handler("b", named("b"))
        client.set_event_handler(named("set"))
        client.add_event_handler("c", named("c"))
        connections = []
        client.add_connection_handler("x", lambda event, error: connections.append(("x", event)))
        client.add_connection_handler("y", lambda event, error: connections.append(("y", event)))
        with pytest.raises(parley.InvalidArgument):
            client.add_event_handler("", named("never"))
        client.remove_connection_handler("not-there")

        client.connect("alice", room).result(timeout=20)
        assert wait_until(lambda: client.connection_state == "open")
        for index in range(1, 5):
            admin.send("q-room", "bob", f"m{index}")
        assert wait_until(lambda: "set:m4" in heard)
        time.sleep(0.1)
        assert heard == ["a:m1", "b:m1", "set:m1", "c:m1", "a:m2", "set:m2", "c:m2", "a:m3", "set:m3", "c:m3",
                         "a:m4", "set:m4"]
        assert connections[:4] == [("x", "connecting"), ("y", "connecting"), ("x", "connected"), ("y", "connected")]


def test_async_queries_and_handlers(server, admin, room):
    async def main():
        async with parley.AsyncClient(server_url=server.url, cache_mode="memory") as client:
            events = []
            client.add_event_handler("log", lambda category, url, payload: events.append(category))
            await client.connect("alice", room)
            truth = (await client.list_messages(channel_url="q-room", prev_limit=200, include=True))["messages"]
            query = client.create_query("previous_messages", channel_url="q-room", limit=5, reverse=True)
            walked = [message["message_id"] async for message in query]
            assert walked == [m["message_id"] for m in reversed(truth)]
            assert not query.has_next and await query.load_next_page() == []
            members = client.create_query("members", channel_url="q-room", limit=4)
            pages = [page async for page in members.pages()]
            assert [len(page) for page in pages] == [4, 2]
            client.remove_event_handler("log")
    asyncio.run(main())
