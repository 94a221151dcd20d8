"""Fault injection: every client reaches the server through a TCP proxy the test controls,
which cuts connections, stalls them, swallows their bytes (a black hole) and cuts a stream
in the middle of an event frame, at random points of a random workload (three users, two
clients each, the convergence test's operations, fixed seed). Afterwards every cache
equals, field by field, what the server returns to its user.

One seed runs in the suite. The long mode:
``PARLEY_FAULT_RUNS=10 PARLEY_FAULT_STEPS=600 python3 -m pytest bindings/python/tests/test_fault_injection.py``
(seeds ``PARLEY_FAULT_SEED`` + 0 .. RUNS-1). A failure names its seed and the faults injected.
"""
from __future__ import annotations

import os
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest

import parley
from parley.errors import Status
from conftest import Admin, RunningServer
from test_convergence import CLIENTS_PER_USER, TIMEOUT, USERS, Device, World, create_users_and_channels, wait_for_convergence
from tcp_relay import loopback_listener, shut_down

BASE_SEED = int(os.environ.get("PARLEY_FAULT_SEED", "7001"))
RUNS = int(os.environ.get("PARLEY_FAULT_RUNS", "1"))
STEPS = int(os.environ.get("PARLEY_FAULT_STEPS", "150"))


class FaultyProxy:
    """Forwards TCP connections to the server, with faults on demand."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = loopback_listener(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Condition()
        self.pairs: List[Tuple[socket.socket, socket.socket]] = []
        self.stalled = False
        self.blackhole = False
        self.cut_in_frame = False
        self.closed = False
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                # Looked at again with the pair registered under the same lock: a `go_offline`
                # that ran since the check above (its `cut` could not see this pair) would
                # otherwise leave this connection working while "offline".
                refused = self.refusing or self.closed
                if not refused:
                    self.pairs.append((client, upstream))
            if refused:
                shut_down(client, upstream)
                client.close()
                upstream.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self.lock:
                    while self.stalled and not self.closed:
                        self.lock.wait(0.05)
                    if self.blackhole:
                        continue
                    cut_now = from_server and self.cut_in_frame and b"\ndata: " in data
                    if cut_now:
                        self.cut_in_frame = False
                if cut_now:
                    # Half of an event frame reaches the client, then the connection dies.
                    sink.sendall(data[: data.index(b"\ndata: ") + 12])
                    self.cut()
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            shut_down(source, sink)
            source.close()
            sink.close()

    def cut(self, **faults: bool) -> None:
        """Cuts every connection; then sets `faults` (as `_set`) in the same turn of the lock."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
            for pair in pairs:
                shut_down(*pair)
            for name, on in faults.items():
                setattr(self, name, on)
            self.lock.notify_all()

    def _set(self, **faults: bool) -> None:
        """Turns faults on or off (the pumps waiting out a stall look again)."""
        with self.lock:
            for name, on in faults.items():
                setattr(self, name, on)
            self.lock.notify_all()

    def stall(self, seconds: float) -> None:
        self._set(stalled=True)
        threading.Timer(seconds, lambda: self._set(stalled=False)).start()

    def swallow(self, seconds: float) -> None:
        """A black hole: bytes vanish, connections stay open; then they are cut. The cut comes
        before the hole closes, in one turn of the lock: no connection passes bytes after some
        vanished (TCP never does; a stream that did would skip events)."""
        self._set(blackhole=True)
        threading.Timer(seconds, lambda: self.cut(blackhole=False)).start()

    def cut_inside_next_frame(self) -> None:
        self._set(cut_in_frame=True)

    def go_offline(self) -> None:
        """Cuts every connection and refuses new ones until `come_back`."""
        self._set(refusing=True)
        self.cut()

    def come_back(self) -> None:
        self._set(refusing=False)

    def heal(self) -> None:
        self._set(stalled=False, blackhole=False, cut_in_frame=False)

    def close(self) -> None:
        self.closed = True
        self.heal()
        self.listener.close()
        self.cut()


class FaultyWorld(World):
    """The convergence workload, where a send may fail for the connection: the message then
    waits in the outbox and is delivered after the reconnection (checked at the end)."""

    lost_sends = 0

    def __init__(self, server: RunningServer, admin: Admin, tokens: Dict[str, str], rng: random.Random) -> None:
        super().__init__(server, admin, tokens, rng)
        self.lost_req_ids: Set[str] = set()
        self.proxy_of: Dict[int, FaultyProxy] = {}
        self.extra_kinds = ["delete_before_resend"] * 2

    def perform_extra(self, kind: str, device: Device, channel: str) -> None:
        """A send whose answer is lost with its connection, the message deleted on the server
        before the reconnection's resend (which the server answers from its req_id)."""
        assert kind == "delete_before_resend"
        text = f"{device.user} cut {self.rng.randrange(10**6)}"
        pending, done = device.client.send_user_message(channel, text)
        time.sleep(self.rng.uniform(0.0005, 0.008))
        self.proxy_of[id(device)].cut()
        for _ in range(50):
            stored = [m for m in self.messages_of(device.user, channel) if m["req_id"] == pending["req_id"]]
            if stored:
                self.as_user(device.user, "DELETE", f"/v3/group_channels/{channel}/messages/{stored[0]['message_id']}")
                break
            time.sleep(0.01)
        try:
            self.await_send(pending, done)
        except parley.ParleyError:
            pass

    def await_send(self, pending: Any, done: Any) -> None:
        try:
            done.result(TIMEOUT)
        except (parley.NetworkError, parley.Timeout):
            self.lost_sends += 1
            self.lost_req_ids.add(pending["req_id"])
            raise
        except parley.ParleyError:
            self.refused_sends.add(pending["req_id"])
            raise


    def stays_failed(self, message: Any) -> bool:
        """Also a lost send that went out again after the reconnection and was refused then (the
        channel frozen or the sender gone meanwhile): it carries the server's error, not the
        connection's."""
        if super().stays_failed(message):
            return True
        connection_codes = (Status.NETWORK, Status.TIMEOUT)
        return message.get("req_id") in self.lost_req_ids and message.get("error_code") not in connection_codes


class ProxiedDevice(Device):
    """A device whose client reaches the server through its proxy, with short timeouts (a
    black hole must not hold a step for long)."""

    def __init__(self, url: str, user: str, token: str, cache_dir: Path) -> None:
        self.user = user
        self.token = token
        self.connected = False
        self.client = parley.Client(server_url=url, cache_dir=str(cache_dir), reconnect_initial_delay_ms=50,
                                    reconnect_max_delay_ms=300, request_timeout_ms=2000, connect_timeout_ms=1000)


@pytest.mark.parametrize("seed", [BASE_SEED + i for i in range(RUNS)])
def test_caches_converge_through_cuts_stalls_and_black_holes(server: RunningServer, admin: Admin, tmp_path: Path,
                                                             seed: int) -> None:
    run_with_faults(server, server, admin, tmp_path, seed)


def run_with_faults(entry: RunningServer, truth: RunningServer, admin: Admin, tmp_path: Path, seed: int,
                    at_step: Optional[Callable[[int], None]] = None) -> None:
    """The run: each client's proxy forwards to `entry`; what each user may see is read from
    `truth`. `at_step(n)` runs before step n (a node killed or restarted, say)."""
    rng = random.Random(seed)
    tokens = create_users_and_channels(admin)
    world = FaultyWorld(truth, admin, tokens, rng)
    port = int(entry.url.rsplit(":", 1)[1])
    proxies: List[FaultyProxy] = []
    devices: List[Device] = []
    for user in USERS:
        for index in range(CLIENTS_PER_USER):
            proxy = FaultyProxy(port)
            proxies.append(proxy)
            devices.append(ProxiedDevice(proxy.url, user, tokens[user], tmp_path / f"cache-{user}-{index}"))
            world.proxy_of[id(devices[-1])] = proxy
    injected: Dict[str, int] = {}
    try:
        for device in devices:
            device.connect()
        for step in range(STEPS):
            if at_step is not None:
                at_step(step)
            if rng.random() < 0.15:
                proxy = rng.choice(proxies)
                fault = rng.choice(["cut", "stall", "swallow", "frame"])
                injected[fault] = injected.get(fault, 0) + 1
                if fault == "cut":
                    proxy.cut()
                elif fault == "stall":
                    proxy.stall(rng.uniform(0.05, 0.6))
                elif fault == "swallow":
                    proxy.swallow(rng.uniform(0.1, 0.8))
                else:
                    proxy.cut_inside_next_frame()
            user = rng.choice(USERS)
            candidates = [d for d in devices if d.user == user and d.connected]
            world.step(rng.choice(candidates))  # an operation lost to a fault counts as refused
        for proxy in proxies:
            proxy.heal()
        for device in devices:
            try:
                device.client.reconnect()
            except Exception:
                pass

        converged, report = wait_for_convergence(world, devices, 60)
        assert converged, (f"seed {seed}: caches differ from the server after {STEPS} operations with faults "
                               f"{injected} ({world.performed}, {world.refusals} refused, {world.lost_sends} sends failed for the "
                               f"connection):\n{report}")
        assert sum(injected.values()) >= STEPS // 20, f"seed {seed}: too few faults: {injected}"
        assert world.performed.get("delete_before_resend", 0) > 0, f"seed {seed}: {world.performed}"
    finally:
        for device in devices:
            device.client.close()
        for proxy in proxies:
            proxy.close()
