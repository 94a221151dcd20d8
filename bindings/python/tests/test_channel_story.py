"""Every step adds up (shared/SEMANTICS.md): an application that applies every page and
every event a channel collection gives it, in order, holds exactly the view's list after
each of them — while a reconnect's catch-up runs and pages load meanwhile, not only at the
end. The story checker below is that application: it refuses an `added` of a channel it
holds, an `updated` or `deleted` of one it does not, a page that repeats one, and compares
what it holds, field by field, with the list the collection publishes at that step."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import parley
from parley import ChangeKind, ChannelChange, GroupChannelListQuery, GroupChannelListOrder as Order
from conftest import Admin, RunningServer
from test_channel_collection import server_listing, wait_until
from test_fault_injection import FaultyProxy

TIMEOUT = 30.0
ME = "me"


class StoryChecker:
    """Applies pages and events as an application would and checks each step.

    Callbacks of one job (the deleted, updated and added of one change) share the list the
    collection published for that job; the checker compares once that job's callbacks are
    all applied (when the next job's begin, and at `settle`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.collection: Optional[parley.GroupChannelCollection] = None
        self.held: Dict[str, Any] = {}
        self.problems: List[str] = []
        self.log: List[str] = []
        self.pending: Optional[Tuple[List[str], List[Any], str]] = None

    def _published(self) -> Tuple[List[str], List[Any]]:
        assert self.collection is not None
        channels = self.collection.channels
        return [c["channel_url"] for c in channels], channels

    def _begin(self, what: str) -> None:
        """Before applying a callback: when the published list changed, the previous job ended."""
        urls, channels = self._published()
        if self.pending is not None and self.pending[0] != urls:
            self._compare()
        self.pending = (urls, channels, what)

    def _compare(self) -> None:
        if self.pending is None:
            return
        urls, channels, what = self.pending
        self.pending = None
        if set(urls) != set(self.held):
            self.problems.append(f"after {what}: the application holds {sorted(self.held)}, the view {sorted(urls)}")
            return
        for channel in channels:
            if channel != self.held[channel["channel_url"]]:
                self.problems.append(f"after {what}: {channel['channel_url']} as held differs from the view's")

    def on_change(self, change: ChannelChange) -> None:
        with self.lock:
            what = f"{change.kind.value} ({change.context.source.value})"
            self._begin(what)
            if change.kind is ChangeKind.DELETED:
                self.log.append(f"{what} {change.channel_urls}")
                for url in change.channel_urls:
                    if url not in self.held:
                        self.problems.append(f"{what} of {url}, which the application does not hold")
                    self.held.pop(url, None)
                return
            urls = [c["channel_url"] for c in change.channels]
            self.log.append(f"{what} {urls}")
            for channel in change.channels:
                url = channel["channel_url"]
                if change.kind is ChangeKind.ADDED and url in self.held:
                    self.problems.append(f"{what} of {url}, which the application holds already")
                if change.kind is ChangeKind.UPDATED and url not in self.held:
                    self.problems.append(f"{what} of {url}, which was never added")
                self.held[url] = channel

    def on_page(self, channels: Optional[List[Any]], error: Optional[Exception], done: threading.Event) -> None:
        with self.lock:
            if error is None:
                assert channels is not None
                self._begin("page")
                urls = [c["channel_url"] for c in channels]
                self.log.append(f"page {urls}")
                for channel in channels:
                    if channel["channel_url"] in self.held:
                        self.problems.append(f"a page repeats {channel['channel_url']}")
                    self.held[channel["channel_url"]] = channel
            else:
                self.log.append(f"page failed: {error}")
        done.set()

    def settle(self) -> None:
        with self.lock:
            self._begin("settle")
            self._compare()

    def report(self) -> str:
        return "\n".join(self.problems[:12]) + "\nstory:\n" + "\n".join(self.log)


def load_more(collection: parley.GroupChannelCollection, story: StoryChecker) -> threading.Event:
    done = threading.Event()
    collection.load_more_with_callback(lambda channels, error: story.on_page(channels, error, done))
    return done


def test_a_view_loaded_during_the_catch_up_tells_a_story_that_adds_up(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user(ME)
    admin.user("bob")
    urls = [f"c{index:02d}" for index in range(70)]
    for index, url in enumerate(urls):
        admin.call("POST", "/v3/group_channels", {"channel_url": url, "user_ids": [ME, "bob"], "name": url})
        admin.send(url, "bob", f"first in {url}")
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))
    client = parley.Client(server_url=proxy.url, cache_dir=str(tmp_path / "cache"),
                           reconnect_initial_delay_ms=50, reconnect_max_delay_ms=200)
    try:
        client.connect(ME, token).result(TIMEOUT)
        # Twenty channels with cached messages: the catch-up runs their message changelogs too.
        for url in urls[:20]:
            with client.message_collection(url) as messages:
                messages.start()[1].result(TIMEOUT)
        # A whole walk of the default list so the cache holds every channel.
        with client.group_channel_collection(GroupChannelListQuery(limit=100)) as everything:
            while everything.has_more:
                everything.load_more().result(TIMEOUT)

        proxy.go_offline()
        wait_until(lambda: client.connection_state != "open", "the client to notice the cut")
        # While offline, another user posts in five channels, three of them in the view's filter.
        posted = ["c05", "c33", "c47", "c61", "c12"]
        for url in posted:
            admin.send(url, "bob", f"while you were away: {url}")
        shown = ["c01", "c03", "c05", "c12", "c15", "c22", "c30", "c33", "c40", "c44", "c58", "c66"]
        query = GroupChannelListQuery(order=Order.LATEST_LAST_MESSAGE, channel_urls=shown, include_empty=True, limit=4)
        story = StoryChecker()
        with client.group_channel_collection(query) as collection:
            story.collection = collection
            collection.add_listener(story.on_change)
            proxy.come_back()
            client.reconnect()
            first, second = load_more(collection, story), load_more(collection, story)
            assert first.wait(TIMEOUT) and second.wait(TIMEOUT)
            while True:
                done = threading.Event()
                has_more = collection.has_more
                if not has_more:
                    break
                load_more(collection, story).wait(TIMEOUT)
            truth = server_listing(server, token, {"order": "latest_last_message", "channel_urls": shown})
            wait_until(lambda: client.connection_state == "open", "the connection to come back")
            wait_until(lambda: collection.channel_urls == truth, "the view to equal the server's listing")
            time.sleep(1.0)  # the end of the catch-up, and anything it would still report
            story.settle()
            assert not story.problems, story.report()
            assert sorted(story.held) == sorted(truth), story.report()
            assert collection.channel_urls == truth
    finally:
        client.close()
        proxy.close()
