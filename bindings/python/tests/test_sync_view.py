"""The SyncManager-style view against the real server: fetching both ways from a viewpoint
in the middle of 2,000 messages visits every message once, in order, equal to the server's
listing (each filter); offline, missed messages come with fetch_all_next, exactly once; the
three resend policies under a server that refuses, is unreachable, then accepts give exact
action sequences and the server holds each message at most once; the retry count and the
per-channel maximum of failed messages; reset_viewpoint during fetches."""
from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import parley
from parley import SyncAction, SyncActionKind as Act, SyncDirection, SyncList
from conftest import Admin, Collected, RunningServer
from test_message_collection import bulk_send, restart_server, seed, server_filters, server_listing, wait_until

TIMEOUT = 30.0
ME = "me"
CHANNEL = "room"


class Actions(Collected[SyncAction]):
    """Records a sync view's actions."""

    def flat(self, since: int = 0) -> List[Tuple[Act, SyncList, str]]:
        """(action, list, text) per message, in delivery order; CLEAR as one entry with text ""."""
        out: List[Tuple[Act, SyncList, str]] = []
        for item in self.snapshot()[since:]:
            if item.action is Act.CLEAR:
                out.append((item.action, item.list, ""))
            for message in item.messages:
                out.append((item.action, item.list, message.get("message", "")))
        return out


def make_client(server: RunningServer, tmp_path: Path, name: str = "cache", **config: Any) -> parley.Client:
    return parley.Client(server_url=server.url, cache_dir=str(tmp_path / name), reconnect_initial_delay_ms=50,
                         reconnect_max_delay_ms=300, **config)


@pytest.fixture
def room(server: RunningServer, admin: Admin) -> str:
    token = admin.user(ME)
    admin.user("bob")
    admin.user("carol")
    admin.call("POST", "/v3/group_channels", {"channel_url": CHANNEL, "user_ids": [ME, "bob", "carol"]})
    return token


FILTERS: List[Dict[str, Any]] = [
    {},
    {"reply_type": "none"},
    {"custom_types": ["news"], "reply_type": "only_reply_to_channel"},
    {"message_type_filter": "user", "sender_user_ids": ["bob"]},
]


@pytest.mark.bulk_sends
def test_fetching_both_ways_from_the_middle_visits_every_message_once(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    sent = seed(admin, 2000)
    viewpoint = sent[1000]["created_at"]
    with make_client(server, tmp_path) as client:
        client.connect(ME, room).result(TIMEOUT)
        for options in FILTERS:
            truth = server_listing(server, room, CHANNEL, **server_filters({"reply_type": "all", **options}))
            assert len(truth) > 100
            actions = Actions()
            with client.sync_view(CHANNEL, viewpoint, limit=64, on_action=actions, **options) as view:
                first = view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
                assert first.has_more and not first.offline
                batches: List[Tuple[str, List[int]]] = [("first", [m["message_id"] for m in actions.snapshot()[0].messages])]
                assert len(actions.snapshot()) == 1
                for direction in (SyncDirection.PREVIOUS, SyncDirection.NEXT):
                    while True:
                        before = len(actions.snapshot())
                        outcome = view.fetch(direction).result(TIMEOUT)
                        new = actions.snapshot()[before:]
                        assert all(a.action is Act.INSERT and a.list is SyncList.SUCCEEDED for a in new)
                        got = [m["message_id"] for a in new for m in a.messages]
                        assert len(got) <= 64
                        batches.append((direction.name, got))
                        if not outcome.has_more:
                            break
                # Each batch in order; older batches entirely before what was shown, newer ones after.
                shown: List[int] = list(batches[0][1])
                for way, got in batches[1:]:
                    assert got == sorted(got, key=truth.index)
                    shown = got + shown if way == "PREVIOUS" else shown + got
                assert shown == truth, (options, len(shown), len(truth))
                assert [m["message_id"] for m in view.succeeded_messages] == truth
                first_ids = batches[0][1]
                point = truth.index(first_ids[0])
                assert first_ids == truth[point:point + len(first_ids)]
                assert view.fetch(SyncDirection.NEXT).result(TIMEOUT).has_more is False


def test_offline_then_fetch_all_next_inserts_exactly_the_missed_messages(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    seed(admin, 40)
    actions = Actions()
    with make_client(server, tmp_path) as client:
        client.connect(ME, room).result(TIMEOUT)
        with client.sync_view(CHANNEL, limit=30, on_action=actions) as view:
            assert view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT).has_more
            live = admin.send(CHANNEL, "bob", "live at the end")
            wait_until(lambda: any(m["message_id"] == live["message_id"] for m in view.succeeded_messages), "live insert")
            client.disconnect()
            # Offline the view still answers from the cache, and says so.
            outcome = view.fetch(SyncDirection.NEXT).result(TIMEOUT)
            assert outcome.offline and not outcome.has_more
            missed = bulk_send(admin, 50, "missed")
            mark = len(actions.snapshot())
            client.connect(ME, room).result(TIMEOUT)
            time.sleep(1.0)
            # The view does not fill what it missed by itself: nothing was inserted yet.
            assert actions.flat(mark) == []
            result = view.fetch_all_next().result(TIMEOUT)
            assert not result.has_more and not result.offline
            inserted = [(a.action, a.list, m["message_id"]) for a in actions.snapshot()[mark:] for m in a.messages]
            assert inserted == [(Act.INSERT, SyncList.SUCCEEDED, m["message_id"]) for m in missed]
            # Back at the newest end: a new message is inserted as it arrives.
            after = admin.send(CHANNEL, "carol", "after the catch-up")
            wait_until(lambda: view.succeeded_messages[-1]["message_id"] == after["message_id"], "live again")
            assert [m["message_id"] for m in view.succeeded_messages] == server_listing(server, room, CHANNEL, include_reply_type="ALL")[-len(view.succeeded_messages):]


def test_scrolled_up_the_view_defers_new_messages_and_updates_only_what_it_shows(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    sent = seed(admin, 100)
    actions = Actions()
    with make_client(server, tmp_path) as client:
        client.connect(ME, room).result(TIMEOUT)
        with client.sync_view(CHANNEL, sent[20]["created_at"], limit=10, on_action=actions) as view:
            assert view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT).has_more
            # Changed once the view is live: earlier, the catch-up's message changelog could
            # report the edit and the deletion as one removal.
            wait_until(lambda: view.freshness is parley.Freshness.LIVE, "the view to be live")
            shown = {m["message_id"] for m in view.succeeded_messages}
            inside = next(m for m in sent if m["message_id"] in shown)
            outside = sent[90]
            mark = len(actions.snapshot())
            admin.send(CHANNEL, "bob", "new while scrolled up")
            admin.call("PUT", f"/v3/group_channels/{CHANNEL}/messages/{outside['message_id']}", {"message": "edited outside"})
            admin.call("PUT", f"/v3/group_channels/{CHANNEL}/messages/{inside['message_id']}", {"message": "edited inside"})
            admin.call("DELETE", f"/v3/group_channels/{CHANNEL}/messages/{inside['message_id']}")
            wait_until(lambda: len(actions.flat(mark)) >= 2, "update and remove")
            time.sleep(0.5)
            assert actions.flat(mark) == [(Act.UPDATE, SyncList.SUCCEEDED, "edited inside"),
                                          (Act.REMOVE, SyncList.SUCCEEDED, "edited inside")]
            # The deferred message comes with the fetches toward the newest end.
            while view.fetch(SyncDirection.NEXT).result(TIMEOUT).has_more:
                pass
            texts = [m["message"] for m in view.succeeded_messages]
            assert texts[-1] == "new while scrolled up" and "edited outside" in texts


def send_and_wait(client: parley.Client, text: str) -> Optional[parley.ParleyError]:
    _, future = client.send_user_message(CHANNEL, text)
    try:
        future.result(TIMEOUT)
        return None
    except parley.ParleyError as error:
        return error


def texts_on_server(server: RunningServer, admin: Admin, token: str) -> List[str]:
    return [admin.call("GET", f"/v3/group_channels/{CHANNEL}/messages/{i}")["message"]
            for i in server_listing(server, token, CHANNEL, include_reply_type="ALL")]


POLICY_SEQUENCES = {
    "none": [
        (Act.INSERT, SyncList.PENDING, "refused"), (Act.REMOVE, SyncList.PENDING, "refused"),
        (Act.INSERT, SyncList.PENDING, "unreachable"), (Act.REMOVE, SyncList.PENDING, "unreachable"),
    ],
    "manual": [
        (Act.INSERT, SyncList.PENDING, "refused"), (Act.REMOVE, SyncList.PENDING, "refused"), (Act.INSERT, SyncList.FAILED, "refused"),
        (Act.INSERT, SyncList.PENDING, "unreachable"), (Act.REMOVE, SyncList.PENDING, "unreachable"),
        (Act.INSERT, SyncList.FAILED, "unreachable"),
    ],
}
POLICY_SEQUENCES["automatic"] = POLICY_SEQUENCES["manual"]


def track_connection(client: parley.Client) -> List[str]:
    """The client's connection events, in order (set before `connect`, to miss none)."""
    connection: List[str] = []
    client.set_connection_handler(lambda event, _error: connection.append(event))
    return connection


def settle_catch_up(client: parley.Client, connection: List[str]) -> None:
    """Returns once no catch-up runs: one still running when the server dies ends by draining
    the outbox, which would resend a failed message at a moment the test does not choose. A
    reconnect reports success only after its catch-up (and any pass still running) is done;
    the first stream must have opened before it, or the next one is a first `connected`."""
    wait_until(lambda: "connected" in connection, "the stream opened")
    client.reconnect()
    wait_until(lambda: "reconnect_succeeded" in connection, "the catch-up finished")


@contextlib.contextmanager
def settled_view(server: RunningServer, tmp_path: Path, token: str, actions: Actions,
                 **config: Any) -> Iterator[Tuple[parley.Client, parley.SyncView, Callable[[], None]]]:
    """A client of `config` connected as the user, its sync view of the channel reporting to
    `actions`, fetched once and past the first catch-up (:func:`settle_catch_up`): the client,
    the view and `restart()`, which starts the killed server again (stopped after the block,
    with the client closed)."""
    restarted: List[subprocess.Popen] = []
    client = make_client(server, tmp_path, **config)
    connection = track_connection(client)
    try:
        client.connect(ME, token).result(TIMEOUT)
        with client.sync_view(CHANNEL, on_action=actions) as view:
            view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
            settle_catch_up(client, connection)
            yield client, view, lambda: restarted.append(restart_server(server, tmp_path))
    finally:
        client.close()
        for process in restarted:
            process.terminate()
            process.wait()


@pytest.mark.parametrize("policy", ["none", "manual", "automatic"])
def test_resend_policies_under_refusal_outage_and_acceptance(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path, policy: str) -> None:
    seed(admin, 5)
    actions = Actions()
    with settled_view(server, tmp_path, room, actions, resend_policy=policy) as (client, view, restart):
        mark = len(actions.snapshot())
        # The server refuses: the channel is frozen.
        admin.call("PUT", f"/v3/group_channels/{CHANNEL}/freeze", {"freeze": True})
        assert isinstance(send_and_wait(client, "refused"), parley.Forbidden)
        # Unfrozen before the outage: the client may reconnect (and resend) as soon as the
        # server is back, so the server must accept from its first request. A refusal is not
        # resent by any policy (manual and automatic keep it failed, none drops it), even though
        # it would now be accepted.
        admin.call("PUT", f"/v3/group_channels/{CHANNEL}/freeze", {"freeze": False})
        # The server is unreachable.
        server.process.kill()
        server.process.wait()
        assert isinstance(send_and_wait(client, "unreachable"), (parley.NetworkError, parley.Timeout))
        wait_until(lambda: len(actions.flat(mark)) == len(POLICY_SEQUENCES[policy]), "the failures")
        assert actions.flat(mark) == POLICY_SEQUENCES[policy]
        # The server accepts again; what the client does from here is counted from before it
        # can reconnect.
        mark = len(actions.snapshot())
        restart()
        wait_until(lambda: client.connection_state == "open", "reconnected")
        view.fetch_all_next().result(TIMEOUT)
        if policy == "automatic":
            wait_until(lambda: len(actions.flat(mark)) >= 4, "the automatic resend")
        time.sleep(1.0)
        after_outage = actions.flat(mark)
        if policy == "automatic":
            assert after_outage == [
                (Act.REMOVE, SyncList.FAILED, "unreachable"), (Act.INSERT, SyncList.PENDING, "unreachable"),
                (Act.REMOVE, SyncList.PENDING, "unreachable"), (Act.INSERT, SyncList.SUCCEEDED, "unreachable"),
            ]
            assert [m["message"] for m in view.failed_messages] == ["refused"]  # a refusal is kept
        else:
            assert after_outage == []  # nothing goes out by itself
        if policy == "manual":
            assert [m["message"] for m in view.failed_messages] == ["refused", "unreachable"]
            for failed in view.failed_messages:
                client.resend_message(failed["req_id"]).result(TIMEOUT)
            assert actions.flat(mark) == [
                (Act.REMOVE, SyncList.FAILED, "refused"), (Act.INSERT, SyncList.PENDING, "refused"),
                (Act.REMOVE, SyncList.PENDING, "refused"), (Act.INSERT, SyncList.SUCCEEDED, "refused"),
                (Act.REMOVE, SyncList.FAILED, "unreachable"), (Act.INSERT, SyncList.PENDING, "unreachable"),
                (Act.REMOVE, SyncList.PENDING, "unreachable"), (Act.INSERT, SyncList.SUCCEEDED, "unreachable"),
            ]
        if policy == "none":
            assert view.failed_messages == [] and view.pending_messages == []
            assert client.cached_messages(CHANNEL)[-1].get("sending_status") is None
        mark = len(actions.snapshot())
        assert send_and_wait(client, "accepted") is None
        assert actions.flat(mark) == [(Act.INSERT, SyncList.PENDING, "accepted"), (Act.REMOVE, SyncList.PENDING, "accepted"),
                                      (Act.INSERT, SyncList.SUCCEEDED, "accepted")]
        on_server = texts_on_server(server, admin, room)
        expected = {"none": ["accepted"], "manual": ["refused", "unreachable", "accepted"],
                    "automatic": ["unreachable", "accepted"]}[policy]
        assert on_server[5:] == expected
        assert [m["message"] for m in view.succeeded_messages][-len(expected):] == expected


def test_automatic_resend_stops_after_the_retry_count(server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    actions = Actions()
    with settled_view(server, tmp_path, room, actions, resend_policy="automatic", resend_retry_count=1) as (client, view, restart):
        server.process.kill()
        server.process.wait()
        assert send_and_wait(client, "a") is not None      # first attempt
        assert send_and_wait(client, "b") is not None      # its drain resends "a" once (the one retry), then "b" fails with it
        wait_until(lambda: [m["message"] for m in view.failed_messages] == ["a", "b"], "both failed")
        story = [
            (Act.INSERT, SyncList.PENDING, "a"), (Act.REMOVE, SyncList.PENDING, "a"), (Act.INSERT, SyncList.FAILED, "a"),
            (Act.INSERT, SyncList.PENDING, "b"),
            (Act.REMOVE, SyncList.FAILED, "a"), (Act.INSERT, SyncList.PENDING, "a"),
            (Act.REMOVE, SyncList.PENDING, "a"), (Act.INSERT, SyncList.FAILED, "a"),
            (Act.REMOVE, SyncList.PENDING, "b"), (Act.INSERT, SyncList.FAILED, "b"),
        ]
        # The lists change just before the handler hears of it: wait for the last action too.
        wait_until(lambda: len(actions.flat()) >= len(story), "the last action recorded")
        assert actions.flat() == story
        restart()
        wait_until(lambda: [m["message"] for m in view.failed_messages] == ["a"], "b resent, a kept")
        time.sleep(1.0)
        assert texts_on_server(server, admin, room) == ["b"]
        # A resend the application asks for gives "a" its retries again.
        client.resend_message(view.failed_messages[0]["req_id"]).result(TIMEOUT)
        assert texts_on_server(server, admin, room) == ["b", "a"]


def test_failed_messages_beyond_the_maximum_are_removed_oldest_first(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    actions = Actions()
    client = make_client(server, tmp_path, resend_policy="manual", max_failed_messages_per_channel=2)
    try:
        client.connect(ME, room).result(TIMEOUT)
        with client.sync_view(CHANNEL, on_action=actions) as view:
            view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
            admin.call("PUT", f"/v3/group_channels/{CHANNEL}/freeze", {"freeze": True})
            for text in ("one", "two", "three"):
                assert isinstance(send_and_wait(client, text), parley.Forbidden)
            wait_until(lambda: [m["message"] for m in view.failed_messages] == ["two", "three"], "two kept")
            # The lists change just before the handler hears of it: waited for, not read at once.
            wait_until(lambda: (Act.REMOVE, SyncList.FAILED, "one") in actions.flat(), "the oldest failed message removed")
            cached_failed = [m for m in client.cached_messages(CHANNEL) if m.get("sending_status") == "failed"]
            assert [m["message"] for m in cached_failed] == ["two", "three"]
            # A failed message carries its failure wherever it is read.
            assert all(m["error_code"] == parley.Forbidden.code and "frozen" in m["error_message"] for m in cached_failed)
    finally:
        client.close()


def test_messages_removed_over_the_maximum_still_complete_once(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    """Sends queued behind a connection failure fail with it; those removed over the maximum
    of failed messages still get their completion (exactly once)."""
    client = make_client(server, tmp_path, resend_policy="manual", max_failed_messages_per_channel=1)
    try:
        client.connect(ME, room).result(TIMEOUT)
        server.process.kill()
        server.process.wait()
        futures = [client.send_user_message(CHANNEL, f"queued {i}")[1] for i in range(4)]
        for future in futures:
            with pytest.raises((parley.NetworkError, parley.Timeout)):
                future.result(TIMEOUT)
        failed = [m["message"] for m in client.cached_messages(CHANNEL) if m.get("sending_status") == "failed"]
        assert failed == ["queued 3"]
    finally:
        client.close()


def test_reset_viewpoint_during_fetches_clears_then_shows_only_the_new_viewpoint(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    sent = bulk_send(admin, 300, "m")
    old_point, new_point = sent[250]["created_at"], sent[50]["created_at"]
    truth = server_listing(server, room, CHANNEL, include_reply_type="ALL")
    actions = Actions()
    with make_client(server, tmp_path) as client:
        client.connect(ME, room).result(TIMEOUT)
        holder: Dict[str, Any] = {}

        def on_action(action: SyncAction) -> None:
            actions(action)
            if action.action is Act.INSERT and "reset" not in holder:
                holder["reset"] = True
                holder["view"].reset_viewpoint(new_point)  # from inside the callback, fetches still queued

        with client.sync_view(CHANNEL, old_point, limit=20, on_action=on_action) as view:
            holder["view"] = view
            futures = [view.fetch(SyncDirection.PREVIOUS) for _ in range(3)]
            for future in futures:
                with pytest.raises(parley.Cancelled):
                    future.result(TIMEOUT)
            wait_until(lambda: sum(a.action is Act.CLEAR for a in actions.snapshot()) == 3, "the clears")
            items = actions.snapshot()
            clears = [i for i, a in enumerate(items) if a.action is Act.CLEAR]
            assert [items[i].list for i in clears] == [SyncList.SUCCEEDED, SyncList.PENDING, SyncList.FAILED]
            assert clears == [1, 2, 3] and items[0].action is Act.INSERT
            assert view.succeeded_messages == []
            assert view.viewpoint == new_point
            view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
            after = [m["message_id"] for a in actions.snapshot()[4:] for m in a.messages]
            assert after, "the new viewpoint's messages"
            around = [m["message_id"] for m in sent if abs(m["created_at"] - new_point) <= 0 or m in sent[30:71]]
            assert set(after) <= set(truth[30:71]) | set(around)
            assert [m["message_id"] for m in view.succeeded_messages] == sorted(after, key=truth.index)
        # From another thread, right after a fetch was asked for: the same rules. The fetch may
        # have finished before the reset reached the view (a loaded host can hold this thread
        # that long); its completion then comes before the clears, in the callbacks' one order.
        log: Collected[Tuple[str, Any]] = Collected()
        with client.sync_view(CHANNEL, old_point, limit=20, on_action=lambda a: log(("action", a))) as view:
            future = view.fetch(SyncDirection.PREVIOUS)
            future.add_done_callback(lambda done: log(("completed", done.exception() is None)))
            view.reset_viewpoint(new_point)
            try:
                future.result(TIMEOUT)
            except parley.Cancelled:
                pass
            view.fetch(SyncDirection.NEXT).result(TIMEOUT)
            entries = log.snapshot()
            items = [item for kind, item in entries if kind == "action"]
            assert sum(a.action is Act.CLEAR for a in items) == 3
            first_clear = next(i for i, (kind, item) in enumerate(entries) if kind == "action" and item.action is Act.CLEAR)
            completed = [i for i, (kind, ok) in enumerate(entries) if kind == "completed" and ok]
            assert all(i < first_clear for i in completed), "a fetch of the old viewpoint completed after the reset"
            later = [m["message_id"] for kind, a in entries[first_clear:] if kind == "action" for m in a.messages]
            assert later and set(later) <= set(truth[30:71])


def test_offline_first_fetch_gives_the_cache_then_the_server_version(
        server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    sent = seed(admin, 30)
    with make_client(server, tmp_path) as client:
        client.connect(ME, room).result(TIMEOUT)
        with client.sync_view(CHANNEL, limit=30) as view:
            view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
        client.disconnect()
        admin.call("DELETE", f"/v3/group_channels/{CHANNEL}/messages/{sent[-1]['message_id']}")
        admin.call("PUT", f"/v3/group_channels/{CHANNEL}/messages/{sent[-2]['message_id']}", {"message": "changed"})
        actions = Actions()
        with client.sync_view(CHANNEL, limit=30, on_action=actions) as view:
            outcome = view.fetch(SyncDirection.PREVIOUS).result(TIMEOUT)
            assert outcome.offline
            cached = [m["message_id"] for m in view.succeeded_messages]
            assert cached[-1] == sent[-1]["message_id"]
            mark = len(actions.snapshot())
            client.connect(ME, room).result(TIMEOUT)
            wait_until(lambda: sent[-1]["message_id"] not in [m["message_id"] for m in view.succeeded_messages], "the server's version")
            wait_until(lambda: view.succeeded_messages[-1]["message"] == "changed", "the update")
            # A view's lists change just before the actions that tell it are handed over (in
            # either order, replayed or read from a changelog): wait for the handler to have
            # recorded both.
            wanted = {(Act.UPDATE, SyncList.SUCCEEDED, "changed"), (Act.REMOVE, SyncList.SUCCEEDED, sent[-1]["message"])}
            wait_until(lambda: wanted <= set(actions.flat(mark)), "the update's and the removal's actions")
            flat = actions.flat(mark)
            assert not any(a == Act.INSERT for a, _, _ in flat)


def test_misuse_gives_clear_errors(server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    with make_client(server, tmp_path) as client:
        with pytest.raises(parley.InvalidState):
            client.sync_view(CHANNEL)  # not connected yet: the cache is per user
        client.connect(ME, room).result(TIMEOUT)
        with pytest.raises(parley.InvalidArgument, match="options.limit"):
            client.sync_view(CHANNEL, limit=0)
        with pytest.raises(parley.InvalidArgument, match="unknown key 'starting'"):
            client.sync_view(CHANNEL, starting=1)
        with pytest.raises(parley.InvalidArgument, match="viewpoint"):
            client.sync_view(CHANNEL, -5)
        with pytest.raises(parley.InvalidArgument, match="resend_policy"):
            parley.Client(server_url=server.url, resend_policy="sometimes")
        with pytest.raises(parley.InvalidArgument, match="contradicts"):
            parley.Client(server_url=server.url, resend_policy="none", auto_resend=True)
        view = client.sync_view(CHANNEL)
        view.dispose()
        view.dispose()
        with pytest.raises(parley.ParleyError):
            view.fetch()
        with pytest.raises(parley.ParleyError):
            view.reset_viewpoint(0)


def test_async_actions(server: RunningServer, admin: Admin, room: str, tmp_path: Path) -> None:
    import asyncio

    admin.send(CHANNEL, "bob", "before")

    async def main() -> None:
        async with parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
            await client.connect(ME, room)
            with client.sync_view(CHANNEL, limit=10) as view:
                first = await view.fetch(SyncDirection.PREVIOUS)
                assert not first.has_more and not first.offline
                sent = await client.send_user_message(CHANNEL, "mine")
                seen: List[Tuple[Act, SyncList, str]] = []
                async for action in view.actions():
                    seen += [(action.action, action.list, m["message"]) for m in action.messages]
                    if (Act.INSERT, SyncList.SUCCEEDED, "mine") in seen:
                        break
                assert seen == [(Act.INSERT, SyncList.SUCCEEDED, "before"), (Act.INSERT, SyncList.PENDING, "mine"),
                                (Act.REMOVE, SyncList.PENDING, "mine"), (Act.INSERT, SyncList.SUCCEEDED, "mine")]
                await sent.delivered
                assert [m["message"] for m in view.messages(SyncList.SUCCEEDED)] == ["before", "mine"]

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
