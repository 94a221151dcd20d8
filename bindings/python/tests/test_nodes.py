"""Clients of two server nodes on one PostgreSQL database, behind HAProxy (docs/DEPLOYMENT.md):
the convergence workload with the clients spread over both nodes, the fault-injection
workload with one node killed and restarted during the run, and a burst of sends across
which each node in turn is killed with -9. Afterwards every cache equals what the server
returns to its user, and every message sent is stored once, in the order it was sent."""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import Admin
from nodes import Nodes, nodes  # noqa: F401 (the fixture)
from test_convergence import BASE_SEED, TIMEOUT, Device, World, converge, differences
from test_fault_injection import STEPS as FAULT_STEPS
from test_fault_injection import BASE_SEED as FAULT_SEED
from test_fault_injection import run_with_faults

pytestmark = pytest.mark.postgres_only


def alice_and_bob_in(nodes: Nodes, tmp_path: Path, channel_url: str) -> Tuple[World, Device, Device]:
    """Alice and Bob, members of one channel, each with a client through the balancer (not
    yet connected), and the server's view of them."""
    admin = Admin(nodes.nodes[1])
    tokens = {user: admin.user(user) for user in ("alice", "bob")}
    admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": channel_url, "name": channel_url})
    world = World(nodes.nodes[1], admin, tokens, rng=None)  # type: ignore[arg-type]
    alice = Device(nodes.entry, "alice", tokens["alice"], tmp_path / "alice")
    bob = Device(nodes.entry, "bob", tokens["bob"], tmp_path / "bob")
    return world, alice, bob


def test_every_cache_converges_with_the_clients_spread_over_two_nodes(nodes: Nodes, tmp_path: Path) -> None:
    converge(nodes.entry, nodes.nodes[1], Admin(nodes.nodes[1]), tmp_path, BASE_SEED)
    served = nodes.balancer.sessions_per_node()
    assert len(served) == 2 and all(count > 20 for count in served.values()), served


def test_caches_converge_through_faults_with_a_node_killed_and_restarted(nodes: Nodes, tmp_path: Path) -> None:
    def at_step(step: int) -> None:
        if step == FAULT_STEPS // 3:
            nodes.kill(0)
        elif step == 2 * FAULT_STEPS // 3:
            nodes.restart(0)

    run_with_faults(nodes.entry, nodes.nodes[1], Admin(nodes.nodes[1]), tmp_path, FAULT_SEED, at_step)
    assert nodes.balancer.sessions_per_node()["node0"] > 0


def test_a_node_killed_in_turn_mid_burst_loses_and_duplicates_no_message(nodes: Nodes, tmp_path: Path) -> None:
    """Alice sends a burst through the balancer while first node 0, then node 1 is killed with
    -9 and started again: every acknowledged send stays; a request cut off by a kill is
    retried by the balancer or fails with its 502 and Retry-After, after which the outbox
    resends it by itself (its req_id makes a repeat of one the server had stored harmless);
    the server ends up with each text once, in the order sent, and both clients' caches
    equal the server."""
    world, alice, bob = alice_and_bob_in(nodes, tmp_path, "burst")
    texts = [f"burst {i:03d}" for i in range(90)]
    try:
        alice.connect()
        bob.connect()
        connection: List[str] = []
        alice.client.set_connection_handler(lambda event, _error: connection.append(event))
        # Queued at once: the outbox sends them one after the other, so the burst is under way
        # on the server while the nodes die.
        sends = [alice.client.send_user_message("burst", text) for text in texts]
        for index, killed in ((20, 0), (55, 1)):
            sends[index][1].exception(TIMEOUT)
            # Frozen first, so that the request on its way to it when it dies is certain.
            nodes.freeze(killed)
            time.sleep(0.5)
            nodes.kill(killed)
            time.sleep(0.3)
            nodes.restart(killed)
        # Each settles: acknowledged, or failed and kept for resending.
        for _, done in sends:
            done.exception(TIMEOUT)

        deadline = time.monotonic() + 60
        while True:
            stored = [m["message"] for m in world.messages_of("alice", "burst")]
            found = differences(world, alice) + differences(world, bob)
            if (stored == texts and not found) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert stored == texts, f"stored {len(stored)} of {len(texts)}; duplicated: " \
            f"{sorted({t for t in stored if stored.count(t) > 1})}; missing: {sorted(set(texts) - set(stored))}"
        assert not found, "\n".join(found[:20])
        # Each node held a share of the burst when it died, and Alice's stream was on one of them.
        assert "reconnect_started" in connection, connection
    finally:
        alice.client.close()
        bob.client.close()


def test_a_node_stopped_with_sigterm_sends_its_clients_to_the_other(nodes: Nodes, tmp_path: Path) -> None:
    """Each node in turn is stopped with SIGTERM (exit 0) and started again while Bob's client
    is connected through the balancer: the node that held his stream ends it with a retry
    hint, his client reconnects through the balancer and resumes, and a message Alice sends
    after each stop reaches his cache, which equals the server's."""
    world, alice, bob = alice_and_bob_in(nodes, tmp_path, "stops")
    try:
        alice.connect()
        bob.connect()
        connection: List[str] = []
        bob.client.set_connection_handler(lambda event, _error: connection.append(event))
        for index in (0, 1):
            assert nodes.stop(index) == 0
            nodes.restart(index)
            _, done = alice.client.send_user_message("stops", f"after stopping node {index}")
            done.result(TIMEOUT)
            deadline = time.monotonic() + 30
            while True:
                found = differences(world, bob)
                if not found or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert not found, "\n".join(found[:20])
        # Reported once the reconnection's catch-up has run, which may end after the stream
        # has already brought Alice's message.
        deadline = time.monotonic() + 30
        while "reconnect_succeeded" not in connection and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "reconnect_succeeded" in connection, connection
    finally:
        alice.client.close()
        bob.client.close()
