"""The message collection against the real server: paging both ways from the newest end,
the middle and the oldest end equals the server's own listing (every filter, both
orders, runs of equal timestamps); live messages at the end and scrolled up; edits,
deletes, reactions and threads in view; sending through the view; the gap check after
offline (fill below the threshold, huge gap above it); dispose races."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import parley
from parley import CollectionEventSource as Source, MessageChange, MessageChangeKind as Kind, SendingStatus
from conftest import Admin, Collected, RunningServer, server_database, walk_messages

TIMEOUT = 30.0
ME = "me"
CHANNEL = "room"


def wait_until(condition: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def server_listing(server: RunningServer, token: str, channel: str, **filters: Any) -> List[int]:
    """The server's own listing of the channel for the user, oldest first, walked whole."""
    return walk_messages(server.url, token, channel, filters)


def server_filters(options: Dict[str, Any]) -> Dict[str, Any]:
    """The listing's query for collection params (the test's own translation of PROTOCOL.md §7.2)."""
    query: Dict[str, Any] = {"include_reply_type": options.get("reply_type", "none").upper()}
    types = {"user": "MESG", "file": "FILE", "admin": "ADMM"}
    if options.get("message_type_filter", "all") != "all":
        query["message_type"] = types[options["message_type_filter"]]
    if options.get("custom_types"):
        query["custom_types"] = ",".join(options["custom_types"])
    if options.get("sender_user_ids"):
        query["sender_ids"] = ",".join(options["sender_user_ids"])
    return query


class Recorder(Collected[MessageChange]):
    """Collects a collection's changes."""

    @property
    def changes(self) -> List[MessageChange]:
        return self.items

    def of(self, kind: Kind, source: Optional[Source] = None) -> List[Any]:
        return [m for c in self.snapshot() if c.kind is kind and (source is None or c.context.source is source)
                for m in c.messages]

    def kinds(self) -> List[Kind]:
        return [c.kind for c in self.snapshot()]


def ids(messages: List[Any]) -> List[int]:
    return [m["message_id"] for m in messages]


def none_unsent(view: parley.MessageCollection) -> bool:
    """No pending or failed message in the view, from one read: `pending_messages` then
    `failed_messages` are two reads, between which a failed message being resent turns pending
    and is in neither."""
    return not any(m.get("sending_status") in ("pending", "failed") for m in view.messages)


def seed(admin: Admin, count: int, channel: str = CHANNEL, start: int = 0) -> List[Any]:
    """`count` messages from bob and carol with a few custom types, replies and file
    messages; every fifth group of four shares one millisecond."""
    sent: List[Any] = []
    last_ts: Optional[int] = None
    for index in range(start, start + count):
        extra: Dict[str, Any] = {"custom_type": ["", "news", "chat"][index % 3]}
        if last_ts is not None and index % 20 < 4:
            extra["created_at"] = last_ts
        sender = "bob" if index % 2 else "carol"
        if index % 11 == 5 and sent:
            parent = next((m for m in reversed(sent) if not m.get("parent_message_id")), None)
            if parent:
                extra["parent_message_id"] = parent["message_id"]
                extra["is_reply_to_channel"] = index % 22 == 5
        if index % 13 == 7:
            body = {"message_type": "FILE", "user_id": sender, "url": "https://example.com/f.png", **extra}
            message = admin.call("POST", f"/v3/group_channels/{channel}/messages", body)
        else:
            message = admin.send(channel, sender, f"m{index}", **extra)
        last_ts = message["created_at"]
        sent.append(message)
    return sent


@pytest.fixture
def world(server: RunningServer, admin: Admin, tmp_path: Path) -> Tuple[parley.Client, str, Admin]:
    token = admin.user(ME)
    admin.user("bob")
    admin.user("carol")
    admin.call("POST", "/v3/group_channels", {"channel_url": CHANNEL, "user_ids": [ME, "bob", "carol"]})
    client = parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50,
                           reconnect_max_delay_ms=300)
    client.connect(ME, token).result(TIMEOUT)
    # `connect` completes before the stream opens; a view started before it cannot vouch for
    # the newest end.
    wait_until(lambda: client.connection_state == "open", "the stream to open")
    yield client, token, admin
    client.close()


@contextlib.contextmanager
def started(view: parley.MessageCollection, recorder: Recorder) -> Iterator[parley.MessageCollection]:
    """`view`, reporting to `recorder`, started (the server's first page is in); disposed after the block."""
    with view:
        view.add_listener(recorder)
        view.start()[1].result(TIMEOUT)
        yield view


def walk(collection: parley.MessageCollection) -> List[int]:
    """Starts the view and pages both ways to the ends; returns the shown ids oldest first."""
    cache, api = collection.start()
    cache.result(TIMEOUT)
    api.result(TIMEOUT)
    for _ in range(1000):
        if not collection.has_previous:
            break
        collection.load_previous().result(TIMEOUT)
    for _ in range(1000):
        if not collection.has_next:
            break
        collection.load_next().result(TIMEOUT)
    assert not collection.has_previous and not collection.has_next
    shown = ids(collection.succeeded_messages)
    return list(reversed(shown)) if collection_reverse(collection) else shown


def collection_reverse(collection: parley.MessageCollection) -> bool:
    return bool(getattr(collection, "_reverse", False))


FILTERS: List[Dict[str, Any]] = [
    {},
    {"reply_type": "all"},
    {"reply_type": "only_reply_to_channel", "custom_types": ["news"]},
    {"message_type_filter": "user", "sender_user_ids": ["bob"]},
    {"message_type_filter": "file", "reply_type": "all"},
]


@pytest.mark.parametrize("options", FILTERS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "unfiltered")
def test_paging_both_ways_equals_the_server_listing(world: Tuple[parley.Client, str, Admin], server: RunningServer,
                                                    options: Dict[str, Any]) -> None:
    client, token, admin = world
    sent = seed(admin, 400)
    truth = server_listing(server, token, CHANNEL, **server_filters(options))
    assert truth, "the filter keeps some messages"
    middle = sent[len(sent) // 2]["created_at"]
    oldest = sent[0]["created_at"]
    for starting_point in (parley.NEWEST, middle, oldest):
        for reverse in (False, True):
            for inclusive in (False, True):
                with client.message_collection(CHANNEL, starting_point, previous_result_size=37, next_result_size=23,
                                               reverse=reverse, is_inclusive=inclusive, **options) as collection:
                    collection._reverse = reverse  # type: ignore[attr-defined]
                    shown = walk(collection)
                    assert shown == truth, (starting_point, reverse, inclusive, len(shown), len(truth))


def bulk_send(admin: Admin, count: int, prefix: str, channel: str = CHANNEL, same_ms_every: int = 0) -> List[Any]:
    """`count` plain messages from bob and carol (every `same_ms_every`-th run of 3 shares a millisecond)."""
    sent: List[Any] = []
    for index in range(count):
        extra: Dict[str, Any] = {}
        if same_ms_every and sent and index % same_ms_every < 3:
            extra["created_at"] = sent[-1]["created_at"]
        sent.append(admin.send(channel, "bob" if index % 2 else "carol", f"{prefix} {index}",
                               custom_type="news" if index % 3 == 0 else "", **extra))
    return sent


@pytest.mark.bulk_sends
def test_paging_over_five_thousand_messages_equals_the_server_listing(
        world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    sent = bulk_send(admin, 5000, "bulk", same_ms_every=10)
    for options in ({}, {"custom_types": ["news"], "sender_user_ids": ["bob"]}):
        truth = server_listing(server, token, CHANNEL, **server_filters(options))
        assert len(truth) == (5000 if not options else len([m for m in sent if m["custom_type"] == "news" and m["user"]["user_id"] == "bob"]))
        for starting_point in (parley.NEWEST, sent[2500]["created_at"], sent[0]["created_at"]):
            for reverse in (False, True):
                with client.message_collection(CHANNEL, starting_point, previous_result_size=200, next_result_size=150,
                                               reverse=reverse, **options) as collection:
                    collection._reverse = reverse  # type: ignore[attr-defined]
                    assert walk(collection) == truth, (options, starting_point, reverse)


def test_an_inclusive_start_by_timestamp_counts_the_messages_before_it(
        world: Tuple[parley.Client, str, Admin]) -> None:
    """Guide 004: `previous_result_size` counts the messages sent before the timestamp; the
    messages sent exactly at it come besides, from the server and from the cache alike."""
    client, _token, admin = world
    older = [admin.send(CHANNEL, "bob", f"older {i}") for i in range(6)]
    at_point = [admin.send(CHANNEL, "carol", "at the point")]
    point = at_point[0]["created_at"]
    at_point += [admin.send(CHANNEL, "bob", f"also at the point {i}", created_at=point) for i in range(2)]
    newer = [admin.send(CHANNEL, "carol", f"newer {i}") for i in range(4)]
    expected = ids(older[-3:] + at_point + newer[:2])
    for attempt in ("server", "cache"):
        with client.message_collection(CHANNEL, point, previous_result_size=3, next_result_size=2,
                                       is_inclusive=True) as view:
            cache, api = view.start()
            cached = ids(cache.result(TIMEOUT))
            assert ids(api.result(TIMEOUT)) == expected, attempt
            if attempt == "cache":  # the first start stored that page
                assert cached == expected
            assert view.has_previous and view.has_next
    # Not inclusive: the messages at the point are not on the older side.
    with client.message_collection(CHANNEL, point, previous_result_size=3, next_result_size=2) as view:
        cache, api = view.start()
        cache.result(TIMEOUT)
        shown = ids(api.result(TIMEOUT))
        assert shown[:3] == ids(older[-3:]) and not set(shown[:3]) & set(ids(at_point))


def test_the_first_page_and_flags_are_exact(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    sent = seed(admin, 120)
    truth = server_listing(server, token, CHANNEL)
    point = sent[60]["created_at"]
    times = [admin.call("GET", f"/v3/group_channels/{CHANNEL}/messages/{i}")["created_at"] for i in truth]
    before = len([t for t in times if t < point])
    at_point = len([t for t in times if t == point])
    assert at_point > 1, "the seed makes several messages share the starting point"
    # Inclusive: `previous_result_size` counts the messages before the point; those at it come besides.
    with client.message_collection(CHANNEL, point, previous_result_size=10, next_result_size=5, is_inclusive=True) as view:
        cache, api = view.start()
        cache.result(TIMEOUT)
        first = ids(api.result(TIMEOUT))
        assert first == truth[before - 10:before + at_point + 5]
        assert view.has_previous and view.has_next
    with client.message_collection(CHANNEL, previous_result_size=200) as view:
        cache, api = view.start()
        assert cache.result(TIMEOUT) is not None
        assert ids(api.result(TIMEOUT)) == truth
        assert not view.has_previous and not view.has_next, (len(truth), view.has_previous, view.has_next)
    # Started again: the whole first page is now in the cache, and the start shows it at once.
    with client.message_collection(CHANNEL, previous_result_size=30) as view:
        cache, api = view.start()
        assert ids(cache.result(TIMEOUT)) == truth[-30:]
        assert ids(api.result(TIMEOUT)) == truth[-30:]


def test_pages_inside_a_chunk_come_from_the_cache(world: Tuple[parley.Client, str, Admin], server: RunningServer,
                                                   tmp_path: Path) -> None:
    client, token, admin = world
    seed(admin, 150)
    truth = server_listing(server, token, CHANNEL)
    with client.message_collection(CHANNEL, previous_result_size=40) as view:
        assert walk(view) == truth
    client.disconnect()
    # Offline: the whole history is one chunk, so every page comes from the cache, with exact flags.
    with client.message_collection(CHANNEL, previous_result_size=40) as view:
        cache, api = view.start()
        assert ids(cache.result(TIMEOUT)) == truth[-40:]
        with pytest.raises(parley.NetworkError):
            api.result(TIMEOUT)
        while view.has_previous:
            view.load_previous().result(TIMEOUT)
        assert ids(view.messages) == truth


def started_offline(client: parley.Client, channel: str, **options: Any) -> parley.MessageCollection:
    """A view of `channel` started with the server unreachable: it shows what the cache holds."""
    view = client.message_collection(channel, **options)
    cache, api = view.start()
    cache.result(TIMEOUT)
    with pytest.raises(parley.NetworkError):
        api.result(TIMEOUT)
    return view


def test_a_range_the_cache_vouches_for_is_served_offline(world: Tuple[parley.Client, str, Admin],
                                                          server: RunningServer) -> None:
    client, token, admin = world
    for channel in ("empty", "unseen", "partial"):
        admin.call("POST", "/v3/group_channels", {"channel_url": channel, "user_ids": [ME, "bob", "carol"]})
    seed(admin, 12)
    bulk_send(admin, 5, "partly seen", channel="partial")
    truth = server_listing(server, token, CHANNEL)
    # Walked online to both ends: the cache records each whole range, the empty one too.
    with client.message_collection("empty") as view:
        assert walk(view) == []
    with client.message_collection(CHANNEL, previous_result_size=5) as view:
        assert walk(view) == truth
    with client.message_collection(CHANNEL, custom_types=["none such"]) as view:
        assert walk(view) == []
    # Only the newest two of "partial" were loaded: the older ones arrived live before any
    # loaded range reached the newest end, so the cache holds them but vouches for none of them.
    with client.message_collection("partial", previous_result_size=2) as view:
        view.start()[1].result(TIMEOUT)
        assert view.has_previous
    assert client.cached_message_page("empty") == {"messages": [], "continuous": True}

    server.process.terminate()
    server.process.wait(timeout=10)
    wait_until(lambda: client.connection_state != "open", "the client to notice the server is gone")

    # The empty channel: the cache vouches for the whole (empty) range.
    with started_offline(client, "empty") as view:
        assert not view.has_previous and not view.has_next
        for page in (view.load_previous().result(TIMEOUT), view.load_next().result(TIMEOUT)):
            assert list(page) == [] and page.origin is parley.PageOrigin.CACHE
    # The walked channel, opened with room for all of it: the oldest end is reached at once.
    with started_offline(client, CHANNEL, previous_result_size=20) as view:
        assert ids(view.messages) == truth
        assert not view.has_previous and not view.has_next
        assert list(view.load_previous().result(TIMEOUT)) == []
    # A filter that keeps none of the walked channel's messages: nothing is missing either.
    with started_offline(client, CHANNEL, custom_types=["none such"]) as view:
        assert view.messages == [] and not view.has_previous and not view.has_next
        assert list(view.load_previous().result(TIMEOUT)) == []
    # Ranges the cache does not vouch for: older messages may exist, and only the server can tell.
    with started_offline(client, "partial", previous_result_size=20) as view:
        assert view.messages and view.has_previous
        with pytest.raises(parley.NetworkError):
            view.load_previous().result(TIMEOUT)
    with started_offline(client, "unseen") as view:
        assert view.messages == [] and view.has_previous
        with pytest.raises(parley.NetworkError):
            view.load_previous().result(TIMEOUT)


def test_live_messages_at_the_end_and_scrolled_up(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    sent = seed(admin, 60)
    at_end, scrolled = Recorder(), Recorder()
    with client.message_collection(CHANNEL, previous_result_size=20) as end_view, \
            client.message_collection(CHANNEL, sent[10]["created_at"], previous_result_size=5, next_result_size=5) as up_view:
        end_view.add_listener(at_end)
        up_view.add_listener(scrolled)
        for view in (end_view, up_view):
            cache, api = view.start()
            api.result(TIMEOUT)
        assert not end_view.has_next and up_view.has_next
        fresh = admin.send(CHANNEL, "bob", "live one")
        wait_until(lambda: fresh["message_id"] in ids(at_end.of(Kind.ADDED, Source.MESSAGE_RECEIVED)), "live add at the end")
        assert ids(end_view.messages)[-1] == fresh["message_id"]
        time.sleep(0.3)
        assert fresh["message_id"] not in ids(scrolled.of(Kind.ADDED)) and up_view.has_next
        # Scrolling down to the end picks it up, in order, once.
        while up_view.has_next:
            up_view.load_next().result(TIMEOUT)
        assert ids(up_view.messages) == server_listing(server, token, CHANNEL)[-len(up_view.messages):]
        assert ids(up_view.messages).count(fresh["message_id"]) == 1


def test_changes_to_shown_messages_are_reported_and_filters_rechecked(world: Tuple[parley.Client, str, Admin]) -> None:
    client, token, admin = world
    sent = [admin.send(CHANNEL, "bob", f"n{i}", custom_type="news") for i in range(5)]
    recorder = Recorder()
    with client.message_collection(CHANNEL, custom_types=["news"], include_reactions=True, include_thread_info=True,
                                   reply_type="all") as view:
        view.add_listener(recorder)
        view.start()[1].result(TIMEOUT)
        assert ids(view.messages) == ids(sent)
        # Changed once the view is live: during the catch-up a change can come as a changelog.
        wait_until(lambda: view.freshness is parley.Freshness.LIVE, "the view to be live")
        target = sent[1]["message_id"]
        base = f"/v3/group_channels/{CHANNEL}/messages/{target}"
        admin.call("PUT", base, {"message": "edited"})
        wait_until(lambda: any(m["message"] == "edited" for m in recorder.of(Kind.UPDATED, Source.MESSAGE_UPDATED)), "edit")
        admin.call("POST", base + "/reactions", {"user_id": "carol", "reaction": "+1"})
        wait_until(lambda: any(m.get("reactions") for m in recorder.of(Kind.UPDATED, Source.REACTION_UPDATED)), "reaction")
        reply = admin.send(CHANNEL, "carol", "a reply", parent_message_id=target, custom_type="news")
        wait_until(lambda: reply["message_id"] in ids(recorder.of(Kind.ADDED)), "reply added")
        wait_until(lambda: any(m.get("thread_info", {}).get("reply_count") == 1
                               for m in recorder.of(Kind.UPDATED, Source.THREAD_INFO_UPDATED)), "thread info")
        # A custom type change makes a shown message stop matching: deleted from the view.
        admin.call("PUT", f"/v3/group_channels/{CHANNEL}/messages/{sent[2]['message_id']}", {"custom_type": "chat"})
        wait_until(lambda: sent[2]["message_id"] in ids(recorder.of(Kind.DELETED)), "filtered out")
        # A message of another custom type never shows.
        other = admin.send(CHANNEL, "bob", "other", custom_type="chat")
        admin.call("DELETE", f"/v3/group_channels/{CHANNEL}/messages/{sent[0]['message_id']}")
        wait_until(lambda: sent[0]["message_id"] in ids(recorder.of(Kind.DELETED, Source.MESSAGE_DELETED)), "delete")
        assert other["message_id"] not in ids(view.messages)
        admin.call("POST", f"/v3/group_channels/{CHANNEL}/messages/{sent[3]['message_id']}/pin", {})
        wait_until(lambda: any(m.get("is_pinned") for m in recorder.of(Kind.UPDATED)), "pin")
        admin.call("PUT", f"/v3/group_channels/{CHANNEL}", {"name": "renamed"})
        wait_until(lambda: any(c.kind is Kind.CHANNEL_UPDATED and c.channel["name"] == "renamed" for c in recorder.changes),
                   "channel updated")
        assert ids(view.messages) == [sent[1]["message_id"], sent[3]["message_id"], sent[4]["message_id"], reply["message_id"]]
        admin.call("DELETE", f"/v3/group_channels/{CHANNEL}")
        wait_until(lambda: Kind.CHANNEL_DELETED in recorder.kinds(), "channel deleted")


def test_sending_through_the_view(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    seed(admin, 5)
    recorder = Recorder()
    with started(client.message_collection(CHANNEL), recorder) as view:
        pending, done = view.send_user_message("hello")
        sent = done.result(TIMEOUT)
        wait_until(lambda: any(c.kind is Kind.UPDATED and c.context.sending_status is SendingStatus.SUCCEEDED
                               for c in recorder.changes), "succeeded")
        statuses = [(c.kind, c.context.sending_status) for c in recorder.changes
                    if any(m.get("message") == "hello" for m in c.messages)]
        assert statuses[0] == (Kind.ADDED, SendingStatus.PENDING)
        assert (Kind.UPDATED, SendingStatus.SUCCEEDED) in statuses
        assert ids(view.messages).count(sent["message_id"]) == 1 and not view.pending_messages
        # A refused send fails and stays after the succeeded messages until removed.
        admin.call("POST", f"/v3/group_channels/{CHANNEL}/mute", {"user_id": ME, "seconds": 60})
        _, refused = view.send_user_message("muted")
        with pytest.raises(parley.ParleyError):
            refused.result(TIMEOUT)
        wait_until(lambda: len(view.failed_messages) == 1, "failed shown")
        assert view.messages[-1]["sending_status"] == "failed"
        assert any(c.context.sending_status is SendingStatus.FAILED for c in recorder.changes)
        admin.call("DELETE", f"/v3/group_channels/{CHANNEL}/mute/{ME}")
        view.resend_message(view.failed_messages[0]["req_id"]).result(TIMEOUT)
        wait_until(lambda: not view.failed_messages and view.messages[-1]["message"] == "muted", "resent")
        assert server_listing(server, token, CHANNEL)[-2:] == ids(view.messages)[-2:]


def restart_server(server: RunningServer, tmp_path: Path) -> subprocess.Popen:
    """Starts the server again on the same port and database (after it was killed)."""
    port = server.url.rsplit(":", 1)[1]
    process = subprocess.Popen([os.environ.get("PARLEY_SERVER_BIN", ""), "--port", port, "--database",
                                server_database(tmp_path), "--api-token", server.api_token],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None and "listening" in process.stdout.readline()
    return process


def test_sent_while_the_server_is_down_is_delivered_once_in_order(
        world: Tuple[parley.Client, str, Admin], server: RunningServer, tmp_path: Path) -> None:
    client, token, admin = world
    seed(admin, 3)
    recorder = Recorder()
    with started(client.message_collection(CHANNEL), recorder) as view:
        server.process.kill()
        server.process.wait()
        futures = [view.send_user_message(f"offline {i}")[1] for i in range(3)]
        # Read from one list: `pending_messages` and `failed_messages` are two reads, between
        # which a message can turn from pending to failed and be counted twice.
        wait_until(lambda: len([m for m in view.messages if m.get("sending_status") in ("pending", "failed")]) == 3,
                   "shown at once")
        assert [m["message"] for m in view.messages[-3:]] == ["offline 0", "offline 1", "offline 2"]
        again = restart_server(server, tmp_path)
        try:
            for future in futures:
                try:
                    future.result(TIMEOUT)
                except parley.ParleyError:
                    pass  # failed for the connection; auto-resend delivers it after the reconnection
            wait_until(lambda: none_unsent(view), "all delivered")
            wait_until(lambda: [m["message"] for m in view.messages[-3:]] == ["offline 0", "offline 1", "offline 2"], "in order")
            listing = server_listing(server, token, CHANNEL)
            texts = [admin.call("GET", f"/v3/group_channels/{CHANNEL}/messages/{i}")["message"] for i in listing]
            assert texts[-3:] == ["offline 0", "offline 1", "offline 2"] and len(texts) == 6
            assert ids(view.messages) == listing
            added = [m["req_id"] for m in recorder.of(Kind.ADDED) if m.get("req_id")]
            assert len(added) == len(set(added)) == 3  # each shown once, as pending
        finally:
            again.terminate()
            again.wait()


def test_server_killed_during_a_send_delivers_once(
        world: Tuple[parley.Client, str, Admin], server: RunningServer, tmp_path: Path) -> None:
    client, token, admin = world
    seed(admin, 3)
    with client.message_collection(CHANNEL) as view:
        view.start()[1].result(TIMEOUT)
        for round_number in range(3):
            _, future = view.send_user_message(f"racing the kill {round_number}")
            time.sleep(0.001 * round_number)  # before, around and after the POST reaches the server
            server.process.kill()
            server.process.wait()
            again = restart_server(server, tmp_path)
            server = server._replace(process=again)
            try:
                future.result(TIMEOUT)
            except parley.ParleyError:
                pass  # failed for the connection; auto-resend delivers it after the reconnection
            wait_until(lambda: none_unsent(view), "delivered")
        texts = [admin.call("GET", f"/v3/group_channels/{CHANNEL}/messages/{i}")["message"]
                 for i in server_listing(server, token, CHANNEL)]
        for round_number in range(3):
            assert texts.count(f"racing the kill {round_number}") == 1
        wait_until(lambda: ids(view.messages) == server_listing(server, token, CHANNEL), "the view equals the listing")
        again.terminate()
        again.wait()


KILLED_SENDER = textwrap.dedent("""
    import os, sys, parley
    client = parley.Client(server_url=sys.argv[1], cache_dir=sys.argv[2])
    client.connect("me", sys.argv[3]).result(30)
    view = client.message_collection("room")
    view.start()[1].result(30)
    pending, _ = view.send_user_message("survivor")
    print(pending["req_id"], flush=True)
    os.kill(os.getpid(), 9)
""")


def test_host_killed_right_after_send_delivers_once_after_restart(
        world: Tuple[parley.Client, str, Admin], server: RunningServer, tmp_path: Path) -> None:
    client, token, admin = world
    client.close()
    seed(admin, 2)
    cache_dir = str(tmp_path / "killed-cache")
    env = dict(os.environ, PYTHONPATH=str(Path(parley.__file__).resolve().parents[1]))
    result = subprocess.run([sys.executable, "-c", KILLED_SENDER, server.url, cache_dir, token], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr
    req_id = result.stdout.strip()
    with parley.Client(server_url=server.url, cache_dir=cache_dir) as restarted:
        restarted.connect(ME, token).result(TIMEOUT)
        with restarted.message_collection(CHANNEL) as view:
            view.start()[1].result(TIMEOUT)
            wait_until(lambda: not view.pending_messages and any(m.get("req_id") == req_id for m in view.messages), "delivered")
            time.sleep(0.5)
            shown = [m for m in view.messages if m.get("req_id") == req_id]
            assert len(shown) == 1 and shown[0]["message_id"] > 0
    listing = server_listing(server, token, CHANNEL)
    assert sum(1 for i in listing if admin.call("GET", f"/v3/group_channels/{CHANNEL}/messages/{i}")["req_id"] == req_id) == 1


@pytest.mark.parametrize("missed,huge", [(10, False), (299, False), (300, False), (301, True),
                                         pytest.param(5000, True, marks=pytest.mark.bulk_sends)])
def test_offline_gap_is_filled_or_huge(world: Tuple[parley.Client, str, Admin], server: RunningServer,
                                        missed: int, huge: bool) -> None:
    client, token, admin = world
    seed(admin, 30)
    recorder = Recorder()
    with started(client.message_collection(CHANNEL, previous_result_size=30), recorder) as view:
        client.disconnect()
        extra = bulk_send(admin, missed, "missed")
        admin.call("DELETE", f"/v3/group_channels/{CHANNEL}/messages/{view.messages[-1]['message_id']}")
        client.connect(ME, token).result(TIMEOUT)
        if huge:
            # Thousands of replayed events are applied first (see the catch-up issue for its speed).
            wait_until(lambda: Kind.HUGE_GAP_DETECTED in recorder.kinds(), "huge gap", timeout=180)
            assert view.has_next
            assert not recorder.of(Kind.ADDED, Source.MESSAGE_FILL)
        else:
            expected = [i for i in server_listing(server, token, CHANNEL) if i in {m["message_id"] for m in extra}]
            wait_until(lambda: ids(recorder.of(Kind.ADDED, Source.MESSAGE_FILL)) == expected, "filled")
            wait_until(lambda: ids(view.messages) == server_listing(server, token, CHANNEL)[-len(view.messages):], "the view")
            assert Kind.HUGE_GAP_DETECTED not in recorder.kinds()
            assert not view.has_next
        # The deletion comes back once, as the changelog's (replayed as its event, or found by the changelog).
        wait_until(lambda: len(recorder.of(Kind.DELETED)) >= 1, "the deletion")
        assert len(recorder.of(Kind.DELETED, Source.MESSAGE_CHANGELOG)) == 1 and len(recorder.of(Kind.DELETED)) == 1


def test_edits_and_deletions_made_while_away_are_the_changelogs(world: Tuple[parley.Client, str, Admin]) -> None:
    """Guide 000: what a catch-up brings is reported with the changelog's source, whether the
    server replayed its events (a resume by Last-Event-ID) or the changelog found it; edits
    and deletions made while connected keep their real-time sources."""
    client, token, admin = world
    sent = [admin.send(CHANNEL, "bob", f"before {i}") for i in range(4)]
    recorder = Recorder()
    with started(client.message_collection(CHANNEL, previous_result_size=10), recorder) as view:
        client.disconnect()
        path = f"/v3/group_channels/{CHANNEL}/messages"
        admin.call("PUT", f"{path}/{sent[1]['message_id']}", {"message": "edited while away"})
        admin.call("DELETE", f"{path}/{sent[2]['message_id']}")
        client.connect(ME, token).result(TIMEOUT)
        wait_until(lambda: recorder.of(Kind.UPDATED) and recorder.of(Kind.DELETED), "the edit and the deletion")
        wait_until(lambda: view.freshness == parley.Freshness.LIVE, "the catch-up to end")
        assert [m["message"] for m in recorder.of(Kind.UPDATED, Source.MESSAGE_CHANGELOG)] == ["edited while away"]
        assert ids(recorder.of(Kind.DELETED, Source.MESSAGE_CHANGELOG)) == [sent[2]["message_id"]]
        assert len(recorder.of(Kind.UPDATED)) == 1 and len(recorder.of(Kind.DELETED)) == 1
        assert [m["message"] for m in view.messages] == ["before 0", "edited while away", "before 3"]
        # Live again: an edit is `message_updated`, a deletion `message_deleted`.
        admin.call("PUT", f"{path}/{sent[0]['message_id']}", {"message": "edited live"})
        admin.call("DELETE", f"{path}/{sent[3]['message_id']}")
        wait_until(lambda: recorder.of(Kind.UPDATED, Source.MESSAGE_UPDATED) and recorder.of(Kind.DELETED, Source.MESSAGE_DELETED),
                   "the live edit and deletion")
        assert [m["message"] for m in recorder.of(Kind.UPDATED, Source.MESSAGE_UPDATED)] == ["edited live"]


@pytest.mark.postgres_only
def test_a_resume_replays_an_edit_held_back_by_a_writer_in_flight(
        world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    """PostgreSQL: the server delivers events in id order, so an edit committed while one of its
    writers with a lower number is still in flight (here the user's last-seen time, written as
    their stream closed, held up by a row lock) waits for that writer. A resume that opens
    meanwhile still replays the edit (the stream waits for the writers that began before it):
    it is the changelog's, not a live `message_updated` after `connected`."""
    from tests_support import databases
    client, token, admin = world
    sent = [admin.send(CHANNEL, "bob", f"before {i}") for i in range(2)]
    recorder = Recorder()
    lock = databases.PsqlSession(server.database)
    try:
        with started(client.message_collection(CHANNEL, previous_result_size=10), recorder) as view:
            lock.run("BEGIN; SELECT user_id FROM users WHERE user_id = 'me' FOR UPDATE")
            client.disconnect()
            wait_until(lambda: lock.run("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                        "AND datname = current_database()").strip() != "0", "the last-seen writer to wait")
            admin.call("PUT", f"/v3/group_channels/{CHANNEL}/messages/{sent[1]['message_id']}", {"message": "edited while away"})
            client.connect(ME, token).result(TIMEOUT)
            time.sleep(0.3)
            lock.run("COMMIT")
            wait_until(lambda: recorder.of(Kind.UPDATED), "the edit")
            wait_until(lambda: view.freshness == parley.Freshness.LIVE, "the catch-up to end")
            changes = [(c.kind.name, c.context.source.value) for c in recorder.snapshot()]
            assert [m["message"] for m in recorder.of(Kind.UPDATED, Source.MESSAGE_CHANGELOG)] == ["edited while away"], changes
            assert len(recorder.of(Kind.UPDATED)) == 1, changes
    finally:
        lock.close()


def test_huge_gap_counts_only_what_the_filter_keeps(world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    seed(admin, 10)
    recorder = Recorder()
    with started(client.message_collection(CHANNEL, sender_user_ids=["bob"], huge_gap_threshold=20), recorder) as view:
        client.disconnect()
        for index in range(40):  # 20 from bob: exactly the threshold, not more
            admin.send(CHANNEL, "bob" if index % 2 else "carol", f"x{index}")
        client.connect(ME, token).result(TIMEOUT)
        wait_until(lambda: len(recorder.of(Kind.ADDED, Source.MESSAGE_FILL)) == 20, "fill of bob's 20")
        assert Kind.HUGE_GAP_DETECTED not in recorder.kinds()
        assert ids(view.messages) == server_listing(server, token, CHANNEL, sender_ids="bob", include_reply_type="NONE")[-len(view.messages):]


def test_dispose_racing_events(world: Tuple[parley.Client, str, Admin]) -> None:
    client, token, admin = world
    seed(admin, 5)
    stop = threading.Event()

    def chatter() -> None:
        index = 0
        while not stop.is_set():
            admin.send(CHANNEL, "bob", f"race {index}")
            index += 1

    thread = threading.Thread(target=chatter)
    thread.start()
    try:
        for _ in range(100):
            disposed = threading.Event()
            late: List[Any] = []

            def record(change: MessageChange) -> None:
                if disposed.is_set():
                    late.append(change)

            view = client.message_collection(CHANNEL)
            view.add_listener(record)
            view.start()
            view.load_previous()
            view.dispose()
            disposed.set()
            time.sleep(0.005)
            assert not late
            view.dispose()
    finally:
        stop.set()
        thread.join()


def test_misuse_gives_clear_errors(world: Tuple[parley.Client, str, Admin]) -> None:
    client, token, admin = world
    with pytest.raises(parley.InvalidArgument, match="previous_result_size"):
        client.message_collection(CHANNEL, previous_result_size=0)
    with pytest.raises(parley.InvalidArgument, match="colour"):
        client.message_collection(CHANNEL, colour="red")
    with pytest.raises(parley.InvalidArgument, match="starting_point"):
        client.message_collection(CHANNEL, -5)
    view = client.message_collection(CHANNEL)
    with pytest.raises(parley.InvalidState):
        view.load_previous().result(TIMEOUT)
    cache, api = view.start()
    api.result(TIMEOUT)
    again_cache, again_api = view.start()
    with pytest.raises(parley.InvalidState):
        again_api.result(TIMEOUT)
    view.dispose()
    with pytest.raises(parley.InvalidHandle):
        view.load_next()
    client.close()
    view2 = None
    assert view2 is None


def test_async_changes(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    import asyncio

    token = admin.user(ME)
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"channel_url": CHANNEL, "user_ids": [ME, "bob"]})
    admin.send(CHANNEL, "bob", "before")

    async def main() -> None:
        async with parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
            await client.connect(ME, token)
            while client.connection_state != "open":  # else the first page cannot vouch for the newest end:
                await asyncio.sleep(0.02)              # "after" would come as a gap fill
            with client.message_collection(CHANNEL) as view:
                shown = await view.start()
                assert [m["message"] for m in shown] == ["before"]
                admin.send(CHANNEL, "bob", "after")
                async for change in view.changes():
                    if change.kind is Kind.ADDED:
                        assert [m["message"] for m in change.messages] == ["after"]
                        assert change.context.source is Source.MESSAGE_RECEIVED
                        break
                assert [m["message"] for m in view.messages] == ["before", "after"]

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_failed_messages_are_removed_or_canceled_through_the_view(world: Tuple[parley.Client, str, Admin]) -> None:
    """A canceled or removed message is reported once, as UPDATED with status CANCELED (the
    message says so), already gone from the view's failed messages; never DELETED."""
    client, token, admin = world
    seed(admin, 2)
    recorder = Recorder()
    still_failed: List[Tuple[str, bool]] = []
    admin.call("POST", f"/v3/group_channels/{CHANNEL}/mute", {"user_id": ME, "seconds": 60})
    with client.message_collection(CHANNEL) as view:
        def on_change(change: MessageChange) -> None:
            if change.context.sending_status is SendingStatus.CANCELED:
                failed = {m["req_id"] for m in view.failed_messages}
                still_failed.extend((m["message"], m["req_id"] in failed) for m in change.messages)
            recorder(change)

        view.add_listener(on_change)
        view.start()[1].result(TIMEOUT)
        for text in ("refused 1", "refused 2", "refused 3"):
            _, future = view.send_user_message(text)
            with pytest.raises(parley.ParleyError):
                future.result(TIMEOUT)
        wait_until(lambda: len(view.failed_messages) == 3, "three failed")
        assert [m["message"] for m in view.messages[-3:]] == ["refused 1", "refused 2", "refused 3"]
        view.cancel_message(view.failed_messages[0]["req_id"])
        wait_until(lambda: len(view.failed_messages) == 2, "one canceled")
        removed = view.remove_failed_messages()
        assert len(removed) == 2

        def story(text: str) -> List[Tuple[Kind, SendingStatus, Source, Optional[str]]]:
            with recorder.lock:
                return [(c.kind, c.context.sending_status, c.context.source, m.get("sending_status"))
                        for c in recorder.changes for m in c.messages if m.get("message") == text]

        wait_until(lambda: all(len(story(f"refused {n}")) == 3 for n in (1, 2, 3)), "all three reported canceled")
        for n in (1, 2, 3):
            assert story(f"refused {n}") == [
                (Kind.ADDED, SendingStatus.PENDING, Source.LOCAL_SEND, "pending"),
                (Kind.UPDATED, SendingStatus.FAILED, Source.LOCAL_SEND, "failed"),
                (Kind.UPDATED, SendingStatus.CANCELED, Source.LOCAL_SEND, "canceled"),
            ]
        assert still_failed == [("refused 1", False), ("refused 2", False), ("refused 3", False)]
        assert not view.failed_messages
        assert all("sending_status" not in m for m in view.messages)


def test_dispose_from_inside_a_callback(world: Tuple[parley.Client, str, Admin]) -> None:
    client, token, admin = world
    seed(admin, 2)
    view = client.message_collection(CHANNEL)
    after: List[Any] = []
    disposed = threading.Event()

    def on_added(context: Any, channel: Any, messages: List[Any]) -> None:
        if disposed.is_set():
            after.append(messages)
            return
        view.dispose()
        view.dispose()  # twice, still inside the callback
        disposed.set()

    view.start()[1].result(TIMEOUT)
    view.on_added = on_added
    admin.send(CHANNEL, "bob", "one")
    wait_until(disposed.is_set, "disposed from the callback")
    admin.send(CHANNEL, "bob", "two")
    time.sleep(0.3)
    assert not after and view.disposed


def test_messages_arriving_during_the_start_are_neither_lost_nor_doubled(
        world: Tuple[parley.Client, str, Admin], server: RunningServer) -> None:
    client, token, admin = world
    seed(admin, 50)
    wait_until(lambda: client.connection_state == "open", "the stream")
    stop = threading.Event()

    def chatter() -> None:
        index = 0
        while not stop.is_set():
            admin.send(CHANNEL, "bob" if index % 2 else "carol", f"during {index}")
            index += 1

    thread = threading.Thread(target=chatter)
    thread.start()
    views = []
    try:
        for size in (5, 17, 40, 200):
            view = client.message_collection(CHANNEL, previous_result_size=size)
            view.start()
            views.append(view)
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    truth = server_listing(server, token, CHANNEL)
    for view in views:
        wait_until(lambda: ids(view.messages) == truth[-len(view.messages):] and ids(view.messages)[-1] == truth[-1],
                   "the view ends like the server's listing")
        shown = ids(view.messages)
        assert len(shown) == len(set(shown))
        view.dispose()


def test_a_gap_fill_that_brings_a_failed_message_reports_it_once(server: RunningServer, tmp_path: Path) -> None:
    """The server stores a message this client still shows as failed (its answer was lost),
    and the view learns of it through a gap fill, not an event (the server kept too few
    events to replay): the fill's copy replaces the failed entry as `updated`, never a second
    `added` of the same message."""
    server.process.terminate()
    server.process.wait()
    port = server.url.rsplit(":", 1)[1]
    database = server_database(tmp_path, "retention.sqlite")

    def start() -> subprocess.Popen:
        process = subprocess.Popen([os.environ.get("PARLEY_SERVER_BIN", ""), "--port", port, "--database", str(database),
                                    "--api-token", server.api_token, "--event-retention", "3"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert process.stdout is not None and "listening" in process.stdout.readline()
        return process

    process = start()
    try:
        admin = Admin(server)
        token = admin.user(ME)
        admin.user("bob")
        admin.call("POST", "/v3/group_channels", {"channel_url": CHANNEL, "user_ids": [ME, "bob"]})
        for index in range(3):
            admin.send(CHANNEL, "bob", f"before {index}")
        recorder = Recorder()
        with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), resend_policy="manual",
                           reconnect_initial_delay_ms=50, reconnect_max_delay_ms=300) as client:
            client.connect(ME, token).result(TIMEOUT)
            wait_until(lambda: client.connection_state == "open", "the stream")
            with started(client.message_collection(CHANNEL), recorder) as view:
                process.kill()
                process.wait()
                pending, future = view.send_user_message("answer lost")
                with pytest.raises((parley.NetworkError, parley.Timeout)):
                    future.result(TIMEOUT)
                wait_until(lambda: [m["message"] for m in view.failed_messages] == ["answer lost"], "shown as failed")
                client.disconnect()  # back only once the server has everything below
                process = start()
                stored = admin.send(CHANNEL, ME, "answer lost", req_id=pending["req_id"])
                for index in range(5):  # more events than the server keeps: no replay, a resync and a gap fill
                    admin.send(CHANNEL, "bob", f"after {index}")
                client.connect(ME, token).result(TIMEOUT)
                wait_until(lambda: not view.failed_messages and len(view.messages) == 9, "filled")
                # The list changes just before the handler hears of it: wait for the update too.
                wait_until(lambda: any(m.get("req_id") == pending["req_id"] and m["message_id"] == stored["message_id"]
                                       for m in recorder.of(Kind.UPDATED)), "the update recorded")
                shown = [m for m in view.messages if m.get("req_id") == pending["req_id"]]
                assert len(shown) == 1 and shown[0]["message_id"] == stored["message_id"]
                added = [m for m in recorder.of(Kind.ADDED) if m.get("req_id") == pending["req_id"]]
                assert [m["message_id"] for m in added] == [0], added  # the pending entry only
                updated = [m for m in recorder.of(Kind.UPDATED) if m.get("req_id") == pending["req_id"]]
                assert updated and updated[-1]["message_id"] == stored["message_id"]
    finally:
        process.terminate()
        process.wait()
