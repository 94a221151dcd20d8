"""Two parley-server nodes on one PostgreSQL database behind HAProxy (tests_support/balancer.py),
for the tests that spread clients over nodes or kill one (docs/DEPLOYMENT.md)."""
from __future__ import annotations

import secrets
import signal
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import RunningServer, server_database, start_server
from tests_support.balancer import Balancer
from tests_support.processes import stop_process


class Nodes:
    """`nodes[i]` are the servers, `entry` the balancer in front of them (with the same API
    token, so `Admin(entry)` works through it)."""

    def __init__(self, tmp_path: Path, count: int = 2) -> None:
        self.database = server_database(tmp_path, "nodes")
        self.api_token = secrets.token_hex(16)
        self.nodes: List[RunningServer] = []
        try:
            for _ in range(count):
                self.nodes.append(start_server(self.database, self.api_token))
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
        self.nodes[index] = start_server(self.database, self.api_token, self.port(index))

    def close(self) -> None:
        self.balancer.stop()
        for node in self.nodes:
            stop_process(node.process)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    running = Nodes(tmp_path)
    yield running
    running.close()
