"""The group channel collection against the real server: every order and filter equals the
server's own listing for the user (from the server and from the cache), paging without skip
or duplicate, live changes with their sources, catch-up after offline, dispose races, and
refused queries."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import requests

import parley
from parley import (
    ChangeKind, ChannelChange, CollectionEventSource as Source, GroupChannelListOrder as Order,
    GroupChannelListQuery, HiddenStateFilter,
)
from conftest import Admin, RunningServer, walk_channels

TIMEOUT = 20.0
ME = "me"


def server_listing(server: RunningServer, token: str, query: Dict[str, Any]) -> List[str]:
    """The server's own listing for the user, walked to the end (the truth)."""
    params: Dict[str, Any] = {"limit": 100}
    mapping = {
        "order": "order", "metadata_order_key": "metadata_order_key", "include_empty": "show_empty",
        "include_frozen": "show_frozen", "member_state_filter": "member_state_filter",
        "hidden_state_filter": "hidden_mode", "custom_type_starts_with": "custom_type_startswith",
        "channel_name_contains": "name_contains", "super_channel_filter": "super_mode",
        "public_channel_filter": "public_mode", "unread_channel_filter": "unread_filter",
    }
    lists = {"custom_types": "custom_types", "channel_urls": "channel_urls",
             "user_ids_exact_filter": "members_exactly_in", "user_ids_include_filter": "members_include_in"}
    document = {"order": "latest_last_message", "include_empty": False, **query}  # the query's defaults
    for key, value in document.items():
        if key in mapping:
            params[mapping[key]] = str(value).lower() if isinstance(value, bool) else value
        elif key in lists:
            params[lists[key]] = ",".join(value)
        elif key == "user_ids_include_query_type":
            params["query_type"] = value.upper()
    return walk_channels(server.url, token, ME, params)


class Recorder:
    """Collects a collection's changes, one entry per channel, and waits for them."""

    def __init__(self) -> None:
        self.changes: List[Tuple[ChangeKind, Source, str, Optional[Any]]] = []
        self.condition = threading.Condition()

    def __call__(self, change: ChannelChange) -> None:
        with self.condition:
            if change.kind is ChangeKind.DELETED:
                # A deletion carries the channels as the view last held them, and their URLs.
                assert change.channel_urls == [c["channel_url"] for c in change.channels]
            self.changes += [(change.kind, change.context.source, c["channel_url"], c) for c in change.channels]
            self.condition.notify_all()

    def wait_for(self, kind: ChangeKind, url: str, source: Optional[Source] = None, timeout: float = TIMEOUT) -> Any:
        """Takes the first matching change and returns its channel (for deleted: as last shown)."""
        deadline = time.monotonic() + timeout
        with self.condition:
            while True:
                for entry in self.changes:
                    if entry[0] is kind and entry[2] == url and (source is None or entry[1] is source):
                        self.changes.remove(entry)
                        return entry[3]
                left = deadline - time.monotonic()
                assert left > 0, f"no {kind.value} of {url} ({source}); got {self.changes}"
                self.condition.wait(left)


def load_all(collection: parley.GroupChannelCollection) -> List[str]:
    seen: List[str] = []
    while collection.has_more:
        page = collection.load_more().result(TIMEOUT)
        seen += [channel["channel_url"] for channel in page]
    assert len(seen) == len(set(seen)), f"duplicates while paging: {seen}"
    return collection.channel_urls


def wait_until(predicate: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def world(server: RunningServer, admin: Admin, tmp_path: Path) -> Tuple[parley.Client, str, Admin]:
    """Users me, bob and carol; a client connected as me."""
    token = admin.user(ME)
    admin.user("bob")
    admin.user("carol")
    client = parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50,
                           reconnect_max_delay_ms=300)
    client.connect(ME, token).result(TIMEOUT)
    # `connect` completes before the stream opens: what happens before that comes by the
    # catch-up after it, not live (tests that need the catch-up done wait for a view's LIVE).
    wait_until(lambda: client.connection_state == "open", "the stream to open")
    yield client, token, admin
    client.close()


def make_variety(admin: Admin) -> None:
    """Channels that differ in every way a query can tell apart."""
    def create(url: str, **fields: Any) -> None:
        body = {"channel_url": url, "user_ids": [ME, "bob"], **fields}
        admin.call("POST", "/v3/group_channels", body)

    names = ["Alpha", "beta", "Gamma", "alpha", "Delta", "delta", "Zeta", "beta"]
    for index in range(16):
        create(f"v{index:02d}", name=names[index % len(names)], custom_type=["news", "chat", "newsroom", ""][index % 4],
               is_public=index % 5 == 0, is_super=index % 7 == 0 and index % 5 != 0)
    create("trio", name="Trio", user_ids=[ME, "bob", "carol"])
    create("duo-carol", name="Duo", user_ids=[ME, "carol"])
    for index in (1, 4, 9, 12, "trio"):
        url = index if isinstance(index, str) else f"v{index:02d}"
        admin.send(url, "bob", f"hello {url}")
    admin.send("v04", ME, "mine")  # read by me: v04 is not unread
    for index, value in ((2, "b"), (3, "a"), (5, "c"), (8, "a"), (13, "z")):
        admin.call("POST", f"/v3/group_channels/v{index:02d}/metadata", {"metadata": {"rank": value}})
    admin.call("PUT", "/v3/group_channels/v06/freeze", {"freeze": True})
    admin.call("PUT", "/v3/group_channels/v07/hide", {"user_id": ME, "allow_auto_unhide": True})
    admin.call("PUT", "/v3/group_channels/v10/hide", {"user_id": ME, "allow_auto_unhide": False})
    admin.call("PUT", f"/v3/users/{ME}/channel_invitation_preference", {"auto_accept": False})
    create("invited1", name="Invited", user_ids=["bob"])
    admin.call("POST", "/v3/group_channels/invited1/invite", {"user_ids": [ME], "inviter_id": "bob"})
    admin.call("PUT", f"/v3/users/{ME}/channel_invitation_preference", {"auto_accept": True})


QUERIES: List[Dict[str, Any]] = [
    {"order": order.value} for order in Order if order is not Order.METADATA_VALUE_ALPHABETICAL
] + [
    {"order": "metadata_value_alphabetical", "metadata_order_key": "rank"},
    {"include_empty": False},
    {"include_frozen": False},
    {"member_state_filter": "joined_only"},
    {"member_state_filter": "invited_only"},
    {"member_state_filter": "invited_by_friend"},
    {"member_state_filter": "invited_by_non_friend"},
    {"hidden_state_filter": "hidden_only"},
    {"hidden_state_filter": "hidden_allow_auto_unhide"},
    {"hidden_state_filter": "hidden_prevent_auto_unhide"},
    {"hidden_state_filter": "all"},
    {"custom_types": ["news", "chat"]},
    {"custom_type_starts_with": "news"},
    {"channel_name_contains": "ALP"},
    {"channel_urls": ["v01", "v02", "trio"]},
    {"user_ids_exact_filter": ["bob", "carol"]},
    {"user_ids_exact_filter": ["carol"]},
    {"user_ids_include_filter": ["bob", "carol"], "user_ids_include_query_type": "and"},
    {"user_ids_include_filter": ["bob", "carol"], "user_ids_include_query_type": "or"},
    {"super_channel_filter": "super"},
    {"super_channel_filter": "nonsuper"},
    {"public_channel_filter": "public"},
    {"public_channel_filter": "private"},
    {"unread_channel_filter": "unread_message"},
    # Combinations.
    {"order": "chronological", "include_empty": False, "custom_types": ["news"]},
    {"order": "channel_name_alphabetical", "channel_name_contains": "a", "public_channel_filter": "private"},
    {"order": "channel_name_alphabetical", "hidden_state_filter": "all", "include_frozen": False},
    {"order": "metadata_value_alphabetical", "metadata_order_key": "rank", "custom_type_starts_with": "n"},
    {"order": "metadata_value_alphabetical", "metadata_order_key": "rank", "hidden_state_filter": "all"},
    {"order": "latest_last_message", "unread_channel_filter": "unread_message", "include_empty": False},
    {"order": "chronological", "member_state_filter": "joined_only", "super_channel_filter": "nonsuper",
     "user_ids_include_filter": ["carol"], "user_ids_include_query_type": "or"},
    {"order": "chronological", "hidden_state_filter": "all", "member_state_filter": "invited_only"},
    {"order": "latest_last_message", "custom_types": ["chat", "newsroom"], "public_channel_filter": "public"},
    {"order": "channel_name_alphabetical", "user_ids_exact_filter": ["bob"], "hidden_state_filter": "all"},
    {"order": "chronological", "channel_urls": ["v03", "v06", "v07"], "include_frozen": False},
    {"order": "latest_last_message", "super_channel_filter": "super", "include_empty": True},
]


def test_every_order_and_filter_equals_the_server_listing(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    make_variety(admin)
    client.reconnect()  # the catch-up stores everything the events may not have
    time.sleep(0.5)
    for query in QUERIES:
        query = {"include_empty": True, **query}  # most channels here have no message
        truth = server_listing(server, token, query)
        # From the server (page size 3: many pages, ties across page borders), then from the
        # cache (the first walk marked the list whole): both equal the server's listing.
        for attempt in ("server", "cache"):
            with client.group_channel_collection(query, limit=3) as collection:
                listed = load_all(collection)
            assert listed == truth, f"{attempt} {query}: {listed} != {truth}"


def test_a_thousand_channels_page_in_every_order(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    names = ["north", "south", "east", "west", "North", "mid"]
    for index in range(1000):
        url = f"k{index:04d}"
        admin.call("POST", "/v3/group_channels", {"channel_url": url, "user_ids": [ME], "name": names[index % 6]})
        if index % 3 == 0:
            admin.call("POST", f"/v3/group_channels/{url}/metadata", {"metadata": {"tier": names[index % 4]}})
        if index % 4 == 0:
            admin.send(url, ME, "x")
    for query in ({"order": "chronological"}, {"order": "latest_last_message"}, {"order": "channel_name_alphabetical"},
                  {"order": "metadata_value_alphabetical", "metadata_order_key": "tier"}):
        query = {**query, "include_empty": True}
        truth = server_listing(server, token, query)
        assert len(truth) == 1000
        with client.group_channel_collection(query, limit=100) as collection:
            listed = load_all(collection)
        assert listed == truth, f"{query}: first difference at {next(i for i, (a, b) in enumerate(zip(listed, truth)) if a != b)}"


def test_live_changes_arrive_with_their_source_and_keep_the_list_exact(
        world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    for index in range(6):
        admin.call("POST", "/v3/group_channels", {"channel_url": f"l{index}", "user_ids": [ME, "bob"], "name": f"n{index}"})
    admin.call("POST", "/v3/group_channels/l2/metadata", {"metadata": {"rank": "m"}})
    admin.call("POST", "/v3/group_channels/l3/metadata", {"metadata": {"rank": "n"}})
    views: Dict[str, Tuple[parley.GroupChannelCollection, Recorder, Dict[str, Any]]] = {}
    for name, query in (("latest", {"order": "latest_last_message", "include_empty": True}),
                        ("names", {"order": "channel_name_alphabetical", "include_empty": True}),
                        ("meta", {"order": "metadata_value_alphabetical", "metadata_order_key": "rank", "include_empty": True}),
                        ("unfrozen", {"order": "chronological", "include_frozen": False, "include_empty": True})):
        recorder = Recorder()
        collection = client.group_channel_collection(query, limit=50)
        collection.add_listener(recorder)
        load_all(collection)
        views[name] = (collection, recorder, query)
    for name, (collection, _, _) in views.items():
        wait_until(lambda: collection.freshness is parley.Freshness.LIVE, f"{name} to be live")

    def check_all() -> None:
        for name, (collection, _, query) in views.items():
            truth = server_listing(server, token, query)
            wait_until(lambda: collection.channel_urls == truth, f"{name}: {collection.channel_urls} == {truth}")

    latest, names, meta, unfrozen = (views[n][1] for n in ("latest", "names", "meta", "unfrozen"))
    # Creation by another user, with me in it.
    admin.call("POST", "/v3/group_channels", {"channel_url": "fresh", "user_ids": ["bob", ME], "name": "a-first"})
    latest.wait_for(ChangeKind.ADDED, "fresh", Source.USER_JOINED)
    names.wait_for(ChangeKind.ADDED, "fresh")
    check_all()
    # A new message moves the channel to the top of latest_last_message.
    admin.send("l0", "bob", "up")
    channel = latest.wait_for(ChangeKind.UPDATED, "l0", Source.MESSAGE_RECEIVED)
    assert channel["last_message"]["message"] == "up"
    check_all()
    assert views["latest"][0].channel_urls[0] == "l0"
    # A rename moves it in the name order.
    admin.call("PUT", "/v3/group_channels/l1", {"name": "zz-last"})
    names.wait_for(ChangeKind.UPDATED, "l1", Source.CHANNEL_CHANGED)
    check_all()
    assert views["names"][0].channel_urls[-1] == "l1"
    # A metadata change moves it in the metadata order; new metadata adds it there.
    admin.call("PUT", "/v3/group_channels/l2/metadata", {"metadata": {"rank": "z"}})
    meta.wait_for(ChangeKind.UPDATED, "l2", Source.METADATA_UPDATED)
    admin.call("POST", "/v3/group_channels/l4/metadata", {"metadata": {"rank": "a"}})
    meta.wait_for(ChangeKind.UPDATED, "l4", Source.METADATA_CREATED)
    check_all()
    # Freeze: updated where frozen channels show, deleted where they do not.
    admin.call("PUT", "/v3/group_channels/l3/freeze", {"freeze": True})
    latest.wait_for(ChangeKind.UPDATED, "l3", Source.CHANNEL_FROZEN)
    assert unfrozen.wait_for(ChangeKind.DELETED, "l3", Source.CHANNEL_FROZEN)["freeze"] is False  # as it was shown
    admin.call("PUT", "/v3/group_channels/l3/freeze", {"freeze": False})
    unfrozen.wait_for(ChangeKind.ADDED, "l3", Source.CHANNEL_UNFROZEN)
    check_all()
    # Others join and leave: to a list of channels, a change of member counts.
    admin.call("POST", "/v3/group_channels/l5/invite", {"user_ids": ["carol"]})
    channel = latest.wait_for(ChangeKind.UPDATED, "l5", Source.CHANNEL_MEMBER_COUNT_CHANGED)
    assert channel["member_count"] == 3
    admin.call("PUT", "/v3/group_channels/l5/leave", {"user_ids": ["carol"]})
    channel = latest.wait_for(ChangeKind.UPDATED, "l5", Source.CHANNEL_MEMBER_COUNT_CHANGED)
    assert channel["member_count"] == 2
    check_all()
    # Hide (my own operation) and unhide.
    client.hide_channel(channel_url="l5").result(TIMEOUT)
    # The view showed the change before the completion ran.
    assert "l5" not in views["latest"][0].channel_urls
    latest.wait_for(ChangeKind.DELETED, "l5")
    check_all()
    client.unhide_channel(channel_url="l5").result(TIMEOUT)
    latest.wait_for(ChangeKind.ADDED, "l5")
    check_all()
    # Leave, ban, delete.
    client.leave_channel(channel_url="l4").result(TIMEOUT)
    latest.wait_for(ChangeKind.DELETED, "l4")
    admin.call("POST", "/v3/group_channels/l1/ban", {"user_id": ME})
    latest.wait_for(ChangeKind.DELETED, "l1", Source.USER_BANNED)
    admin.call("DELETE", "/v3/group_channels/l0")
    latest.wait_for(ChangeKind.DELETED, "l0", Source.CHANNEL_DELETED)
    check_all()
    # Typing shows on the channel in view.
    admin.call("POST", "/v3/group_channels/l2/typing", {"user_ids": ["bob"]})
    channel = latest.wait_for(ChangeKind.UPDATED, "l2", Source.TYPING_STATUS)
    assert [user["user_id"] for user in channel["typing_users"]] == ["bob"]
    for collection, _, _ in views.values():
        collection.dispose()


def test_changes_made_while_offline_arrive_as_the_changelog(
        world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    for index in range(5):
        admin.call("POST", "/v3/group_channels", {"channel_url": f"o{index}", "user_ids": [ME, "bob"], "name": f"o{index}"})
    recorder = Recorder()
    query = {"order": "channel_name_alphabetical", "include_empty": True}
    with client.group_channel_collection(query, limit=10) as collection:
        collection.add_listener(recorder)
        load_all(collection)
        wait_until(lambda: collection.channel_urls == [f"o{i}" for i in range(5)], "the five channels")
        with recorder.condition:
            recorder.changes.clear()
        client.disconnect()
        admin.call("POST", "/v3/group_channels", {"channel_url": "o9", "user_ids": ["bob", ME], "name": "o9"})
        admin.call("PUT", "/v3/group_channels/o1", {"name": "o8"})
        admin.call("DELETE", "/v3/group_channels/o2")
        admin.call("PUT", "/v3/group_channels/o3/leave", {"user_ids": [ME]})
        time.sleep(0.2)
        assert not recorder.changes, "nothing is reported while offline"
        client.connect(ME, token).result(TIMEOUT)
        recorder.wait_for(ChangeKind.ADDED, "o9", Source.CHANNEL_CHANGELOG)
        recorder.wait_for(ChangeKind.UPDATED, "o1", Source.CHANNEL_CHANGELOG)
        recorder.wait_for(ChangeKind.DELETED, "o2", Source.CHANNEL_CHANGELOG)
        recorder.wait_for(ChangeKind.DELETED, "o3", Source.CHANNEL_CHANGELOG)
        truth = server_listing(server, token, query)
        wait_until(lambda: collection.channel_urls == truth, "the list equals the server's")
        assert truth == ["o0", "o4", "o1", "o9"]
        time.sleep(0.3)
        assert not recorder.changes, f"each difference is reported once: {recorder.changes}"


def test_the_first_page_comes_from_the_cache_offline(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user(ME)
    admin.user("bob")
    for index in range(7):
        admin.call("POST", "/v3/group_channels", {"channel_url": f"c{index}", "user_ids": [ME, "bob"], "name": f"c{index}"})
    query = GroupChannelListQuery(order=Order.CHANNEL_NAME_ALPHABETICAL, limit=4, include_empty=True)
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as online:
        online.connect(ME, token).result(TIMEOUT)
        with online.group_channel_collection(query) as collection:
            first = collection.load_more().result(TIMEOUT)
            load_all(collection)
    # The same cache, the server gone.
    server.process.terminate()
    server.process.wait(timeout=10)
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"),
                       connect_timeout_ms=300, reconnect_initial_delay_ms=100) as offline:
        offline.connect(ME, token).result(TIMEOUT)
        with offline.group_channel_collection(query) as collection:
            page = collection.load_more().result(TIMEOUT)
            assert [c["channel_url"] for c in page] == [c["channel_url"] for c in first] == ["c0", "c1", "c2", "c3"]
            # The list was walked whole online: the rest comes from the cache too.
            assert load_all(collection) == [f"c{i}" for i in range(7)]


def test_the_query_options_shape_the_channels(world: Tuple[parley.Client, str, Admin]) -> None:
    client, _, admin = world
    admin.call("POST", "/v3/group_channels", {"channel_url": "shape", "user_ids": [ME, "bob"]})
    admin.call("POST", "/v3/group_channels/shape/metadata", {"metadata": {"k": "v"}})
    with client.group_channel_collection(include_member_list=False, include_metadata=False, include_empty=True) as bare, \
            client.group_channel_collection(include_empty=True) as full:
        channel = bare.load_more().result(TIMEOUT)[0]
        assert "members" not in channel and "metadata" not in channel
        full.load_more().result(TIMEOUT)
        # The cached first page may predate the metadata event; the list catches up.
        wait_until(lambda: full.channels[0].get("metadata") == {"k": "v"}, "the metadata in the list")
        assert sorted(m["user_id"] for m in full.channels[0]["members"]) == ["bob", ME]


@pytest.mark.parametrize("options, field", [
    ({"ordr": "chronological"}, "ordr"),
    ({"order": "random"}, "order"),
    ({"order": "metadata_value_alphabetical"}, "metadata_order_key"),
    ({"metadata_order_key": "k"}, "metadata_order_key"),
    ({"limit": 0}, "limit"),
    ({"limit": 101}, "limit"),
    ({"include_empty": "yes"}, "include_empty"),
    ({"user_ids_exact_filter": ["a"], "user_ids_include_filter": ["b"]}, "user_ids_exact_filter"),
    ({"custom_types": ["a,b"]}, "custom_types"),
    ({"member_state_filter": 3}, "member_state_filter"),
])
def test_invalid_queries_are_refused_naming_the_field(world: Tuple[parley.Client, str, Admin], options: Dict[str, Any], field: str) -> None:
    client, _, _ = world
    with pytest.raises(parley.InvalidArgument) as failure:
        client.group_channel_collection(options)
    assert field in str(failure.value)


def test_misuse_gives_clear_errors(world: Tuple[parley.Client, str, Admin], server: RunningServer, tmp_path: Path) -> None:
    client, _, admin = world
    admin.call("POST", "/v3/group_channels", {"channel_url": "only", "user_ids": [ME]})
    collection = client.group_channel_collection(limit=5, include_empty=True)
    assert collection.load_more().result(TIMEOUT)[0]["channel_url"] == "only"
    wait_until(lambda: not collection.has_more, "the server's page to end the list")
    assert collection.load_more().result(TIMEOUT) == []  # nothing more: an empty page
    collection.dispose()
    collection.dispose()  # harmless
    with pytest.raises(parley.InvalidHandle):
        collection.load_more()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "other")) as never_connected:
        with pytest.raises(parley.InvalidState):
            never_connected.group_channel_collection()


def test_closing_the_client_disposes_its_collections(world: Tuple[parley.Client, str, Admin]) -> None:
    client, _, admin = world
    admin.call("POST", "/v3/group_channels", {"channel_url": "x", "user_ids": [ME, "bob"]})
    collection = client.group_channel_collection()
    collection.load_more().result(TIMEOUT)
    client.close()
    with pytest.raises(parley.InvalidState):
        collection.load_more().result(TIMEOUT)
    collection.dispose()


def test_dispose_racing_events_never_calls_back_afterwards(world: Tuple[parley.Client, str, Admin]) -> None:
    client, _, admin = world
    admin.call("POST", "/v3/group_channels", {"channel_url": "busy", "user_ids": [ME, "bob"]})
    stop = threading.Event()
    late: List[str] = []

    def chatter() -> None:
        session = requests.Session()
        session.headers["Api-Token"] = admin.server.api_token
        count = 0
        while not stop.is_set():
            count += 1
            session.post(f"{admin.server.url}/v3/group_channels/busy/messages",
                         json={"message_type": "MESG", "user_id": "bob", "message": f"m{count}"}, timeout=10)

    sender = threading.Thread(target=chatter)
    sender.start()
    try:
        for round_ in range(1000):
            disposed = threading.Event()

            def on_change(context: Any, channels: Any, disposed: threading.Event = disposed, round_: int = round_) -> None:
                if disposed.is_set():
                    late.append(f"round {round_}: {context}")

            collection = client.group_channel_collection(on_updated=on_change, on_added=on_change)
            if round_ % 2 == 0:
                collection.load_more()  # sometimes disposed while the page loads
            else:
                collection.load_more().result(TIMEOUT)
                if round_ % 10 == 1:
                    time.sleep(0.005)
            collection.dispose()
            disposed.set()
    finally:
        stop.set()
        sender.join()
    time.sleep(0.2)
    assert not late, late[:5]


def test_async_changes(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user(ME)
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"channel_url": "a1", "user_ids": [ME, "bob"]})

    async def main() -> None:
        async with parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
            await client.connect(ME, token)
            with client.group_channel_collection(order=Order.CHRONOLOGICAL, include_empty=True) as collection:
                assert [c["channel_url"] for c in await collection.load_more()] == ["a1"]
                admin.call("POST", "/v3/group_channels", {"channel_url": "a2", "user_ids": ["bob", ME]})
                async for change in collection.changes():
                    if change.kind is ChangeKind.ADDED:
                        assert [c["channel_url"] for c in change.channels] == ["a2"]
                        break
                assert [c["channel_url"] for c in collection.channels] == ["a2", "a1"]

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_sources_table_matches_the_enum() -> None:
    table = parley.collection_sources()
    assert [entry["name"] for entry in table] == [source.value for source in Source]
    realtime = [entry["code"] for entry in table if entry["code"] < 100]
    assert realtime == list(range(1, len(realtime) + 1))
    assert [entry["code"] for entry in table if entry["code"] >= 100] == list(range(100, 100 + len(table) - len(realtime)))
    assert HiddenStateFilter("all") is HiddenStateFilter.ALL


def test_dispose_from_inside_a_callback(world: Tuple[parley.Client, str, Admin]) -> None:
    client, _, admin = world
    admin.call("POST", "/v3/group_channels", {"channel_url": "self", "user_ids": [ME, "bob"]})
    calls: List[str] = []
    holder: Dict[str, parley.GroupChannelCollection] = {}

    def on_updated(context: Any, channels: Any) -> None:
        calls.append(context.source.value)
        holder["collection"].dispose()  # from inside its own callback

    holder["collection"] = client.group_channel_collection(on_updated=on_updated, include_empty=True)
    holder["collection"].load_more().result(TIMEOUT)
    wait_until(lambda: not holder["collection"].disposed and holder["collection"].channel_urls == ["self"], "the channel")
    # Sent once the view is live: before its stream opens (or while the catch-up after it
    # runs) the message would come by that catch-up, as a channel changelog.
    wait_until(lambda: holder["collection"].disposed or holder["collection"].freshness is parley.Freshness.LIVE,
               "the view to be live")
    assert not holder["collection"].disposed, f"disposed by a callback before the message: {calls}"
    admin.send("self", "bob", "one")
    wait_until(lambda: len(calls) == 1, "the first update")
    admin.send("self", "bob", "two")
    time.sleep(0.3)
    assert calls == ["message_received"] and holder["collection"].disposed
