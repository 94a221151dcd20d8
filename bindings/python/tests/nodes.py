"""Several parley-server nodes (two by default) on one PostgreSQL database behind HAProxy
(tests_support/balancer.py), for the tests that spread clients over nodes, kill one or
restart the database (docs/DEPLOYMENT.md)."""
from __future__ import annotations

import os
import re
import secrets
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

import pytest
import requests

from conftest import RunningServer, server_binary, server_database
from tests_support import databases
from tests_support.balancer import Balancer
from tests_support.processes import stop_process


def start_node(database: str, api_token: str, port: int, log_path: Path, test_hooks: bool) -> RunningServer:
    """Starts parley-server on `port` (0: any free one), its warnings and errors appended to
    `log_path` (kept across restarts, for a failure to show), with the test hooks of
    docs/PROTOCOL.md (`Parley-Test-Hold-Ms`) when `test_hooks`; returns once it listens."""
    env = dict(os.environ, PARLEY_TEST_HOOKS="1") if test_hooks else None
    with open(log_path, "a") as log:
        process = subprocess.Popen(
            [str(server_binary()), "--port", str(port), "--database", database, "--api-token", api_token,
             "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    line = process.stdout.readline().strip() if ready else ""
    prefix = "parley-server listening on "
    if not line.startswith(prefix):
        stop_process(process)
        pytest.fail(f"unexpected first line from parley-server: {line!r}; its log: {log_path.read_text()[-2000:]}")
    return RunningServer(line[len(prefix):], api_token, process, database)


class Nodes:
    """`nodes[i]` are the servers, `entry` the balancer in front of them (with the same API
    token, so `Admin(entry)` works through it). Node i logs to `tmp_path/node{i}.log`."""

    def __init__(self, tmp_path: Path, count: int = 2, test_hooks: bool = False) -> None:
        self.database = server_database(tmp_path, "nodes")
        self.api_token = secrets.token_hex(16)
        self.test_hooks = test_hooks
        self.log_paths = [tmp_path / f"node{index}.log" for index in range(count)]
        self.nodes: List[RunningServer] = []
        try:
            for index in range(count):
                self.nodes.append(start_node(self.database, self.api_token, 0, self.log_paths[index], test_hooks))
            self.balancer = Balancer(tmp_path / "balancer", [node.url.removeprefix("http://") for node in self.nodes])
        except BaseException:
            # A failed setup has no teardown: the nodes already started would outlive the test.
            for node in self.nodes:
                stop_process(node.process)
            raise
        self.entry = RunningServer(self.balancer.url, self.api_token, self.nodes[0].process, self.database)

    def port(self, index: int) -> int:
        return int(self.nodes[index].url.rsplit(":", 1)[1])

    def freeze(self, index: int) -> None:
        """Stops node `index` with SIGSTOP: it still accepts connections (the kernel does), so
        the balancer keeps sending it requests, which it never answers."""
        self.nodes[index].process.send_signal(signal.SIGSTOP)

    def kill(self, index: int) -> None:
        """Kills node `index` with SIGKILL: no shutdown, its connections drop."""
        self.nodes[index].process.kill()
        self.nodes[index].process.wait()

    def stop(self, index: int) -> int:
        """Stops node `index` with SIGTERM, as an operator would; returns its exit status."""
        self.nodes[index].process.terminate()
        return self.nodes[index].process.wait(timeout=30)

    def restart(self, index: int) -> None:
        """Starts node `index` again on its port (the balancer's checks take it back)."""
        self.nodes[index] = start_node(self.database, self.api_token, self.port(index), self.log_paths[index],
                                       self.test_hooks)

    def alive(self, index: int) -> bool:
        return self.nodes[index].process.poll() is None

    def open_streams(self, index: int) -> int:
        """How many event streams node `index` holds open (its `parley_event_streams_open`)."""
        text = requests.get(self.nodes[index].url + "/metrics", timeout=5).text
        found = re.search(r"^parley_event_streams_open (\S+)$", text, re.MULTILINE)
        assert found, "no parley_event_streams_open in /metrics"
        return int(float(found.group(1)))

    def open_streams_on_live_nodes(self) -> int:
        return sum(self.open_streams(index) for index in range(len(self.nodes)) if self.alive(index))

    def logs(self) -> str:
        """The end of every node's log, headed by its name (for a failure's message)."""
        return "\n".join(f"--- node{index} log:\n{path.read_text()[-3000:] if path.exists() else ''}"
                         for index, path in enumerate(self.log_paths))

    def close(self) -> None:
        self.balancer.stop()
        for node in self.nodes:
            stop_process(node.process)


def restart_database(down_seconds: float) -> None:
    """Stops the test PostgreSQL cluster (fast: its sessions are ended), keeps it down for
    `down_seconds`, and starts it again on the same port, as an administrator restarting it
    would (scripts/pg-test-cluster.sh's cluster, named by PARLEY_PG_DIR)."""
    databases.stop_cluster()
    try:
        time.sleep(down_seconds)
    finally:
        databases.start_cluster()


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    running = Nodes(tmp_path)
    yield running
    running.close()


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[Nodes]:
    running = Nodes(tmp_path, 3)
    yield running
    running.close()


@pytest.fixture
def nodes_with_test_hooks(tmp_path: Path) -> Iterator[Nodes]:
    """Two nodes whose Api-Token writes may carry `Parley-Test-Hold-Ms`."""
    running = Nodes(tmp_path, test_hooks=True)
    yield running
    running.close()
