"""Every send ends exactly once, and the views agree with the cache and the server, when the
channel is left while its messages wait (online, offline, through a cut) and when a message
is deleted on the server before the resend that its lost answer called for."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

import parley
from parley import MessageChangeKind as Kind
from parley.errors import Status
from conftest import Admin, Collected, RunningServer, server_database
from tcp_relay import AnswerHoldingProxy, shut_down
from test_engine import TIMEOUT, RestartableServer, connected, server_messages, setup_pair
from test_fault_injection import FaultyProxy


def wait_until(condition: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def outcome(future: Any) -> str:
    """How a send ended: "sent", or the error's class name (raises if it never ends)."""
    try:
        future.result(TIMEOUT)
        return "sent"
    except parley.ParleyError as error:
        return type(error).__name__


def replayed(changes: List[Any]) -> List[str]:
    """The req_ids an application holds after applying every change of a view, in order."""
    shown: List[str] = []
    for change in changes:
        for message in change.messages:
            req_id = message.get("req_id", "")
            if change.kind is Kind.ADDED and req_id not in shown:
                shown.append(req_id)
            elif change.kind is Kind.DELETED and req_id in shown:
                shown.remove(req_id)
            elif change.kind is Kind.UPDATED and message.get("sending_status") == "canceled" and req_id in shown:
                shown.remove(req_id)
    return shown


@contextlib.contextmanager
def started_view(client: parley.Client, url: str) -> Iterator[Tuple[parley.MessageCollection, Collected[Any]]]:
    """The channel's message view, started, keeping every change it reports; disposed after the block."""
    changes: Collected[Any] = Collected()
    with client.message_collection(url) as view:
        view.add_listener(changes)
        view.start()[1].result(TIMEOUT)
        yield view, changes


def leave(admin: Admin, url: str, user: str) -> None:
    admin.call("PUT", f"/v3/group_channels/{url}/leave", {"user_ids": [user]})


def unsent(messages: List[Any]) -> List[Tuple[str, str]]:
    """(req_id, sending_status) of the pending and failed messages among `messages`."""
    return [(m["req_id"], m["sending_status"]) for m in messages if m.get("sending_status") in ("pending", "failed")]


@pytest.mark.parametrize("resend_policy", ["automatic", "manual", "none"])
@pytest.mark.parametrize("first_answer", ["delivered", "lost"])
def test_every_send_ends_once_when_its_user_leaves_the_channel(server: RunningServer, admin: Admin, tmp_path: Path,
                                                               first_answer: str, resend_policy: str) -> None:
    # Four sends queued; the server stores the first, and the user is removed from the channel
    # before its answer comes back (or with the answer lost with every connection). Each send
    # ends once; a refused one is kept failed or dropped as the resend policy says, and the
    # view, the cache, the events and the server agree.
    alice_token, _, url = setup_pair(admin)
    admin.send(url, "bob", "before")
    proxy = AnswerHoldingProxy(server.url, f"POST /v3/group_channels/{url}/messages".encode())
    try:
        with connected(proxy.url, tmp_path / "cache", "alice", alice_token, resend_policy=resend_policy) as (client, recorder):
            with started_view(client, url) as (view, changes):
                proxy.arm()
                sends = [client.send_user_message(url, f"queued {i}") for i in range(4)]
                reqs = [pending["req_id"] for pending, _ in sends]
                assert proxy.answered.wait(10), "the server did not answer the first send"
                leave(admin, url, "alice")
                if first_answer == "lost":
                    shut_down(*proxy.sockets)
                proxy.release()
                outcomes = [outcome(future) for _, future in sends]
                assert [m["req_id"] for m in server_messages(admin, url) if m["req_id"]] == reqs[:1]
                wait_until(lambda: client.cached_channel(url) is None, "the channel to leave the cache")
                if first_answer == "delivered":
                    assert outcomes == ["sent", "Forbidden", "Forbidden", "Forbidden"]
                    assert sorted(p["req_id"] for p in recorder.of("message_failed")) == sorted(reqs[1:])
                else:
                    # The first may still be confirmed by its echo on the stream; the others
                    # fail with the connection or are refused. Automatic resends deliver the
                    # first (the server has it by req_id) and are refused for the others.
                    assert outcomes[0] in ("sent", "NetworkError"), outcomes
                    assert set(outcomes[1:]) <= {"Forbidden", "NetworkError"}, outcomes
                    if resend_policy == "automatic":
                        wait_until(lambda: reqs[0] in [p["req_id"] for p in recorder.of("message_sent")], "the first sent")
                first_kept = outcomes[0] != "sent" and resend_policy == "manual"
                kept = [] if resend_policy == "none" else [(r, "failed") for r in reqs if r != reqs[0] or first_kept]
                wait_until(lambda: unsent(view.messages) == kept, f"the view to settle (shows {unsent(view.messages)})")
                wait_until(lambda: unsent(client.cached_messages(url)) == kept, "the cache to settle")
                # An application applying every change holds just as many of them.
                assert [r for r in replayed(changes.snapshot()) if r in reqs[1:]] == [r for r, _ in kept if r != reqs[0]]
                if kept:
                    with pytest.raises(parley.Forbidden):
                        client.resend_message(kept[-1][0]).result(TIMEOUT)
    finally:
        proxy.close()


@pytest.mark.parametrize("resend_policy", ["automatic", "manual"])
def test_sends_waiting_offline_end_once_when_the_channel_is_left_meanwhile(server: RunningServer, admin: Admin,
                                                                           tmp_path: Path, resend_policy: str) -> None:
    alice_token, _, url = setup_pair(admin)
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        with connected(proxy.url, tmp_path / "cache", "alice", alice_token, resend_policy=resend_policy) as (client, recorder):
            with started_view(client, url) as (view, changes):
                proxy.go_offline()
                sends = [client.send_user_message(url, f"offline {i}") for i in range(3)]
                assert [outcome(future) for _, future in sends] == ["NetworkError"] * 3
                reqs = [pending["req_id"] for pending, _ in sends]
                wait_until(lambda: unsent(view.messages) == [(r, "failed") for r in reqs], "the failed messages in the view")
                leave(admin, url, "alice")
                proxy.come_back()
                wait_until(lambda: client.cached_channel(url) is None, "the channel to leave the cache")
                if resend_policy == "automatic":
                    # Resent after the reconnection and refused: failed again, with the server's reason.
                    wait_until(lambda: len([p for p in recorder.of("message_failed") if p.get("error_code") == Status.FORBIDDEN]) == 3,
                               "the resends to be refused")
                wait_until(lambda: unsent(view.messages) == [(r, "failed") for r in reqs], "the view to settle")
                assert unsent(client.cached_messages(url)) == [(r, "failed") for r in reqs]
                assert [r for r in replayed(changes.snapshot()) if r in reqs] == reqs
                with pytest.raises(parley.Forbidden):
                    client.resend_message(reqs[0]).result(TIMEOUT)
                client.remove_failed_messages(url)
                wait_until(lambda: unsent(view.messages) == [], "the view to drop the removed messages")
                assert client.cached_messages(url) == []
        assert server_messages(admin, url) == []
    finally:
        proxy.close()


@pytest.mark.parametrize("retention", ["events kept", "events expired"])
@pytest.mark.parametrize("resend_policy", ["automatic", "manual"])
def test_a_send_stored_then_deleted_before_its_resend_shows_nothing(tmp_path: Path, retention: str,
                                                                     resend_policy: str) -> None:
    # The first attempt's answer is lost with the connection, though the server stored the
    # message (the admin API stores it with the send's req_id, as the lost attempt did); the
    # message is deleted before the client is back. Kept events bring its echo and deletion on
    # resuming; expired ones do not, and the resend is answered for a message deleted since.
    # Either way the send ends once and the view, the cache and the server agree.
    extra = ("--event-retention", "3") if retention == "events expired" else ()
    server = RestartableServer(server_database(tmp_path), *extra)
    server.start()
    proxy = FaultyProxy(server.port)
    try:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        admin.send(url, "bob", "first")
        with connected(proxy.url, tmp_path / "cache", "alice", alice_token, resend_policy=resend_policy) as (client, recorder):
            with started_view(client, url) as (view, changes):
                proxy.go_offline()
                pending, future = client.send_user_message(url, "answer lost")
                assert outcome(future) == "NetworkError"
                stored = admin.send(url, "alice", "answer lost", req_id=pending["req_id"])
                admin.call("DELETE", f"/v3/group_channels/{url}/messages/{stored['message_id']}")
                admin.send(url, "bob", "after")
                for index in range(4):
                    admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {index}"})
                proxy.come_back()
                if resend_policy == "manual":
                    wait_until(lambda: client.cached_channel(url) is not None
                               and client.cached_channel(url).get("data") == "churn 3", "the catch-up")
                    resent = outcome(client.resend_message(pending["req_id"])) \
                        if client.cached_messages(url) and client.cached_messages(url)[-1].get("sending_status") == "failed" \
                        else "confirmed by its echo"
                    assert resent in ("NotFound", "confirmed by its echo"), resent
                wait_until(lambda: [m["message"] for m in view.messages] == ["first", "after"],
                           f"the view to equal the server (shows {[(m['message'], m.get('sending_status')) for m in view.messages]})")
                assert [m["message"] for m in server_messages(admin, url)] == ["first", "after"]
                wait_until(lambda: [m["message"] for m in client.cached_messages(url)] == ["first", "after"], "the cache")
                # The view's list changes just before its listener is told: wait for the listener.
                wait_until(lambda: pending["req_id"] not in replayed(changes.snapshot()), "the listener told of the removal")
                if retention == "events expired":
                    gone = [p for p in recorder.of("message_failed") if p.get("error_code") == Status.NOT_FOUND]
                    assert [p["req_id"] for p in gone] == [pending["req_id"]]
    finally:
        proxy.close()
        server.stop()


def test_a_confirmed_message_deleted_at_once_leaves_the_view(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    admin.send(url, "bob", "first")
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        with started_view(client, url) as (view, changes):
            for index in range(5):
                pending, future = client.send_user_message(url, f"mine {index}")
                sent = future.result(TIMEOUT)
                client.delete_message(channel_url=url, message_id=sent["message_id"]).result(TIMEOUT)
            admin.send(url, "bob", "after")
            wait_until(lambda: [m["message"] for m in view.messages] == ["first", "after"],
                       f"the view to equal the server (shows {[m['message'] for m in view.messages]})")
            assert [m["message"] for m in client.cached_messages(url)] == ["first", "after"]
            assert [r for r in replayed(changes.snapshot()) if r] == [
                m["req_id"] for m in server_messages(admin, url) if m["req_id"]]
