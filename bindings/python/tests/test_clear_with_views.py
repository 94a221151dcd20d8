"""`clear_cached_data` with views open (docs/C-API.md "Clearing the cache with views open"):
every open view reports what it showed as deleted and then reloads itself from the server
(channel views their first page, message and sync views the page around their starting
point), so that it equals the server again — the channel list fully or partly loaded, the
message view at the newest end (a later live message lands right after the reloaded page,
not after a hole), the sync view. Online and offline (the reload waits for the connection).
Every step of a channel view's story adds up (test_channel_story.StoryChecker)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import parley
from parley import CollectionEventSource as Source, GroupChannelListQuery, MessageChangeKind as Kind
from parley import SyncActionKind as Act, SyncDirection, SyncList
from conftest import Admin, RunningServer
from test_channel_collection import server_listing as channel_listing, wait_until
from test_channel_story import StoryChecker, load_more
from test_fault_injection import FaultyProxy
from test_message_collection import Recorder, server_listing as message_listing
from test_sync_view import Actions

TIMEOUT = 30.0
ME = "me"


def make_channels(admin: Admin, count: int) -> List[str]:
    urls = [f"k{index:02d}" for index in range(count)]
    for url in urls:
        admin.call("POST", "/v3/group_channels", {"channel_url": url, "user_ids": [ME, "bob"], "name": url})
        admin.send(url, "bob", f"hello {url}")
    return urls


def room_with_messages(admin: Admin, count: int) -> str:
    """The user and bob in channel "room", with `count` messages of bob's; returns the user's token."""
    token = admin.user(ME)
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"channel_url": "room", "user_ids": [ME, "bob"]})
    for index in range(count):
        admin.send("room", "bob", f"m{index}")
    return token


def walk(collection: parley.GroupChannelCollection, story: StoryChecker, pages: int = 1000) -> None:
    for _ in range(pages):
        if not collection.has_more:
            return
        assert load_more(collection, story).wait(TIMEOUT)


def test_channel_views_reload_after_a_clear(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user(ME)
    admin.user("bob")
    make_channels(admin, 8)
    truth = channel_listing(server, token, {"order": "channel_name_alphabetical", "include_empty": True})
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, token).result(TIMEOUT)
        query = GroupChannelListQuery(order=parley.GroupChannelListOrder.CHANNEL_NAME_ALPHABETICAL, include_empty=True, limit=3)
        views = []
        for pages in (1000, 1):  # fully loaded, then partly (one page)
            story = StoryChecker()
            collection = client.group_channel_collection(query)
            story.collection = collection
            collection.add_listener(story.on_change)
            walk(collection, story, pages)
            views.append((collection, story, pages))
        assert views[0][0].channel_urls == truth and views[1][0].channel_urls == truth[:3]

        client.clear_cached_data()
        for collection, story, _ in views:
            # Deleted, then the first page again from the server.
            wait_until(lambda: collection.channel_urls == truth[:3], "the first page to come back")
            assert collection.has_more
            walk(collection, story)
            assert collection.channel_urls == truth
            story.settle()
            assert not story.problems, story.report()
            assert any(line.startswith("deleted (local_cache)") for line in story.log), story.report()
            assert any(line.startswith("added (api_load)") for line in story.log), story.report()
            collection.dispose()


def test_a_channel_view_cleared_offline_reloads_when_the_connection_is_back(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user(ME)
    admin.user("bob")
    make_channels(admin, 5)
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        with parley.Client(server_url=proxy.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50,
                           reconnect_max_delay_ms=200) as client:
            client.connect(ME, token).result(TIMEOUT)
            story = StoryChecker()
            with client.group_channel_collection(GroupChannelListQuery(include_empty=True, limit=2)) as collection:
                story.collection = collection
                collection.add_listener(story.on_change)
                walk(collection, story)
                proxy.go_offline()
                wait_until(lambda: client.connection_state != "open", "the cut to be noticed")
                client.clear_cached_data()
                wait_until(lambda: collection.channel_urls == [], "the view to empty")
                assert collection.has_more
                # New while offline: the reload shows it.
                admin.call("POST", "/v3/group_channels", {"channel_url": "late", "user_ids": [ME, "bob"], "name": "late"})
                proxy.come_back()
                client.reconnect()
                truth = channel_listing(server, token, {"include_empty": True})
                wait_until(lambda: collection.channel_urls == truth[:2], "the first page after the reconnection")
                walk(collection, story)
                assert collection.channel_urls == truth
                story.settle()
                assert not story.problems, story.report()
    finally:
        proxy.close()


def test_a_message_view_at_the_newest_end_reloads_after_a_clear(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = room_with_messages(admin, 12)
    recorder = Recorder()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, token).result(TIMEOUT)
        with client.message_collection("room", previous_result_size=5) as view:
            view.add_listener(recorder)
            view.start()[1].result(TIMEOUT)
            shown = [m["message_id"] for m in view.messages]
            assert shown == message_listing(server, token, "room")[-5:]
            client.clear_cached_data()
            wait_until(lambda: len(recorder.of(Kind.ADDED, Source.API_LOAD)) == 5, "the reload")
            assert [m["message_id"] for m in recorder.of(Kind.DELETED)] == shown
            assert [m["message_id"] for m in view.messages] == shown
            assert not view.has_next
            # Live at the newest end again: the next message follows the reloaded page.
            live = admin.send("room", "bob", "after the clear")
            wait_until(lambda: view.messages and view.messages[-1]["message_id"] == live["message_id"], "the live message")
            assert [m["message_id"] for m in view.messages] == message_listing(server, token, "room")[-6:]
            # Paging back reaches every message, no hole.
            while view.has_previous:
                view.load_previous().result(TIMEOUT)
            assert [m["message_id"] for m in view.messages] == message_listing(server, token, "room")


def test_a_sync_view_reloads_after_a_clear(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = room_with_messages(admin, 8)
    actions = Actions()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, token).result(TIMEOUT)
        with client.sync_view("room", limit=4, on_action=actions) as view:
            view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
            before = [m["message_id"] for m in view.succeeded_messages]
            assert before == message_listing(server, token, "room")[-len(before):]
            mark = len(actions.snapshot())
            client.clear_cached_data()
            wait_until(lambda: [m["message_id"] for m in view.succeeded_messages] == before
                       and len(actions.snapshot()) > mark + 1, "the reload's inserts")
            kinds = [(a.action, a.list) for a in actions.snapshot()[mark:]]
            assert kinds[0] == (Act.REMOVE, SyncList.SUCCEEDED) and (Act.INSERT, SyncList.SUCCEEDED) in kinds, kinds
            live = admin.send("room", "bob", "after the clear")
            wait_until(lambda: view.succeeded_messages[-1]["message_id"] == live["message_id"], "the live message")
            assert [m["message_id"] for m in view.succeeded_messages] == message_listing(server, token, "room")[-len(view.succeeded_messages):]
