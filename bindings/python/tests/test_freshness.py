"""Freshness and page origin against the real server, through a TCP proxy that cuts and
restores the connection (docs/C-API.md, "Freshness").

Every view — channel collection, message collection, sync view — started offline from a
cache is ``offline`` with ``cache`` pages; once the server is reachable it goes
``catching_up`` then ``live``; a cut makes it ``offline``; the return ``catching_up`` then
``live`` again. The sequences are asserted exactly: the rules leave no other order for these
steps (the view's own part of the catch-up — gap check, channel refresh, the server page a
start could not get — is ``catching_up`` too, so no ``cached`` appears between)."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import parley
from parley import Freshness as F, PageOrigin
from conftest import Admin, RunningServer
from test_fault_injection import FaultyProxy

TIMEOUT = 30.0
ME = "me"


class Seen:
    """Records a view's freshness changes, and checks that the getter agrees inside each."""

    def __init__(self) -> None:
        self.items: List[F] = []
        self.mismatches: List[str] = []
        self.view: Any = None
        self.lock = threading.Lock()

    def __call__(self, freshness: F) -> None:
        if self.view is not None and self.view.freshness is not freshness:
            self.mismatches.append(f"getter {self.view.freshness} inside the callback for {freshness}")
        with self.lock:
            self.items.append(freshness)

    def snapshot(self) -> List[F]:
        with self.lock:
            return list(self.items)


def reached(seen: Seen, state: F) -> Callable[[], bool]:
    """The view's last reported change is `state` (the getter changes just before the callback runs)."""
    return lambda: seen.snapshot()[-1:] == [state]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def proxied_client(proxy: FaultyProxy, cache_dir: Path) -> parley.Client:
    return parley.Client(server_url=proxy.url, cache_dir=str(cache_dir), reconnect_initial_delay_ms=50,
                         reconnect_max_delay_ms=300, request_timeout_ms=3000, connect_timeout_ms=1000)


def two_rooms(admin: Admin, words: str = "") -> str:
    """The user, bob and two channels ("room", "side") of 30 messages of bob's each (their text
    the channel, the index and `words`); returns the user's token."""
    token = admin.user(ME)
    admin.user("bob")
    for url in ("room", "side"):
        admin.call("POST", "/v3/group_channels", {"channel_url": url, "name": url.title(), "user_ids": [ME, "bob"]})
        for index in range(30):
            admin.send(url, "bob", f"{url}-{index}{words}")
    return token


@pytest.fixture
def world(server: RunningServer, admin: Admin) -> str:
    return two_rooms(admin)


def fill_cache(proxy: FaultyProxy, cache_dir: Path, token: str) -> None:
    """A first session that leaves the channels and the newest page of each channel cached."""
    with proxied_client(proxy, cache_dir) as client:
        client.connect(ME, token).result(TIMEOUT)
        with client.group_channel_collection(order="chronological") as channels:
            page = channels.load_more().result(TIMEOUT)
            assert sorted(c["channel_url"] for c in page) == ["room", "side"]
            wait_for(lambda: channels.freshness is F.LIVE, "a first session's channel list to be live")
        for url in ("room", "side"):
            with client.message_collection(url, previous_result_size=10) as view:
                _, api = view.start()
                assert len(api.result(TIMEOUT)) == 10


def test_views_go_offline_catch_up_and_turn_live_through_cuts(
        server: RunningServer, admin: Admin, world: str, tmp_path: Path) -> None:
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        cache_dir = tmp_path / "cache"
        fill_cache(proxy, cache_dir, world)

        # Offline from the start: the connection completes with the cached user.
        proxy.go_offline()
        with proxied_client(proxy, cache_dir) as client:
            assert client.connect(ME, world).result(TIMEOUT)["user_id"] == ME
            seen = {name: Seen() for name in ("channels", "messages", "sync")}
            channels = client.group_channel_collection(order="chronological", on_freshness_changed=seen["channels"])
            messages = client.message_collection("room", previous_result_size=10, on_freshness_changed=seen["messages"])
            sync = client.sync_view("side", limit=10, on_freshness_changed=seen["sync"])
            views: Dict[str, Any] = {"channels": channels, "messages": messages, "sync": sync}
            for name, view in views.items():
                seen[name].view = view
                assert view.freshness is F.OFFLINE, name

            # Pages from the cache say so.
            page = channels.load_more().result(TIMEOUT)
            assert sorted(c["channel_url"] for c in page) == ["room", "side"]
            assert page.origin is PageOrigin.CACHE
            cached, api = messages.start()
            first = cached.result(TIMEOUT)
            assert first.origin is PageOrigin.CACHE and len(first) == 10
            with pytest.raises(parley.NetworkError):
                api.result(TIMEOUT)
            fetched = sync.fetch(parley.SyncDirection.PREVIOUS).result(TIMEOUT)
            assert fetched.offline and fetched.origin is PageOrigin.CACHE
            assert len(sync.succeeded_messages) == 10
            for name, view in views.items():
                assert view.freshness is F.OFFLINE, name
                assert seen[name].snapshot() == [], name

            # The server comes back: catching up, then live (each view after its own part:
            # the channel list's server page, the message view's reload of its unconfirmed
            # start and its gap check, the channel refreshes).
            proxy.come_back()
            for name in views:
                wait_for(reached(seen[name], F.LIVE), f"{name} to be live")
            for name in views:
                assert seen[name].snapshot() == [F.CATCHING_UP, F.LIVE], name

            # A page the cache cannot prove comes from the server.
            older = messages.load_previous().result(TIMEOUT)
            assert older.origin is PageOrigin.SERVER and [m["message"] for m in older] == [f"room-{i}" for i in range(10, 20)]
            assert messages.freshness is F.LIVE

            # Cut: every view is offline.
            proxy.go_offline()
            for name in views:
                wait_for(reached(seen[name], F.OFFLINE), f"{name} to be offline")
            for name in views:
                assert seen[name].snapshot() == [F.CATCHING_UP, F.LIVE, F.OFFLINE], name
            admin.send("room", "bob", "while away")
            admin.send("side", "bob", "side while away")

            # Back: catching up (the message view fills its gap meanwhile), then live.
            proxy.come_back()
            for name in views:
                wait_for(reached(seen[name], F.LIVE), f"{name} to be live again")
            for name in views:
                assert seen[name].snapshot() == [F.CATCHING_UP, F.LIVE, F.OFFLINE, F.CATCHING_UP, F.LIVE], name
                assert seen[name].mismatches == [], name
            assert messages.messages[-1]["message"] == "while away"
            # The sync view waits for its application to fetch what it missed: from the server.
            rest = sync.fetch_all_next().result(TIMEOUT)
            assert not rest.has_more and rest.origin is PageOrigin.SERVER
            assert sync.succeeded_messages[-1]["message"] == "side while away"
            for view in views.values():
                view.dispose()
            with pytest.raises(parley.InvalidHandle):
                _ = messages.freshness
    finally:
        proxy.close()


def test_online_pages_say_where_they_came_from_and_a_start_turns_live(
        server: RunningServer, admin: Admin, world: str, tmp_path: Path) -> None:
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, world).result(TIMEOUT)
        seen = Seen()
        with client.group_channel_collection(order="chronological", limit=1, on_freshness_changed=seen) as channels:
            seen.view = channels
            # Nothing confirmed before the first page: cached once the catch-up is over.
            wait_for(lambda: channels.freshness is F.CACHED, "the channel list to be caught up")
            # The catch-up's changelog cached the channels, but not as a known whole list: the
            # first page comes from the cache at once, the server's follows and confirms it.
            first = channels.load_more().result(TIMEOUT)
            assert first.origin is PageOrigin.CACHE
            wait_for(reached(seen, F.LIVE), "the server's first page")
            second = channels.load_more().result(TIMEOUT)
            assert second.origin is PageOrigin.SERVER and not channels.has_more
            assert sorted(channels.channel_urls) == ["room", "side"]
            # Created right after connect it may have begun offline, catching up or (the initial
            # value is not reported) already cached: any tail of the whole way, ending live.
            states = seen.snapshot()
            full = [F.OFFLINE, F.CATCHING_UP, F.CACHED, F.LIVE]
            assert states and states == full[len(full) - len(states):] and seen.mismatches == []
        # Walked to the end: the cache holds the list whole, its pages are the cache's and live.
        with client.group_channel_collection(order="chronological", limit=1) as whole:
            assert whole.freshness is F.CACHED
            page = whole.load_more().result(TIMEOUT)
            assert page.origin is PageOrigin.CACHE and whole.freshness is F.LIVE
        states = []
        with client.message_collection("room", previous_result_size=5, on_freshness_changed=states.append) as view:
            assert view.freshness is F.CACHED
            cached, api = view.start()
            assert cached.result(TIMEOUT).origin is PageOrigin.CACHE
            page = api.result(TIMEOUT)
            assert page.origin is PageOrigin.SERVER and len(page) == 5
            # Reported before the completion ran: the getter already said live.
            assert view.freshness is F.LIVE and states == [F.LIVE]
        # Without filters (replies too) a page the server gave is stored as a continuous range.
        with client.message_collection("room", previous_result_size=5, reply_type="all") as again:
            cached, api = again.start()
            assert cached.result(TIMEOUT).origin is PageOrigin.CACHE and api.result(TIMEOUT).origin is PageOrigin.SERVER
            for _ in range(2):
                assert again.load_previous().result(TIMEOUT).origin is PageOrigin.SERVER
        with client.message_collection("room", previous_result_size=5, reply_type="all") as third:
            _, api = third.start()
            api.result(TIMEOUT)
            # The range the previous view loaded is a chunk now: this page comes from the cache.
            assert third.load_previous().result(TIMEOUT).origin is PageOrigin.CACHE
        with client.sync_view("side", limit=5) as sync:
            assert sync.freshness is F.CACHED
            result = sync.fetch().result(TIMEOUT)
            assert not result.offline and result.origin is PageOrigin.SERVER and sync.freshness is F.LIVE


def test_async_views_iterate_their_freshness(server: RunningServer, admin: Admin, world: str, tmp_path: Path) -> None:
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))

    async def scenario() -> None:
        async with parley.AsyncClient(server_url=proxy.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50,
                                      reconnect_max_delay_ms=300, request_timeout_ms=3000) as client:
            await client.connect(ME, world)
            with client.message_collection("room", previous_result_size=5) as view:
                changes = view.freshness_changes()
                page = await view.start()
                assert page.origin is PageOrigin.SERVER
                got: List[F] = []

                async def until(state: F) -> None:
                    while True:
                        got.append(await asyncio.wait_for(changes.__anext__(), TIMEOUT))
                        if got[-1] is state:
                            return

                # Its start turned it live (what came before, from its creation on, is skipped).
                await until(F.LIVE)
                start = len(got)
                proxy.go_offline()
                await until(F.OFFLINE)
                proxy.come_back()
                await until(F.LIVE)
                assert got[start:] == [F.OFFLINE, F.CATCHING_UP, F.LIVE]
                assert view.freshness is F.LIVE
                older = await view.load_previous()
                assert older.origin is PageOrigin.SERVER
            # Disposing the view ends its iterators.
            async for _ in changes:
                raise AssertionError("no change after dispose")

    try:
        asyncio.run(scenario())
    finally:
        proxy.close()
