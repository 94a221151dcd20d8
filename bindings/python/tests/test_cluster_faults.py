"""Faults under load on several servers sharing one PostgreSQL database (docs/DEPLOYMENT.md,
"What happens when a server dies" and "When PostgreSQL restarts"): a rolling restart of
three servers with -9, a PostgreSQL restart, and a server killed while writes of its hold
their transactions open. Clients keep sending and receiving throughout; afterwards every
acknowledged send is stored exactly once, in the order its sender sent it, every client's
cache equals the server, and the surviving servers' streams delivered every event once, in
id order, without waiting long for the dead server."""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
import requests

import parley
from conftest import Admin, RunningServer
from nodes import Nodes, nodes, nodes_with_test_hooks, restart_database, three_nodes  # noqa: F401 (the fixtures)
from test_convergence import TIMEOUT, Device, World, differences

pytestmark = pytest.mark.postgres_only

USERS = ["ann", "ben", "cat", "dan"]
CHANNELS = [f"room-{index}" for index in range(6)]
# Pause between one send's completion and the next send of a sender: short, so that a send
# is mostly on its way when a server dies.
SEND_PAUSE = 0.02
# After a send that failed: longer, so that an outage does not use up MOST_SENDS.
PAUSE_AFTER_A_FAILURE = 0.2
# A sender stops there, whatever happens: a channel's listing holds fewer than 200 messages
# (World.messages_of reads one page), and 4 senders x 49 per channel stay below.
MOST_SENDS = 49 * len(CHANNELS)
# The longest a surviving server's streams may go without delivering new writes after
# another server is killed (docs/ARCHITECTURE.md, "What bounds the delay").
DELIVERY_GAP_LIMIT = 3.0


@dataclass
class Send:
    channel: str
    text: str
    req_id: str
    # The message id of the acknowledgement, None if the send failed (then it waits in the
    # outbox and goes again by itself).
    acknowledged: Optional[int] = None
    error: str = ""
    # When the send's completion came.
    settled_at: float = 0.0


@dataclass
class ClientLoad:
    """One client of one user: what it sent, and the messages of others it received live."""

    device: Device
    sends: List[Send] = field(default_factory=list)
    # (arrival time, message id) of each message_received event.
    received: List[Tuple[float, int]] = field(default_factory=list)
    connection_events: List[str] = field(default_factory=list)
    reached_limit: bool = False
    crashed: str = ""

    def listen(self) -> None:
        def on_event(category: str, _channel_url: str, payload: Any) -> None:
            if category == "message_received":
                self.received.append((time.monotonic(), payload["message"]["message_id"]))

        self.device.client.set_event_handler(on_event)
        self.device.client.set_connection_handler(lambda event, _error: self.connection_events.append(event))

    def send_until(self, stop: threading.Event) -> None:
        """Sends into the channels in turn, each send awaited, until `stop` (or MOST_SENDS)."""
        try:
            number = 0
            while not stop.is_set():
                if number == MOST_SENDS:
                    self.reached_limit = True
                    return
                channel = CHANNELS[number % len(CHANNELS)]
                pending, done = self.device.client.send_user_message(channel, f"{self.device.user} {number:03d}")
                send = Send(channel, pending["message"], pending["req_id"])
                self.sends.append(send)
                try:
                    send.acknowledged = done.result(TIMEOUT)["message_id"]
                except parley.ParleyError as error:
                    send.error = f"{type(error).__name__}: {error}"
                send.settled_at = time.monotonic()
                number += 1
                time.sleep(SEND_PAUSE if send.acknowledged is not None else PAUSE_AFTER_A_FAILURE)
        except BaseException as error:  # reported by the test
            self.crashed = repr(error)


def users_channels_and_clients(entry: RunningServer, tmp_path: Path) -> Tuple[World, List[ClientLoad], List[ClientLoad]]:
    """Four users, each a member of the six channels; a sending client per user and a
    second, only receiving, client for two of them, all through `entry`, connected. Returns
    the server's view of them (read through `entry`), the senders and the receivers."""
    admin = Admin(entry)
    tokens = {user: admin.user(user) for user in USERS}
    for channel in CHANNELS:
        admin.call("POST", "/v3/group_channels", {"user_ids": USERS, "channel_url": channel, "name": channel})
    world = World(entry, admin, tokens, rng=None)  # type: ignore[arg-type]
    senders = [ClientLoad(Device(entry, user, tokens[user], tmp_path / f"cache-{user}")) for user in USERS]
    receivers = [ClientLoad(Device(entry, user, tokens[user], tmp_path / f"cache-{user}-reader")) for user in USERS[:2]]
    for load in senders + receivers:
        load.listen()
        load.device.connect()
    return world, senders, receivers


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Whether `condition()` held within `timeout` seconds (looked at every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def stored_messages(world: World) -> Dict[str, List[Any]]:
    """Every channel's messages as the server lists them, oldest first."""
    return {channel: world.messages_of(USERS[0], channel) for channel in CHANNELS}


def lost_duplicated_or_reordered(senders: List[ClientLoad], stored: Dict[str, List[Any]]) -> List[str]:
    """What the server's messages lack or have too much of: for each sender and channel, the
    texts stored must be the texts sent, each once, in the order sent; each acknowledged send
    must be stored with the message id its acknowledgement gave; no req_id stored twice."""
    found: List[str] = []
    for channel, messages in stored.items():
        req_ids = [m["req_id"] for m in messages]
        found += [f"{channel}: req_id {r} stored {req_ids.count(r)} times" for r in sorted(set(req_ids)) if req_ids.count(r) > 1]
        ids_by_req_id = {m["req_id"]: m["message_id"] for m in messages}
        for load in senders:
            sent = [s for s in load.sends if s.channel == channel]
            kept = [m["message"] for m in messages if m["user"]["user_id"] == load.device.user]
            texts = [s.text for s in sent]
            if kept != texts:
                found.append(f"{channel}, sent by {load.device.user}: {len(kept)} stored of {len(texts)} sent; "
                             f"missing {sorted(set(texts) - set(kept))}; "
                             f"twice {sorted({t for t in kept if kept.count(t) > 1})}; "
                             f"in order: {[t for t in kept if t in texts] == [t for t in texts if t in kept]}")
            for send in sent:
                if send.acknowledged is not None and ids_by_req_id.get(send.req_id) != send.acknowledged:
                    found.append(f"{channel}: {send.text!r} acknowledged as {send.acknowledged}, "
                                 f"stored as {ids_by_req_id.get(send.req_id)}")
    return found


def wait_for_the_end_state(world: World, senders: List[ClientLoad], clients: List[ClientLoad],
                           timeout: float) -> Tuple[List[str], List[str]]:
    """Waits until every send is stored once, in order, and every cache equals the server;
    returns what still differs then: (stored messages, caches)."""
    deadline = time.monotonic() + timeout
    while True:
        stored = lost_duplicated_or_reordered(senders, stored_messages(world))
        caches = [f"{load.device.user} ({'sender' if load in senders else 'reader'}): {line}"
                  for load in clients for line in differences(world, load.device)]
        if (not stored and not caches) or time.monotonic() > deadline:
            return stored, caches
        time.sleep(0.5)


def check_the_end_state(world: World, senders: List[ClientLoad], receivers: List[ClientLoad], nodes: Nodes,
                        load_ended: float, last_fault_over: float) -> None:
    """The end conditions shared by the tests under client load (see the module's docstring);
    and each client received, live, messages sent after the last fault, and no message twice."""
    clients = senders + receivers
    assert not [load.crashed for load in clients if load.crashed], [load.crashed for load in clients]
    assert not [load.device.user for load in senders if load.reached_limit], \
        "a sender reached MOST_SENDS before the faults were over: the load did not cover them"
    stored, caches = wait_for_the_end_state(world, senders, clients, 60)
    assert not stored, "\n".join(stored[:20]) + "\n" + nodes.logs()
    assert not caches, "\n".join(caches[:20]) + "\n" + nodes.logs()
    for load in clients:
        ids = [message_id for _, message_id in load.received]
        assert len(ids) == len(set(ids)), \
            f"{load.device.user}: messages received twice: {sorted({i for i in ids if ids.count(i) > 1})}"
        assert any(last_fault_over < at < load_ended for at, _ in load.received), \
            f"{load.device.user}: nothing received live after the last fault ({load.connection_events})"


def report(name: str, senders: List[ClientLoad], **figures: Any) -> None:
    """Prints what a run did (with -s): its sends, those the outbox had to resend, `figures`."""
    sends = [send for load in senders for send in load.sends]
    failed = sum(1 for send in sends if send.acknowledged is None)
    details = ", ".join(f"{key} {value}" for key, value in figures.items())
    print(f"\n{name}: {len(sends)} sends, {failed} failed at first and resent by the outbox; {details}")


def redispatched_from(nodes: Nodes, index: int) -> int:
    """How many requests the balancer took back from node `index` and gave another node
    (HAProxy's `wredis`): requests on their way to it when it stopped answering."""
    return next(int(row["wredis"]) for row in nodes.balancer.stat_rows()
                if row["pxname"] == "nodes" and row["svname"] == f"node{index}")


def balancer_errors(nodes: Nodes) -> int:
    """How many 5xx answers the balancer gave its clients (its own 502s included)."""
    return next(int(row["hrsp_5xx"]) for row in nodes.balancer.stat_rows() if row["svname"] == "FRONTEND")


def test_a_rolling_restart_of_three_servers_under_load_loses_and_duplicates_nothing(three_nodes: Nodes,
                                                                                    tmp_path: Path) -> None:
    """Six clients of four users, spread over three servers by the balancer, send and receive
    while each server in turn is frozen for 0.3 s (requests pile up in it), killed with -9
    and started again: the balancer sends the requests it cut short to another server, or
    answers 502 and the outbox resends. After each kill the streams it held reopen on the
    others within 10 s, and each restarted server takes requests again. Afterwards every
    send is stored once, in the order its sender sent it, each acknowledged one with the id
    its acknowledgement gave, and every cache equals the server."""
    nodes = three_nodes
    world, senders, receivers = users_channels_and_clients(nodes.entry, tmp_path)
    clients = senders + receivers
    stop = threading.Event()
    threads = [threading.Thread(target=load.send_until, args=(stop,), daemon=True) for load in senders]
    streams_held: List[int] = []
    redispatched: List[int] = []
    try:
        assert wait_until(lambda: nodes.open_streams_on_live_nodes() == len(clients), 10), \
            [nodes.open_streams(i) for i in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        for index in range(3):
            streams_held.append(nodes.open_streams(index))
            redispatched_before = redispatched_from(nodes, index)
            # Frozen a moment first, so that requests are certain to be on their way to it (or
            # inside it, a transaction begun) when it dies.
            nodes.freeze(index)
            time.sleep(0.3)
            nodes.kill(index)
            assert wait_until(lambda: nodes.open_streams_on_live_nodes() == len(clients), 10), \
                f"after killing node {index}, {nodes.open_streams_on_live_nodes()} of {len(clients)} streams are open"
            redispatched.append(redispatched_from(nodes, index) - redispatched_before)
            served_before = nodes.balancer.sessions_per_node()[f"node{index}"]
            nodes.restart(index)
            assert wait_until(lambda: nodes.balancer.sessions_per_node()[f"node{index}"] > served_before + 5, 10), \
                f"node {index} took no requests after its restart"
        last_fault_over = time.monotonic()
        time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        load_ended = time.monotonic()
        assert sum(redispatched) + balancer_errors(nodes) > 0, "the kills cut no request short: they missed the load"
        check_the_end_state(world, senders, receivers, nodes, load_ended, last_fault_over)
        report("rolling restart", senders, streams_held_by_each_killed_node=streams_held,
               requests_redispatched_from_each_killed_node=redispatched, balancer_5xx_answers=balancer_errors(nodes),
               sessions_per_node=nodes.balancer.sessions_per_node())
    finally:
        stop.set()
        for load in clients:
            load.device.client.close()


def test_a_postgresql_restart_under_load_loses_and_duplicates_nothing(nodes: Nodes, tmp_path: Path) -> None:
    """Six clients of four users, spread over two servers by the balancer, send and receive
    while PostgreSQL stops for two seconds and starts again. Sends meanwhile fail (503 with
    Retry-After) and the outbox sends them again; afterwards every send is stored once in
    the order its sender sent it, every client's stream is open again, and every cache
    equals the server."""
    world, senders, receivers = users_channels_and_clients(nodes.entry, tmp_path)
    clients = senders + receivers
    stop = threading.Event()
    threads = [threading.Thread(target=load.send_until, args=(stop,), daemon=True) for load in senders]
    try:
        assert wait_until(lambda: nodes.open_streams_on_live_nodes() == len(clients), 10)
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        restart_database(2)
        back = time.monotonic()
        before = [len(load.sends) for load in senders]
        # Both servers answer again by themselves and the load goes on.
        assert wait_until(lambda: sum(1 for load, count in zip(senders, before) for send in load.sends[count:]
                                      if send.acknowledged) > 20, 20), \
            "no send was acknowledged after the restart\n" + nodes.logs()
        last_fault_over = time.monotonic()
        time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        load_ended = time.monotonic()
        failed = sum(1 for load in senders for send in load.sends if send.acknowledged is None)
        assert failed > 0, "no send failed: the restart did not happen under load"
        check_the_end_state(world, senders, receivers, nodes, load_ended, last_fault_over)
        assert wait_until(lambda: nodes.open_streams_on_live_nodes() == len(clients), 10), \
            nodes.open_streams_on_live_nodes()
        first_acknowledged = min(send.settled_at for load in senders for send in load.sends
                                 if send.acknowledged is not None and send.settled_at > back)
        report("PostgreSQL restart", senders, first_send_acknowledged_after_it_was_back=f"{first_acknowledged - back:.2f} s",
               twenty_acknowledged_after=f"{last_fault_over - back:.2f} s",
               errors=sorted({send.error[:80] for load in senders for send in load.sends if send.error}))
    finally:
        stop.set()
        for load in clients:
            load.device.client.close()


class StreamOnNode:
    """A user's event stream on one server (not through the balancer), read on a thread:
    each frame with its arrival time."""

    def __init__(self, server: RunningServer, user: str, token: str) -> None:
        self.user = user
        self.response = requests.get(f"{server.url}/v3/users/{user}/events", headers={"Session-Key": token},
                                     stream=True, timeout=(5, 60))
        assert self.response.status_code == 200, self.response.text
        # Shut down on close: closing the response alone waits for the reading thread's read.
        self.socket = self.response.raw.connection.sock
        self.frames: List[Dict[str, Any]] = []
        self.ended = ""
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        fields: Dict[str, str] = {}
        try:
            for raw in self.response.iter_lines(chunk_size=None):
                line = raw.decode("utf-8")
                if line == "":
                    if fields:
                        frame = {"at": time.monotonic(), "id": int(fields["id"]) if "id" in fields else None,
                                 "event": fields.get("event"), "data": json.loads(fields["data"]) if "data" in fields else None}
                        with self.lock:
                            self.frames.append(frame)
                    fields = {}
                elif not line.startswith(":"):
                    key, _, value = line.partition(":")
                    fields[key] = value[1:] if value.startswith(" ") else value
        except Exception as error:
            self.ended = repr(error)
        else:
            self.ended = "ended by the server"

    def messages(self) -> List[Tuple[float, int, int, str, str]]:
        """(arrival, event id, message id, channel, req_id) of each message_received frame."""
        with self.lock:
            return [(f["at"], f["id"], f["data"]["message"]["message_id"], f["data"]["channel_url"],
                     f["data"]["message"].get("req_id", "")) for f in self.frames if f["event"] == "message_received"]

    def event_ids(self) -> List[int]:
        with self.lock:
            return [f["id"] for f in self.frames if f["id"] is not None]

    def close(self) -> None:
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.response.close()


@dataclass
class DirectSend:
    """A send made as the administrator to one server: when it started, what answered when."""

    user: str
    channel: str
    req_id: str
    started: float
    acknowledged: Optional[int] = None
    acknowledged_at: float = 0.0


def send_directly(server: RunningServer, send: DirectSend, hold_ms: int = 0, timeout: float = 15) -> None:
    """POSTs the send to `server`; records the message id if it was acknowledged. A
    connection error (the server died) leaves it unacknowledged."""
    headers = {"Api-Token": server.api_token}
    if hold_ms:
        headers["Parley-Test-Hold-Ms"] = str(hold_ms)
    try:
        answer = requests.post(f"{server.url}/v3/group_channels/{send.channel}/messages", headers=headers, timeout=timeout,
                               json={"message_type": "MESG", "user_id": send.user, "message": send.req_id, "req_id": send.req_id})
    except requests.RequestException:
        return
    if answer.status_code == 200:
        send.acknowledged = answer.json()["message_id"]
        send.acknowledged_at = time.monotonic()


def test_a_server_killed_with_writes_in_flight_holds_back_the_other_only_briefly(nodes_with_test_hooks: Nodes) -> None:
    """Server A holds writes open (Parley-Test-Hold-Ms) in two of three channels while a
    steady sender writes the third through B and another sends through A. B commits its
    writes meanwhile, but its streams hold them back behind the numbers A's writes took.
    A is killed with -9: PostgreSQL ends its sessions and their locks, so B's streams deliver
    new writes again within DELIVERY_GAP_LIMIT of the kill (the gap is printed). The sends
    A had in flight go again to B with their req_ids, as a client would resend them. Each
    acknowledged send is stored once, each sender's in its order, and B's streams got every
    message of every channel once, in the stored order, with strictly increasing event ids."""
    nodes = nodes_with_test_hooks
    a, b = nodes.nodes
    admin = Admin(b)
    tokens = {user: admin.user(user) for user in USERS}
    channels = CHANNELS[:3]
    held_channels, free_channel = channels[:2], channels[2]
    for channel in channels:
        admin.call("POST", "/v3/group_channels", {"user_ids": USERS, "channel_url": channel, "name": channel})
    streams = [StreamOnNode(b, user, tokens[user]) for user in USERS[:3]]
    stop = threading.Event()
    killed = threading.Event()
    # Steady senders: "ann" to B into the channel A holds no write of; "cat" to A into every
    # channel in turn, and to B from the first send A does not answer (the same req_id again).
    sent: Dict[str, List[DirectSend]] = {"ann": [], "cat": []}

    def steady(user: str, first: RunningServer, targets: List[str]) -> None:
        server = first
        number = 0
        while not stop.is_set() and number < MOST_SENDS:
            send = DirectSend(user, targets[number % len(targets)], f"{user}-{number:03d}", time.monotonic())
            sent[user].append(send)
            send_directly(server, send)
            if send.acknowledged is None and server is a and killed.is_set():
                server = b
                send.started = time.monotonic()
                send_directly(server, send)
            assert send.acknowledged is not None, f"{user}'s send {send.req_id} to {server.url} failed"
            number += 1
            time.sleep(0.05)

    failures: List[str] = []

    def run(target: Callable[[], None]) -> threading.Thread:
        def body() -> None:
            try:
                target()
            except BaseException as error:
                failures.append(repr(error))
        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        return thread

    try:
        assert wait_until(lambda: all(any(f["event"] == "connected" for f in s.frames) for s in streams), 10)
        threads = [run(lambda: steady("ann", b, [free_channel])), run(lambda: steady("cat", a, channels))]
        time.sleep(1)
        held = [DirectSend("ben", channel, f"held-{channel}", time.monotonic()) for channel in held_channels]
        holders = [run(lambda send=send: send_directly(a, send, hold_ms=5_000)) for send in held]  # type: ignore[misc]
        time.sleep(0.3)  # A has taken their numbers and their channels' locks, and holds them
        assert all(holder.is_alive() for holder in holders), "a held write ended at once"
        holding_since = time.monotonic()
        time.sleep(1)
        assert all(holder.is_alive() for holder in holders), "a held write ended before the kill"
        killed.set()
        killed_at = time.monotonic()
        nodes.kill(0)
        probe = DirectSend("dan", held_channels[0], "dan-after-the-kill", time.monotonic())
        send_directly(b, probe)
        assert probe.acknowledged is not None, "B did not take a send after A's kill"
        for holder in holders:
            holder.join(15)
        assert all(send.acknowledged is None for send in held), "a write held on the killed server was acknowledged"
        # The held sends go again to B with their req_ids, as a client would resend them.
        for send in held:
            send.started = time.monotonic()
            send_directly(b, send)
            assert send.acknowledged is not None, send
        time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert not failures, failures

        # While A held its writes, B went on committing Ann's (begun after A took its numbers,
        # so numbered above them), and its streams held them back until the kill.
        committed_meanwhile = [s for s in sent["ann"] if s.started > holding_since and 0 < s.acknowledged_at < killed_at]
        assert committed_meanwhile, "B's writer of another channel waited for A's held writes"
        held_back = {s.req_id for s in committed_meanwhile}
        for stream in streams:
            early = [m for m in stream.messages() if m[4] in held_back and m[0] < killed_at]
            assert not early, f"{stream.user}'s stream on B delivered past A's held numbers: {early}"

        acknowledged = [s for user in sent for s in sent[user]] + held + [probe]
        by_channel = {channel: admin.call("GET", f"/v3/group_channels/{channel}/messages", message_ts=0, prev_limit=0,
                                          next_limit=200, include="true")["messages"] for channel in channels}
        problems: List[str] = []
        for channel, messages in by_channel.items():
            assert len(messages) < 200, "more messages than one page holds"
            req_ids = [m["req_id"] for m in messages]
            problems += [f"{channel}: {r} stored {req_ids.count(r)} times" for r in set(req_ids) if req_ids.count(r) > 1]
            stored_ids = {m["req_id"]: m["message_id"] for m in messages}
            for send in acknowledged:
                if send.channel == channel and stored_ids.get(send.req_id) != send.acknowledged:
                    problems.append(f"{channel}: {send.req_id} acknowledged as {send.acknowledged}, "
                                    f"stored as {stored_ids.get(send.req_id)}")
            for user in sent:
                texts = [m["message"] for m in messages if m["user"]["user_id"] == user]
                if texts != [s.req_id for s in sent[user] if s.channel == channel]:
                    problems.append(f"{channel}: {user}'s messages stored out of order or not once: {texts}")
        assert not problems, "\n".join(problems[:20]) + "\n" + nodes.logs()

        # Every stream on B gets every message of every channel once, in the stored order.
        total = sum(len(messages) for messages in by_channel.values())
        for stream in streams:
            assert wait_until(lambda: len(stream.messages()) >= total, 15), \
                f"{stream.user}'s stream on B got {len(stream.messages())} of {total} messages ({stream.ended})"
        time.sleep(0.5)
        gaps = []
        for stream in streams:
            ids = stream.event_ids()
            assert all(x < y for x, y in zip(ids, ids[1:])), f"{stream.user}: event ids not strictly increasing: {ids}"
            delivered = stream.messages()
            message_ids = [m[2] for m in delivered]
            assert len(message_ids) == len(set(message_ids)), \
                f"{stream.user}: delivered twice: {sorted({i for i in message_ids if message_ids.count(i) > 1})}"
            for channel, messages in by_channel.items():
                assert [m[2] for m in delivered if m[3] == channel] == [m["message_id"] for m in messages], \
                    f"{stream.user}: {channel} delivered differs from the stored order"
            # The gap: from the kill to the first delivery of a message sent to B after it.
            started_after = {s.req_id for s in acknowledged if s.started > killed_at}
            first = min(at for at, _, _, _, req_id in delivered if req_id in started_after)
            gaps.append(first - killed_at)
        print(f"\ndelivery gap on B after A's kill: {', '.join(f'{gap:.3f} s' for gap in gaps)} "
              f"(streams of {', '.join(s.user for s in streams)}); {sum(len(v) for v in sent.values())} steady sends, "
              f"{len(committed_meanwhile)} committed on B and held back while A held its writes")
        assert max(gaps) < DELIVERY_GAP_LIMIT, f"B's streams waited {max(gaps):.2f} s after A's kill\n" + nodes.logs()
    finally:
        stop.set()
        for stream in streams:
            stream.close()
