"""The client engine against the real server: connection, events, cache, outbox, files,
changelog catch-up, restarts, token expiry and crash durability."""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

import pytest

import parley
from conftest import ROOT, Admin, RunningServer, server_binary, server_database
from tcp_relay import AnswerHoldingProxy, RequestRefusingProxy, shut_down

TIMEOUT = 20.0


def poll_until(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """For conditions no callback announces (log lines, files): checks every 20 ms."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for a condition")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RestartableServer:
    """parley-server on a fixed port, so that it can be stopped and started again."""

    def __init__(self, database: Union[str, Path], *extra: str) -> None:
        self.database = database
        self.extra = list(extra)
        self.port = free_port()
        self.api_token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        for _ in range(50):
            self.process = subprocess.Popen(
                [str(server_binary()), "--port", str(self.port), "--database", str(self.database),
                 "--api-token", self.api_token, "--heartbeat-seconds", "2", *self.extra],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert self.process.stdout is not None
            if self.process.stdout.readline().startswith("parley-server listening on "):
                return
            self.process.wait()
            time.sleep(0.2)  # the port may still be held by the previous instance
        pytest.fail("parley-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def running(self) -> RunningServer:
        assert self.process is not None
        return RunningServer(self.url, self.api_token, self.process)


@contextlib.contextmanager
def short_retention(tmp_path: Path) -> Iterator[RestartableServer]:
    """A server that keeps only 3 events (a client away longer resyncs), stopped after the block."""
    server = RestartableServer(server_database(tmp_path), "--event-retention", "3")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def event_log_bounds(server: RestartableServer) -> Tuple[int, int]:
    """The oldest and the newest event id the server's log keeps (its `/metrics`)."""
    found = {}
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            name, _, value = line.partition(" ")
            if name in ("parley_event_log_first_id", "parley_event_log_last_id"):
                found[name] = int(float(value))
    return found["parley_event_log_first_id"], found["parley_event_log_last_id"]


def wait_until_pruned_past(server: RestartableServer, event_id: int) -> None:
    """Waits until the log has lost the event after `event_id`, so that a client whose last
    event is at most `event_id` resumes with a resync. PostgreSQL's log is pruned only through
    what the server has delivered (server/Sources/ParleyServer/Writers/PostgresWriters.swift),
    which may trail the write that took it past the retention."""
    poll_until(lambda: event_log_bounds(server)[0] > event_id + 1)


@pytest.fixture
def restartable(tmp_path: Path):
    server = RestartableServer(server_database(tmp_path))
    server.start()
    yield server
    server.stop()


class Recorder:
    """Collects connection and engine events; waits for conditions."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.connection: List[Tuple[str, Optional[parley.ParleyError]]] = []
        self.events: List[Tuple[str, str, Any]] = []

    def on_connection(self, event: str, error: Optional[parley.ParleyError]) -> None:
        with self.lock:
            self.connection.append((event, error))
            self.lock.notify_all()

    def on_event(self, category: str, channel_url: str, payload: Any) -> None:
        with self.lock:
            self.events.append((category, channel_url, payload))
            self.lock.notify_all()

    def wait(self, condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; connection={[c for c, _ in self.connection]} "
                                         f"events={[(c, u) for c, u, _ in self.events]}")
                self.lock.wait(left)

    def names(self) -> List[str]:
        with self.lock:
            return [name for name, _ in self.connection]

    def of(self, category: str) -> List[Any]:
        with self.lock:
            return [payload for c, _, payload in self.events if c == category]


def make_client(url: str, cache_dir: Path, **options: Any) -> Tuple[parley.Client, Recorder]:
    settings = dict(server_url=url, cache_dir=str(cache_dir), reconnect_initial_delay_ms=100,
                    reconnect_max_delay_ms=500, request_timeout_ms=5000, connect_timeout_ms=2000)
    settings.update(options)
    client = parley.Client(**settings)
    recorder = Recorder()
    client.set_connection_handler(recorder.on_connection)
    client.set_event_handler(recorder.on_event)
    return client, recorder


@contextlib.contextmanager
def connected(url: str, cache_dir: Path, user_id: str, token: str, **options: Any) -> Iterator[Tuple[parley.Client, Recorder]]:
    """A client of :func:`make_client`, connected as `user_id` (:func:`connect`), closed after the block."""
    client, recorder = make_client(url, cache_dir, **options)
    with client:
        connect(client, recorder, user_id, token)
        yield client, recorder


def connect(client: parley.Client, recorder: Recorder, user_id: str, token: str) -> Any:
    user = client.connect(user_id, token).result(TIMEOUT)
    recorder.wait(lambda: "connected" in recorder.names() or "reconnect_succeeded" in recorder.names())
    return user


def setup_pair(admin: Admin) -> Tuple[str, str, str]:
    alice = admin.user("alice")
    bob = admin.user("bob")
    channel = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "pair", "name": "Pair"})
    return alice, bob, channel["channel_url"]


def connect_then_lose_the_server(client: parley.Client, recorder: Recorder, restartable: RestartableServer,
                                 token: str) -> None:
    """Connects alice, stops the server and waits until the client noticed."""
    connect(client, recorder, "alice", token)
    restartable.stop()
    recorder.wait(lambda: "reconnect_started" in recorder.names())


def sends_failing_offline(client: parley.Client, url: str, texts: List[str]) -> List[Any]:
    """Sends `texts` with the server gone: each send fails for the connection and stays cached
    as failed. Returns the pending messages."""
    sends = [client.send_user_message(url, text) for text in texts]
    for _, result in sends:
        with pytest.raises((parley.NetworkError, parley.Timeout)):
            result.result(TIMEOUT)
    assert [m["sending_status"] for m in client.cached_messages(url)] == ["failed"] * len(texts)
    return [pending for pending, _ in sends]


def server_messages(admin: Admin, channel_url: str) -> List[Any]:
    return admin.call("GET", f"/v3/group_channels/{channel_url}/messages", message_ts=int(time.time() * 1000) + 60_000,
                      prev_limit=200, next_limit=0)["messages"]


def test_connect_catch_up_events_and_cache(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(restartable.url, tmp_path / "cache")
    with client:
        user = connect(client, recorder, "alice", alice_token)
        assert user["user_id"] == "alice"
        assert recorder.names()[:2] == ["connecting", "connected"]
        assert client.connection_state == "open"
        # The catch-up stored the channel created before connecting.
        recorder.wait(lambda: client.cached_channel(url) is not None)
        assert client.cached_channel(url)["name"] == "Pair"
        # A message from bob arrives as an event and lands in the cache.
        sent = admin.send(url, "bob", "hello alice")
        recorder.wait(lambda: any(p["message"]["message_id"] == sent["message_id"] for p in recorder.of("message_received")))
        cached = client.cached_messages(url)
        assert [m["message_id"] for m in cached] == [sent["message_id"]]
        # An edit updates the cached copy; a delete removes it.
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{sent['message_id']}", {"message": "edited"})
        recorder.wait(lambda: len(recorder.of("message_updated")) == 1)
        assert client.cached_messages(url)[0]["message"] == "edited"
        admin.call("DELETE", f"/v3/group_channels/{url}/messages/{sent['message_id']}")
        recorder.wait(lambda: len(recorder.of("message_deleted")) == 1)
        assert client.cached_messages(url) == []
        client.disconnect()
        recorder.wait(lambda: "disconnected" in recorder.names())
        assert client.connection_state == "closed"
        # The cache stays readable after disconnect.
        assert client.cached_channel(url) is not None


def test_a_client_that_reads_open_is_told_connected_before_disconnected(server: RunningServer, admin: Admin,
                                                                         tmp_path: Path) -> None:
    """"open" is read only once the session's "connected" is queued: a disconnect made the
    moment the state reads "open" still comes after it (the window between the two was hit
    about once in a fresh suite run, by a test that did just that)."""
    for attempt in range(30):
        # A user each: the server may count a closed stream against the user's limit of
        # streams until it next writes to it.
        user_id = f"opener-{attempt}"
        token = admin.user(user_id)
        client, recorder = make_client(server.url, tmp_path / f"cache-{attempt}")
        with client:
            client.connect(user_id, token).result(TIMEOUT)
            deadline = time.monotonic() + TIMEOUT
            while client.connection_state != "open":
                assert time.monotonic() < deadline, f"attempt {attempt}: never open: {recorder.names()}"
            client.disconnect()
            recorder.wait(lambda: "disconnected" in recorder.names())
            assert recorder.names() == ["connecting", "connected", "disconnected"], f"attempt {attempt}"


def test_send_user_message_pending_then_succeeded_once(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    with connected(restartable.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        pending, future = client.send_user_message(url, "hi bob", custom_type="greeting")
        assert pending["message_id"] == 0 and pending["sending_status"] == "pending"
        assert pending["req_id"] and pending["message"] == "hi bob" and pending["user"]["user_id"] == "alice"
        message = future.result(TIMEOUT)
        assert message["message_id"] > 0 and message["req_id"] == pending["req_id"]
        assert message["sending_status"] == "succeeded" and message["custom_type"] == "greeting"
        recorder.wait(lambda: len(recorder.of("message_sent")) == 1)
        assert [p["req_id"] for p in recorder.of("message_pending")] == [pending["req_id"]]
        # Exactly one copy, in the cache and on the server, even after our own event echo
        # (applied, not reported as received; bob's later message proves it was processed).
        from_bob = admin.send(url, "bob", "later")
        recorder.wait(lambda: len(recorder.of("message_received")) == 1)
        assert recorder.of("message_received")[0]["message"]["message_id"] == from_bob["message_id"]
        cached = client.cached_messages(url)
        assert [m["req_id"] for m in cached] == [pending["req_id"], from_bob["req_id"]]
        assert [m["req_id"] for m in server_messages(admin, url)] == [pending["req_id"], from_bob["req_id"]]


def test_send_validation_errors_are_synchronous(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(server.url, tmp_path / "cache")
    with client:
        with pytest.raises(parley.InvalidState):
            client.send_user_message(url, "not connected yet")
        connect(client, recorder, "alice", alice_token)
        with pytest.raises(parley.InvalidArgument, match="message"):
            client.send_user_message(url, "")
        with pytest.raises(parley.InvalidArgument, match="unknown|colour"):
            client.send_user_message(url, "x", colour="red")
        with pytest.raises(parley.InvalidArgument):
            client.send_file_message(url)  # neither url nor file_path
        with pytest.raises(parley.IOFailure):
            client.send_file_message(url, file_path=str(tmp_path / "missing.bin"))
        with pytest.raises(parley.NotFound):
            client.resend_message("no-such-req")
        with pytest.raises(parley.NotFound):
            client.cancel_message("no-such-req")
        with pytest.raises(parley.InvalidArgument):
            client.cached_channels(order="sideways")
        assert client.cached_messages(url) == []


def test_refused_send_fails_with_server_code_and_is_not_resent(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, _ = setup_pair(admin)
    admin.user("carol")
    admin.call("POST", "/v3/group_channels", {"user_ids": ["bob", "carol"], "channel_url": "private"})
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        pending, future = client.send_user_message("private", "let me in")
        with pytest.raises(parley.ParleyError) as raised:
            future.result(TIMEOUT)
        assert isinstance(raised.value, (parley.Forbidden, parley.NotFound))
        assert raised.value.http_status in (403, 404) and raised.value.server_code != 0
        recorder.wait(lambda: len(recorder.of("message_failed")) == 1)
        failed = recorder.of("message_failed")[0]
        assert failed["req_id"] == pending["req_id"] and failed["sending_status"] == "failed"
        assert failed["error_code"] == raised.value.code
        assert [m["sending_status"] for m in client.cached_messages("private")] == ["failed"]
        # A manual resend is refused the same way; removing it clears the list.
        with pytest.raises(parley.ParleyError):
            client.resend_message(pending["req_id"]).result(TIMEOUT)
        assert client.remove_failed_messages("private") == [pending["req_id"]]
        assert client.cached_messages("private") == []


def test_server_down_cache_answers_and_outbox_delivers_after_restart(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    first = admin.send(url, "bob", "before the outage")
    with connected(restartable.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        client.list_messages(channel_url=url).result(TIMEOUT)
        restartable.stop()
        recorder.wait(lambda: "reconnect_started" in recorder.names())
        # Offline: the cache answers.
        assert client.cached_channel(url)["channel_url"] == url
        assert [m["message_id"] for m in client.cached_messages(url)] == [first["message_id"]]
        # Offline send: pending, then failed for a connection reason.
        pending, future = client.send_user_message(url, "sent while offline")
        with pytest.raises((parley.NetworkError, parley.Timeout)):
            future.result(TIMEOUT)
        assert client.cached_messages(url)[-1]["sending_status"] == "failed"
        restartable.start()
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
        recorder.wait(lambda: any(p["req_id"] == pending["req_id"] for p in recorder.of("message_sent")))
        copies = [m for m in server_messages(admin, url) if m["req_id"] == pending["req_id"]]
        assert len(copies) == 1
        assert [m["sending_status"] if "sending_status" in m else "ok" for m in client.cached_messages(url)] == ["ok", "ok"]


def test_resume_after_disconnect_replays_missed_events_once(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    with connected(restartable.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        admin.send(url, "bob", "one")
        recorder.wait(lambda: len(recorder.of("message_received")) == 1)
        client.disconnect()
        missed = [admin.send(url, "bob", f"missed {i}")["message_id"] for i in range(5)]
        restartable.stop()
        restartable.start()
        connect(client, recorder, "alice", alice_token)
        recorder.wait(lambda: len(recorder.of("message_received")) == 6)
        time.sleep(0.5)
        received = [p["message"]["message_id"] for p in recorder.of("message_received")]
        assert received[1:] == missed
        assert len(received) == len(set(received)) == 6


@pytest.mark.parametrize("away", ["disconnect", "exit"])
def test_a_client_that_saw_no_event_still_resumes(server: RunningServer, admin: Admin, tmp_path: Path, away: str) -> None:
    """The stream's position is stored as soon as it opens: a client that received no event
    before going away (disconnect, or process exit with the cache kept) resumes from it, so
    what was sent meanwhile is replayed and cached."""
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(server.url, tmp_path / "cache")
    connect(client, recorder, "alice", alice_token)
    if away == "disconnect":
        client.disconnect()
    else:
        client.close()
    missed = [admin.send(url, "bob", f"missed {i}")["message_id"] for i in range(20)]
    if away == "exit":
        client, recorder = make_client(server.url, tmp_path / "cache")
    with client:
        connect(client, recorder, "alice", alice_token)
        recorder.wait(lambda: len(recorder.of("message_received")) == 20)
        received = [p["message"]["message_id"] for p in recorder.of("message_received")]
        assert received == missed
        cached = [m["message_id"] for m in client.cached_messages(url, -1, 100)]
        assert cached == missed


def test_reconnect_after_restart_delivers_new_events(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(restartable.url, tmp_path / "cache", reconnect_initial_delay_ms=1500,
                                   reconnect_max_delay_ms=2000)
    with client:
        connect(client, recorder, "alice", alice_token)
        restartable.stop()
        recorder.wait(lambda: "reconnect_failed" in recorder.names())
        restartable.start()
        # Sent while the client is still waiting out its backoff: the resume must replay them.
        early = [admin.send(url, "bob", f"early {i}")["message_id"] for i in range(3)]
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
        late = admin.send(url, "bob", "after reconnect")["message_id"]
        recorder.wait(lambda: any(p["message"]["message_id"] == late for p in recorder.of("message_received")))
        received = [p["message"]["message_id"] for p in recorder.of("message_received")]
        assert received == early + [late]
        # reconnect() on demand skips the wait.
        restartable.stop()
        recorder.wait(lambda: recorder.names().count("reconnect_started") == 2)
        restartable.start()
        client.reconnect()
        recorder.wait(lambda: recorder.names().count("reconnect_succeeded") == 2, timeout=5)


def test_reconnect_while_open_replaces_the_connection_and_misses_nothing(server: RunningServer, admin: Admin,
                                                                         tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        assert client.connection_state == "open"
        sent: List[int] = []
        for round_number in range(3):
            # Messages sent around the switch, some while the old stream is being dropped
            # and before the new one is open: the resume id must bring each exactly once.
            sent.append(admin.send(url, "bob", f"before {round_number}")["message_id"])
            client.reconnect()
            sent.append(admin.send(url, "bob", f"during {round_number}")["message_id"])
            recorder.wait(lambda: recorder.names().count("reconnect_succeeded") == round_number + 1)
            assert client.connection_state == "open"
        sent.append(admin.send(url, "bob", "after")["message_id"])
        recorder.wait(lambda: any(p["message"]["message_id"] == sent[-1] for p in recorder.of("message_received")))
        received = [p["message"]["message_id"] for p in recorder.of("message_received")]
        assert received == sent
        names = recorder.names()
        assert names.count("reconnect_started") == 3 and "disconnected" not in names
        assert [m["message_id"] for m in client.cached_messages(url)][-len(sent):] == sent


def test_own_sends_are_reported_as_sent_not_as_received(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        pending, result = client.send_user_message(url, "mine")
        sent = result.result(TIMEOUT)
        # A message from alice's other device (no req_id of ours) and one from bob are received.
        other_device = admin.send(url, "alice", "from my phone")
        from_bob = admin.send(url, "bob", "from bob")
        recorder.wait(lambda: any(p["message"]["message_id"] == from_bob["message_id"] for p in recorder.of("message_received")))
        received = [p["message"]["message_id"] for p in recorder.of("message_received")]
        assert received == [other_device["message_id"], from_bob["message_id"]]
        assert [p["req_id"] for p in recorder.of("message_sent")] == [pending["req_id"]]
        assert [m["message_id"] for m in client.cached_messages(url)] == [sent["message_id"], other_device["message_id"],
                                                                           from_bob["message_id"]]


def test_a_send_whose_echo_comes_before_its_answer_completes_with_the_echo(server: RunningServer, admin: Admin,
                                                                            tmp_path: Path) -> None:
    # The answer to the POST is held in a proxy after the server sent it: the server stored
    # the message, and its echo on the stream brings the server's copy first. The send
    # completes then, once; the answer, when it comes or when its connection breaks, changes
    # nothing, and the next send goes out as usual.
    alice_token, _, url = setup_pair(admin)
    proxy = AnswerHoldingProxy(server.url, f"POST /v3/group_channels/{url}/messages".encode())
    try:
        with connected(proxy.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            for breaks in (False, True):
                proxy.answered.clear()
                proxy.released.clear()
                proxy.forwarded.clear()
                proxy.arm()
                pending, result = client.send_user_message(url, f"echo first, answer {'lost' if breaks else 'late'}")
                assert proxy.answered.wait(10), "the server did not answer the send"
                # While the answer is still held, and before the client's request timeout (5 s)
                # could end the request and complete the send that way.
                sent = result.result(3.0)
                assert not proxy.forwarded.is_set()
                assert sent["req_id"] == pending["req_id"] and sent["message_id"] > 0
                assert sent["sending_status"] == "succeeded"
                recorder.wait(lambda: pending["req_id"] in [p["req_id"] for p in recorder.of("message_sent")])
                if breaks:
                    shut_down(*proxy.sockets)  # the answer's connection and the stream's
                proxy.release()
                if not breaks:
                    assert proxy.forwarded.wait(10)
                after, result = client.send_user_message(url, "the next one")
                assert result.result(TIMEOUT)["req_id"] == after["req_id"]
            on_server = server_messages(admin, url)
            assert [m["req_id"] for m in recorder.of("message_sent")] == [m["req_id"] for m in on_server]
            assert recorder.of("message_failed") == [] and recorder.of("message_received") == []
            cached = client.cached_messages(url)
            assert [(m["message_id"], m["req_id"], m.get("sending_status", "succeeded")) for m in cached] == [
                (m["message_id"], m["req_id"], "succeeded") for m in on_server]
    finally:
        proxy.close()


def test_a_waiting_message_the_server_already_has_is_confirmed_by_its_echo(restartable: RestartableServer,
                                                                            tmp_path: Path) -> None:
    # The server holds a message with the req_id of a failed local one (as when the answer to a
    # send was lost): its echo on the stream confirms the send instead of showing it twice.
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(restartable.url, tmp_path / "cache", auto_resend=False)
    with client:
        connect_then_lose_the_server(client, recorder, restartable, alice_token)
        pending, = sends_failing_offline(client, url, ["answer lost"])
        restartable.start()
        accepted = admin.send(url, "alice", "answer lost", req_id=pending["req_id"])
        recorder.wait(lambda: len(recorder.of("message_sent")) == 1)
        sent = recorder.of("message_sent")[0]
        assert sent["req_id"] == pending["req_id"] and sent["message_id"] == accepted["message_id"]
        assert sent["sending_status"] == "succeeded"
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
        assert recorder.of("message_received") == []
        cached = client.cached_messages(url)
        assert [(m["message_id"], m.get("sending_status", "succeeded")) for m in cached] == [(accepted["message_id"], "succeeded")]
        with pytest.raises(parley.NotFound):
            client.resend_message(pending["req_id"])
    assert [m["req_id"] for m in server_messages(admin, url)] == [pending["req_id"]]


def test_expired_token_asks_for_a_new_one(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    setup_pair(admin)
    short = admin.token("alice", expires_at=int(time.time() * 1000) + 3000)
    with connected(restartable.url, tmp_path / "cache", "alice", short) as (client, recorder):
        time.sleep(3.5)
        restartable.stop()
        restartable.start()
        recorder.wait(lambda: "session_token_required" in recorder.names())
        assert client.connection_state == "reconnecting"
        client.set_session_token(admin.token("alice"))
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
        assert client.connection_state == "open"
        # REST calls use the new token too.
        assert client.get_current_user().result(TIMEOUT)["user_id"] == "alice"


def test_file_upload_with_progress_and_cancel(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    import requests

    alice_token, _, url = setup_pair(admin)
    payload = os.urandom(600_000)
    path = tmp_path / "photo.bin"
    path.write_bytes(payload)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        reports: List[Tuple[str, int, int]] = []
        pending, future = client.send_file_message(url, progress=lambda r, s, t: reports.append((r, s, t)),
                                                   file_path=str(path), file_type="application/octet-stream")
        assert pending["type"] == "FILE" and pending["file"]["size"] == len(payload)
        message = future.result(TIMEOUT)
        assert message["file"]["size"] == len(payload)
        assert reports, "no progress reported"
        assert all(r == pending["req_id"] for r, _, _ in reports)
        sent = [s for _, s, _ in reports]
        assert sent == sorted(sent) and reports[-1][1] == reports[-1][2]
        body = requests.get(message["file"]["url"], headers={"Api-Token": server.api_token}, timeout=10).content
        assert body == payload
        # Cancel an upload in flight: canceled, never on the server.
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(20_000_000))
        started = threading.Event()
        pending, future = client.send_file_message(url, progress=lambda *_: started.set(), file_path=str(big))
        started.wait(TIMEOUT)
        try:
            client.cancel_message(pending["req_id"])
        except parley.ParleyError:
            pass  # it finished first on a fast machine: then it must be on the server
        try:
            future.result(TIMEOUT)
            canceled = False
        except parley.Cancelled:
            canceled = True
        on_server = [m for m in server_messages(admin, url) if m["req_id"] == pending["req_id"]]
        assert len(on_server) == (0 if canceled else 1)
        if canceled:
            recorder.wait(lambda: len(recorder.of("message_canceled")) == 1)
            assert all(m["req_id"] != pending["req_id"] for m in client.cached_messages(url))


def test_clear_cached_data_and_memory_mode(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token, cache_mode="memory") as (client, recorder):
        recorder.wait(lambda: client.cached_channel(url) is not None)
        assert not (tmp_path / "cache").exists()
        client.clear_cached_data()
        assert client.cached_channels() == []


def test_corrupt_cache_file_is_replaced(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(server.url, tmp_path / "cache")
    logs: List[str] = []
    client.set_log_handler(lambda level, message: logs.append(message), parley.LOG_WARNING)
    with client:
        connect(client, recorder, "alice", alice_token)
        recorder.wait(lambda: client.cached_channel(url) is not None)
    files = list((tmp_path / "cache").rglob("alice.sqlite"))
    assert len(files) == 1 and (files[0].stat().st_mode & 0o777) == 0o600
    files[0].write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(files[0]) + suffix).unlink(missing_ok=True)
    client, recorder = make_client(server.url, tmp_path / "cache")
    client.set_log_handler(lambda level, message: logs.append(message), parley.LOG_WARNING)
    with client:
        connect(client, recorder, "alice", alice_token)
        recorder.wait(lambda: client.cached_channel(url) is not None)
    assert any("corrupt" in line for line in logs), logs


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    import parley
    url, cache, token, mode = sys.argv[2:6]
    client = parley.Client(server_url=url, cache_dir=cache, reconnect_initial_delay_ms=100,
                           reconnect_max_delay_ms=300, request_timeout_ms=3000)
    sent = []
    # Before connecting: the restart's resend (or the echo confirming it) may come at once.
    client.set_event_handler(lambda c, u, p: sent.append(p) if c == "message_sent" else None)
    client.connect("alice", token).result(20)
    if mode == "send":
        pending, _ = client.send_user_message("pair", "survives kill -9")
        print(json.dumps(pending), flush=True)
        time.sleep(60)
    else:
        deadline = time.time() + float(sys.argv[6])
        while not sent and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a second report would come now
        print(json.dumps(sent), flush=True)
        client.close()
""")


@pytest.mark.parametrize("server_up_at_kill", [True, False])
def test_kill_9_after_pending_delivers_exactly_once(restartable: RestartableServer, tmp_path: Path, server_up_at_kill: bool) -> None:
    import json

    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    cache = tmp_path / "cache"
    binding = str(ROOT / "bindings" / "python")
    env = dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", CHILD, binding, restartable.url, str(cache), alice_token, "connect", "0"],
                             stdout=subprocess.PIPE, text=True, env=env)
    child.communicate(timeout=60)  # a first session fills the cache (user, resume point)
    if not server_up_at_kill:
        restartable.stop()
        # Offline connect works from the cache; the send stays pending or fails.
    child = subprocess.Popen([sys.executable, "-c", CHILD, binding, restartable.url, str(cache), alice_token, "send", "0"],
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    pending = json.loads(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert pending["sending_status"] == "pending"
    if not server_up_at_kill:
        restartable.start()
        assert all(m["req_id"] != pending["req_id"] for m in server_messages(admin, url))
    # Still waiting in the cache, unless the killed process saw it confirmed just before dying.
    import sqlite3
    with sqlite3.connect(next(cache.rglob("alice.sqlite"))) as db:
        waiting = db.execute("SELECT count(*) FROM local_messages WHERE req_id = ?", (pending["req_id"],)).fetchone()[0]
    child = subprocess.Popen([sys.executable, "-c", CHILD, binding, restartable.url, str(cache), alice_token, "resend",
                              "20" if waiting else "2"], stdout=subprocess.PIPE, text=True, env=env)
    out, _ = child.communicate(timeout=60)
    # Whichever way the restart learns of a waiting message (the resend's answer, or the echo
    # of the copy the killed process delivered), the app is told exactly once.
    reported = json.loads(out.strip().splitlines()[-1])
    assert [(p["req_id"], p["sending_status"]) for p in reported] == ([(pending["req_id"], "succeeded")] if waiting else [])
    deadline = time.time() + TIMEOUT
    copies: List[Any] = []
    while time.time() < deadline:
        copies = [m for m in server_messages(admin, url) if m["req_id"] == pending["req_id"]]
        if copies:
            break
        time.sleep(0.1)
    time.sleep(1.0)
    copies = [m for m in server_messages(admin, url) if m["req_id"] == pending["req_id"]]
    assert len(copies) == 1, copies
    assert copies[0]["message"] == "survives kill -9"


def test_catch_up_by_changelogs_after_retention_is_exceeded(tmp_path: Path) -> None:
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        keep = admin.send(url, "bob", "will be edited")
        gone = admin.send(url, "bob", "will be deleted")
        with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            client.list_messages(channel_url=url).result(TIMEOUT)
            assert len(client.cached_messages(url)) == 2
            client.disconnect()
            # More changes than the server keeps events for: resuming is impossible.
            admin.call("PUT", f"/v3/group_channels/{url}/messages/{keep['message_id']}", {"message": "edited while away"})
            admin.call("DELETE", f"/v3/group_channels/{url}/messages/{gone['message_id']}")
            admin.call("PUT", f"/v3/group_channels/{url}", {"name": "Renamed while away"})
            for i in range(5):
                admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {i}"})
            connect(client, recorder, "alice", alice_token)
            recorder.wait(lambda: any(p["message_id"] == keep["message_id"] for p in recorder.of("message_changelog")))
            recorder.wait(lambda: client.cached_channel(url)["name"] == "Renamed while away")
            cached = client.cached_messages(url)
            assert [(m["message_id"], m["message"]) for m in cached] == [(keep["message_id"], "edited while away")]


@pytest.mark.plain_cache_file
def test_after_a_resync_the_cache_claims_no_continuity_over_the_hole(tmp_path: Path) -> None:
    """Events lost beyond the server's retention: the range that reached the newest end
    before must not be extended over the messages that were never received."""
    import sqlite3
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        before = admin.send(url, "bob", "before")
        with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            client.list_messages(channel_url=url).result(TIMEOUT)
        # The range a message view records after loading the newest page (scope "" = no filter).
        with sqlite3.connect(next((tmp_path / "cache").rglob("alice.sqlite"))) as db:
            db.execute("INSERT INTO chunks (channel_url, scope, start_created_at, start_message_id, end_created_at, "
                       "end_message_id, reaches_oldest, reaches_newest) VALUES (?, '', ?, ?, ?, ?, 1, 1)",
                       (url, before["created_at"], before["message_id"], before["created_at"], before["message_id"]))
        away_from = event_log_bounds(server)[1]
        missed = [admin.send(url, "bob", f"missed {i}") for i in range(10)]
        wait_until_pruned_past(server, away_from)
        client, recorder = make_client(server.url, tmp_path / "cache")
        with client:
            connect(client, recorder, "alice", alice_token)  # resync: the missed events are gone
            recorder.wait(lambda: "reconnect_succeeded" in recorder.names() or "connected" in recorder.names())
            time.sleep(0.3)
            live = admin.send(url, "bob", "live")
            recorder.wait(lambda: any(p["message"]["message_id"] == live["message_id"] for p in recorder.of("message_received")))
        cache_file = next((tmp_path / "cache").rglob("alice.sqlite"))
        with sqlite3.connect(cache_file) as db:
            chunks = db.execute("SELECT start_created_at, start_message_id, end_created_at, end_message_id FROM chunks "
                                "WHERE channel_url = ?", (url,)).fetchall()
        assert chunks, "the recorded range is kept"
        for start_ts, start_id, end_ts, end_id in chunks:
            covers_before = (start_ts, start_id) <= (before["created_at"], before["message_id"]) <= (end_ts, end_id)
            covers_live = (start_ts, start_id) <= (live["created_at"], live["message_id"]) <= (end_ts, end_id)
            assert not (covers_before and covers_live), f"a range spans the hole of {len(missed)} messages: {chunks}"


def test_a_resync_is_reported_and_cached_pages_mark_the_hole(tmp_path: Path) -> None:
    """An application on the event handler and cached reads (no collection) learns of
    events lost beyond the server's retention: a `resync` event names the channels that
    changed meanwhile, and a cached page spanning the hole is not called continuous."""
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "quiet"})
        admin.send("quiet", "bob", "nothing happens here")
        for index in range(3):
            admin.send(url, "bob", f"before {index}")
        # A changelog lists a change once every lower event number is resolved, which on
        # PostgreSQL follows the commit by a round trip: "quiet" must be listed by the first
        # catch-up, or its token would not pass it and the resync would rightly name it.
        poll_until(lambda: "quiet" in [c["channel_url"] for c in admin.call(
            "GET", "/v3/users/alice/my_group_channels/changelogs?change_ts=0")["updated"]])
        with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            # The first catch-up stores the channel token the resync's changelogs start from.
            poll_until(lambda: client.metrics()["catch_up_passes_total"] >= 1)
            client.list_messages(channel_url=url, include_reply_type="ALL", prev_limit=50).result(TIMEOUT)
            client.list_messages(channel_url="quiet", include_reply_type="ALL", prev_limit=50).result(TIMEOUT)
            page = client.cached_message_page(url)
            assert [m["message"] for m in page["messages"]] == ["before 0", "before 1", "before 2"]
            assert page["continuous"] is True
            # The stream extends the range it vouches for while it stays up.
            seen = admin.send(url, "bob", "seen live")
            recorder.wait(lambda: any(p["message"]["message_id"] == seen["message_id"] for p in recorder.of("message_received")))
            assert client.cached_message_page(url)["continuous"] is True
            client.disconnect()
            away_from = event_log_bounds(server)[1]
            missed = [admin.send(url, "bob", f"missed {index}") for index in range(6)]
            wait_until_pruned_past(server, away_from)
            connect(client, recorder, "alice", alice_token)  # past the retention: the stream says resync
            recorder.wait(lambda: recorder.of("resync"))
            resync = recorder.of("resync")
            assert len(resync) == 1 and resync[0]["channel_urls"] == [url], resync
            live = admin.send(url, "bob", "live")
            recorder.wait(lambda: any(p["message"]["message_id"] == live["message_id"] for p in recorder.of("message_received")))
            page = client.cached_message_page(url)
            assert [m["message_id"] for m in page["messages"]][-2:] == [seen["message_id"], live["message_id"]]
            assert page["continuous"] is False, "the page spans the missed messages"
            assert client.cached_messages(url) == page["messages"]
            # A channel untouched meanwhile keeps its range; an older page still joins the next.
            assert client.cached_message_page("quiet")["continuous"] is True
            older = client.cached_message_page(url, before_ts=seen["created_at"], limit=2)
            assert [m["message"] for m in older["messages"]] == ["before 1", "before 2"] and older["continuous"] is True
            # Loading the newest page from the server closes the hole.
            client.list_messages(channel_url=url, include_reply_type="ALL", prev_limit=50).result(TIMEOUT)
            page = client.cached_message_page(url, limit=100)
            assert [m["message_id"] for m in page["messages"]] == [m["message_id"] for m in server_messages(admin, url)]
            assert len(missed) == 6 and page["continuous"] is True


@pytest.mark.plain_cache_file
def test_message_changelogs_catch_up_every_cached_channel(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    # More channels than the engine fetches changelogs for at once (4): every one is caught up.
    alice_token, _, _ = setup_pair(admin)
    urls = [f"room-{index}" for index in range(9)]
    kept, gone = {}, {}
    for url in urls:
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": url})
        kept[url] = admin.send(url, "bob", f"keep {url}")["message_id"]
        gone[url] = admin.send(url, "bob", f"delete {url}")["message_id"]
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        for url in urls:
            client.list_messages(channel_url=url).result(TIMEOUT)
            assert len(client.cached_messages(url)) == 2
    for url in urls:
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{kept[url]}", {"message": f"edited {url}"})
        admin.call("DELETE", f"/v3/group_channels/{url}/messages/{gone[url]}")
    # Without a resume point nothing is replayed: only the changelogs can find the changes.
    import sqlite3
    with sqlite3.connect(next((tmp_path / "cache").rglob("alice.sqlite"))) as db:
        db.execute("DELETE FROM meta WHERE key = 'last_event_id'")
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        recorder.wait(lambda: len(recorder.of("message_changelog")) == len(urls))
        assert sorted(p["message_id"] for p in recorder.of("message_changelog")) == sorted(kept.values())
        for url in urls:
            poll_until(lambda: [m["message_id"] for m in client.cached_messages(url)] == [kept[url]])
            assert client.cached_messages(url)[0]["message"] == f"edited {url}"


@pytest.mark.plain_cache_file
def test_refused_changelog_token_resets_instead_of_failing(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    import sqlite3

    alice_token, _, url = setup_pair(admin)
    admin.send(url, "bob", "hello")
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        client.list_messages(channel_url=url).result(TIMEOUT)
        recorder.wait(lambda: client.cached_channel(url) is not None)
        # A catch-up now that messages are cached gives the channel its own message token
        # beside the global channel token.
        client.reconnect()
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
    cache_file = next((tmp_path / "cache").rglob("alice.sqlite"))

    def saved_tokens() -> List[str]:
        with sqlite3.connect(cache_file) as db:
            return sorted(row[0] for row in db.execute("SELECT scope FROM sync_tokens"))

    assert saved_tokens() == ["channels", f"messages:{url}"]
    with sqlite3.connect(cache_file) as db:
        db.execute("UPDATE sync_tokens SET token = 'garbage-token'")
    admin.call("PUT", f"/v3/group_channels/{url}", {"name": "After the reset"})
    logs: List[str] = []
    client, recorder = make_client(server.url, tmp_path / "cache")
    client.set_log_handler(lambda level, message: logs.append(message), parley.LOG_INFO)
    with client:
        connect(client, recorder, "alice", alice_token)
        recorder.wait(lambda: client.cached_channel(url)["name"] == "After the reset")
        # Both refusals are logged; the catch-up runs the channel token first, then the
        # channel's message token, and saves a fresh token after each restart.
        poll_until(lambda: sum("refused" in line for line in logs) >= 2)
        poll_until(lambda: saved_tokens() == ["channels", f"messages:{url}"])
    with sqlite3.connect(cache_file) as db:
        tokens = [row[0] for row in db.execute("SELECT token FROM sync_tokens")]
    assert len(tokens) == 2 and "garbage-token" not in tokens
    assert not any("changelogs failed" in line for line in logs), logs


def test_a_catch_up_refused_by_the_server_runs_again_while_the_stream_stays_up(server: RunningServer, admin: Admin,
                                                                             tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    admin.send(url, "bob", "hello")
    # The first two reads of a changelog get a 503; the event stream is not touched.
    proxy = RequestRefusingProxy(server.url, b"/changelogs", refusals=2)
    logs: List[str] = []
    client, recorder = make_client(proxy.url, tmp_path / "cache")
    client.set_log_handler(lambda level, message: logs.append(message), parley.LOG_INFO)
    try:
        with client:
            connect(client, recorder, "alice", alice_token)
            recorder.wait(lambda: client.cached_channel(url) is not None)
            assert proxy.refused == 2
            # Logs reach the handler on the callback thread, unordered with a cache read.
            poll_until(lambda: sum("another in" in line for line in logs) == 2, timeout=10)
            assert recorder.names().count("connected") == 1 and "reconnect_started" not in recorder.names()
            cached = client.cached_channel(url)
            listed = admin.call("GET", "/v3/users/alice/my_group_channels", show_member="true")["channels"]
            truth = next(c for c in listed if c["channel_url"] == url)
            for field in ("name", "member_count", "unread_message_count"):
                assert cached[field] == truth[field], field
            assert cached["last_message"]["message_id"] == truth["last_message"]["message_id"]
            # A complete pass schedules nothing more.
            time.sleep(1.5)
            assert sum("another in" in line for line in logs) == 2, logs
    finally:
        proxy.close()


def member_states(channel: Any) -> List[Tuple[str, str]]:
    return [(m["user_id"], m["state"]) for m in channel.get("members") or []]


def test_a_resumed_stream_brings_member_lists_and_the_changelogs_leave_them_out(server: RunningServer, admin: Admin,
                                                                                tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    admin.user("carol")
    proxy = RequestRefusingProxy(server.url, b"no request has this", refusals=0)
    client, recorder = make_client(proxy.url, tmp_path / "cache")
    try:
        with client:
            connect(client, recorder, "alice", alice_token)
            recorder.wait(lambda: client.cached_channel(url) is not None)
            client.disconnect()
            # While away: a member list change and a message. The stream resumes with their events.
            admin.call("POST", f"/v3/group_channels/{url}/invite", {"user_ids": ["carol"]})
            admin.send(url, "bob", "while away")
            client.connect("alice", alice_token).result(TIMEOUT)
            truth = admin.call("GET", f"/v3/group_channels/{url}", show_member="true")
            assert ("carol", "joined") in member_states(truth)
            poll_until(lambda: member_states(client.cached_channel(url)) == member_states(truth))
            poll_until(lambda: (client.cached_channel(url).get("last_message") or {}).get("message") == "while away")
            def changelogs() -> List[bytes]:
                return [line for line in proxy.requests if b"/my_group_channels/changelogs" in line]
            # The replay may fill the cache before the resumed catch-up asks for its changelog.
            poll_until(lambda: len(changelogs()) >= 2)
            # The first sync reads every list; the resumed one leaves them to the replay.
            assert b"show_member=true" in changelogs()[0], changelogs()
            assert b"show_member=false" in changelogs()[-1], changelogs()
    finally:
        proxy.close()


def test_after_a_resync_member_lists_left_out_by_the_changelogs_are_read_again(tmp_path: Path) -> None:
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        admin.user("carol")
        with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            recorder.wait(lambda: client.cached_channel(url) is not None)
            client.disconnect()
            away_from = event_log_bounds(server)[1]
            # More events than the server keeps: the resumed stream gets a resync, which may come
            # after the catch-up's changelog (read without members) was applied.
            admin.call("POST", f"/v3/group_channels/{url}/invite", {"user_ids": ["carol"]})
            for i in range(5):
                admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {i}"})
            wait_until_pruned_past(server, away_from)
            client.connect("alice", alice_token).result(TIMEOUT)
            recorder.wait(lambda: len(recorder.of("resync")) == 1)
            truth = admin.call("GET", f"/v3/group_channels/{url}", show_member="true")
            assert ("carol", "joined") in member_states(truth)
            poll_until(lambda: member_states(client.cached_channel(url)) == member_states(truth))
            assert client.cached_channel(url)["data"] == "churn 4"


def test_reaction_and_thread_events_patch_the_cached_message(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    parent = admin.send(url, "bob", "parent")
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        client.list_messages(channel_url=url).result(TIMEOUT)
        client.add_reaction(channel_url=url, message_id=parent["message_id"], reaction="thumbsup").result(TIMEOUT)
        recorder.wait(lambda: len(recorder.of("reaction_updated")) == 1)
        cached = client.cached_messages(url)[0]
        assert [(r["key"], r["user_ids"]) for r in cached["reactions"]] == [("thumbsup", ["alice"])]
        client.remove_reaction(channel_url=url, message_id=parent["message_id"], reaction="thumbsup").result(TIMEOUT)
        recorder.wait(lambda: len(recorder.of("reaction_updated")) == 2)
        assert client.cached_messages(url)[0].get("reactions", []) == []
        admin.send(url, "bob", "a reply", parent_message_id=parent["message_id"])
        recorder.wait(lambda: len(recorder.of("thread_info_updated")) == 1)
        parent_cached = next(m for m in client.cached_messages(url) if m["message_id"] == parent["message_id"])
        assert parent_cached["thread_info"]["reply_count"] == 1


def test_deleting_a_reply_leaves_the_other_repliers_whole_in_the_thread_info(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    admin.user("carol")
    admin.call("POST", f"/v3/group_channels/{url}/invite", {"user_ids": ["carol"]})
    parent = admin.send(url, "bob", "parent")
    admin.send(url, "carol", "carol's reply", parent_message_id=parent["message_id"])
    # No longer a member, carol is loaded by no request about the channel, yet still a replier.
    admin.call("PUT", f"/v3/group_channels/{url}/leave", {"user_ids": ["carol"]})
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        client.list_messages(channel_url=url).result(TIMEOUT)
        mine = admin.send(url, "alice", "alice's reply", parent_message_id=parent["message_id"])
        recorder.wait(lambda: len(recorder.of("thread_info_updated")) == 1)
        client.delete_message(channel_url=url, message_id=mine["message_id"]).result(TIMEOUT)
        recorder.wait(lambda: len(recorder.of("thread_info_updated")) == 2)
        truth = admin.call("GET", f"/v3/group_channels/{url}/messages/{parent['message_id']}",
                           include_thread_info="true")["thread_info"]
        assert [u["nickname"] for u in truth["most_replies"]] == ["Carol"]
        cached = next(m for m in client.cached_messages(url) if m["message_id"] == parent["message_id"])
        assert cached["thread_info"] == truth


def test_channel_removed_from_cache_when_user_leaves(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        recorder.wait(lambda: client.cached_channel(url) is not None)
        client.leave_channel(channel_url=url).result(TIMEOUT)
        assert client.cached_channel(url) is None
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "second"})
        recorder.wait(lambda: client.cached_channel("second") is not None)
        admin.call("DELETE", "/v3/group_channels/second")
        recorder.wait(lambda: client.cached_channel("second") is None)


def test_async_client_sends_and_receives_on_the_loop(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    import asyncio

    alice_token, _, url = setup_pair(admin)

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        async with parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
            received: "asyncio.Queue[Any]" = asyncio.Queue()
            threads = set()

            def on_event(category: str, channel_url: str, payload: Any) -> None:
                threads.add(threading.get_ident())
                received.put_nowait((category, payload))

            stream_open = asyncio.Event()

            def on_connection(event: str, error: Any) -> None:
                threads.add(threading.get_ident())
                if event == "connected":
                    stream_open.set()

            client.set_event_handler(on_event)
            client.set_connection_handler(on_connection)
            user = await client.connect("alice", alice_token)
            assert user["user_id"] == "alice"
            sent = await client.send_user_message(url, "from asyncio")
            assert sent.pending["sending_status"] == "pending"
            message = await asyncio.wait_for(sent.delivered, TIMEOUT)
            assert message["message_id"] > 0
            # Bob's message must come through the stream: sent before it opened (the send's
            # answer can come first), the catch-up stores it without a message_received event.
            await asyncio.wait_for(stream_open.wait(), TIMEOUT)
            admin.send(url, "bob", "to asyncio")
            while True:
                category, payload = await asyncio.wait_for(received.get(), TIMEOUT)
                if category == "message_received" and payload["message"]["message"] == "to asyncio":
                    break
            assert threads == {loop_thread}
            assert [m["message"] for m in client.cached_messages(url)] == ["from asyncio", "to asyncio"]

    asyncio.run(scenario())


def test_cancel_failed_message_and_manual_resend(restartable: RestartableServer, tmp_path: Path) -> None:
    admin = Admin(restartable.running())
    alice_token, _, url = setup_pair(admin)
    client, recorder = make_client(restartable.url, tmp_path / "cache", auto_resend=False)
    with client:
        connect_then_lose_the_server(client, recorder, restartable, alice_token)
        dropped, kept = sends_failing_offline(client, url, ["never mind", "send me later"])
        client.cancel_message(dropped["req_id"])
        recorder.wait(lambda: len(recorder.of("message_canceled")) == 1)
        assert recorder.of("message_canceled")[0]["req_id"] == dropped["req_id"]
        assert [m["req_id"] for m in client.cached_messages(url)] == [kept["req_id"]]
        with pytest.raises(parley.NotFound):
            client.cancel_message(dropped["req_id"])
        restartable.start()
        recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
        time.sleep(1.0)
        # auto_resend is off: nothing went out by itself.
        assert server_messages(admin, url) == []
        message = client.resend_message(kept["req_id"]).result(TIMEOUT)
        assert message["req_id"] == kept["req_id"] and message["message_id"] > 0
        assert [m["req_id"] for m in server_messages(admin, url)] == [kept["req_id"]]
        assert [m.get("sending_status", "succeeded") for m in client.cached_messages(url)] == ["succeeded"]


def test_dot_segment_ids_cannot_change_the_route(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """A channel URL "." or ".." is encoded so that URL normalization cannot drop it:
    leave_channel(".") must not become PUT /v3/group_channels/leave, and nothing changes."""
    alice_token, _, url = setup_pair(admin)
    admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "leave"})
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        for dots in (".", ".."):
            with pytest.raises(parley.NotFound):
                client.leave_channel(channel_url=dots).result(TIMEOUT)
            with pytest.raises(parley.NotFound):
                client.get_group_channel(channel_url=dots).result(TIMEOUT)
        members = admin.call("GET", "/v3/group_channels/leave/members")["members"]
        assert sorted(m["user_id"] for m in members) == ["alice", "bob"]
        members = admin.call("GET", f"/v3/group_channels/{url}/members")["members"]
        assert sorted(m["user_id"] for m in members) == ["alice", "bob"]


def test_the_process_exits_promptly_with_a_connected_client_left_open(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """A connected client with handlers, never closed: the interpreter still exits at once."""
    import subprocess
    import sys
    alice_token, _, url = setup_pair(admin)
    script = f"""
import parley, time
client = parley.Client(server_url={server.url!r}, cache_dir={str(tmp_path / 'cache')!r})
client.set_event_handler(lambda *event: time.sleep(0.05))
client.set_connection_handler(lambda *event: None)
client.connect("alice", {alice_token!r}).result(10)
collection = client.group_channel_collection()
collection.load_more().result(10)
print("connected", flush=True)
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(parley.__file__).parent.parent)})
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "connected"
    for index in range(20):  # events arriving while it exits
        admin.send(url, "bob", f"late {index}")
    try:
        assert process.wait(timeout=15) == 0
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the process did not exit")


def test_an_unusable_cache_directory_is_reported_not_only_logged(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, _ = setup_pair(admin)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be")
    with connected(server.url, blocked, "alice", alice_token) as (client, recorder):
        recorder.wait(lambda: len(recorder.of("cache_unavailable")) == 1)
        assert recorder.of("cache_unavailable")[0]["reason"]


def test_two_processes_creating_one_cache_at_once_both_get_it(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """Migrations are race-free: two processes opening a new cache for the same user at the
    same moment both end up on the file (no fallback to memory)."""
    import subprocess
    import sys
    alice_token, _, _ = setup_pair(admin)
    script = f"""
import parley, sys, time
events = []
client = parley.Client(server_url={server.url!r}, cache_dir=sys.argv[1])
def on_event(category, url, payload):
    events.append(category)
    if category == "cache_unavailable":
        print(payload, file=sys.stderr, flush=True)  # the reason, for a failing run
client.set_event_handler(on_event)
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
client.connect("alice", {alice_token!r}).result(10)
time.sleep(0.3)
client.close()
print("fallback" if "cache_unavailable" in events else "file", flush=True)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(parley.__file__).parent.parent)}
    for run in range(6):
        directory = tmp_path / f"race-{run}"
        start = str(time.time() + 1.0)
        processes = [subprocess.Popen([sys.executable, "-c", script, str(directory), start], stdout=subprocess.PIPE,
                                      text=True, env=env) for _ in range(2)]
        outputs = [process.communicate(timeout=30)[0].strip() for process in processes]
        assert outputs == ["file", "file"], f"run {run}: {outputs}"
        assert all(process.returncode == 0 for process in processes)


def test_the_server_ends_a_stream_whose_key_expires_and_the_client_asks_for_a_token(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    admin.user("alice")
    token = admin.token("alice", expires_at=int(time.time() * 1000) + 1500)
    client, recorder = make_client(server.url, tmp_path / "cache")
    try:
        connect(client, recorder, "alice", token)
        started = time.monotonic()
        recorder.wait(lambda: "session_token_required" in recorder.names(), timeout=10)
        assert time.monotonic() - started < 5
        assert "reconnect_failed" not in recorder.names()  # no retry with the dead key
        client.set_session_token(admin.token("alice"))
        recorder.wait(lambda: recorder.names().count("connected") + recorder.names().count("reconnect_succeeded") >= 2)
    finally:
        client.close()


@pytest.mark.postgres_only
def test_a_send_refused_while_the_database_restarts_is_resent_after_retry_after(server: RunningServer, admin: Admin,
                                                                                tmp_path: Path) -> None:
    """PostgreSQL stops under a connected client: its send is refused with 503 (500902,
    Retry-After) and kept as failed. The event stream stays up, so no reconnect resends it:
    the outbox sends it again once Retry-After has passed, and it is stored once."""
    from tests_support import databases
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        databases.stop_cluster()
        try:
            pending, future = client.send_user_message(url, "sent while the database restarts")
            with pytest.raises(parley.ParleyError) as raised:
                future.result(TIMEOUT)
            assert (raised.value.http_status, raised.value.server_code) == (503, 500902), raised.value
            assert client.cached_messages(url)[-1]["sending_status"] == "failed"
        finally:
            databases.start_cluster()
        recorder.wait(lambda: any(p["req_id"] == pending["req_id"] for p in recorder.of("message_sent")))
        assert "reconnect_started" not in recorder.names(), recorder.names()
        copies = [m for m in server_messages(admin, url) if m["req_id"] == pending["req_id"]]
        assert len(copies) == 1
        assert [m.get("sending_status", "ok") for m in client.cached_messages(url)] == ["ok"]
