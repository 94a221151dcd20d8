"""HAProxy (Debian's `haproxy` package) in front of several parley-server nodes on loopback,
configured as docs/DEPLOYMENT.md says a deployment should be: event streams pass through
unbuffered with long idle timeouts, a node is checked twice a second and taken out after
one failed check, a request whose connection to a node failed goes to another node, and (with
`by_channel`) a channel's requests go to one node.

The tests start it themselves (`Balancer(directory, ["127.0.0.1:PORT", ...])`); it runs in
the foreground of its own process and goes with `stop()`.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from tests_support.processes import stop_process

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

# The configuration of docs/DEPLOYMENT.md, with loopback addresses and short health-check
# intervals (a test wants a killed node noticed within a second).
CONFIG = """\
global
    maxconn 4096
    stats socket {admin_socket} mode 600 level admin

defaults
    mode http
    option http-keep-alive
    option forwardfor
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout http-keep-alive 10s
    timeout http-request 10s
    timeout queue 5s
    # A request whose connection to a node failed was never seen by it: another node takes it.
    retries 3
    option redispatch 1
    retry-on conn-failure
    # The balancer's own errors (no server could take the request, or the one that had it
    # died) say when to try again, as the servers' 503 does: clients wait that long, then resend.
    http-error status 502 content-type application/json string "{{\\"error\\":true,\\"code\\":0,\\"message\\":\\"the server handling the request stopped; retry\\"}}" hdr Retry-After 1
    http-error status 503 content-type application/json string "{{\\"error\\":true,\\"code\\":0,\\"message\\":\\"no server is available; retry\\"}}" hdr Retry-After 1
    http-error status 504 content-type application/json string "{{\\"error\\":true,\\"code\\":0,\\"message\\":\\"the server did not answer in time; retry\\"}}" hdr Retry-After 1

frontend parley
    bind 127.0.0.1:{port}
{by_channel_key}    default_backend nodes

backend nodes
{balance}
{ready_check}    default-server check inter 500ms fall 1 rise 1
{servers}
"""

# What docs/DEPLOYMENT.md recommends for a stop without refused requests: the check asks
# /health/ready, which answers 503 from the stop signal on, through the drain.
READY_CHECK = """\
    option httpchk GET /health/ready
    http-check expect status 200
"""


# What docs/DEPLOYMENT.md recommends so that a channel's requests reach one node: the
# channel's URL (the path's fourth field) is hashed; any other request goes round robin.
BY_CHANNEL_KEY = """\
    http-request set-var(txn.channel) path,field(4,/) if { path_beg /v3/group_channels/ }
"""
BY_CHANNEL_BALANCE = """\
    balance hash var(txn.channel)
    hash-type consistent"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Balancer:
    """HAProxy listening on a loopback port, spreading requests over `nodes` ("HOST:PORT"):
    round robin, or with `by_channel` each channel's requests to one node. Its health checks
    are TCP connects, or with `ready_check` requests of /health/ready."""

    def __init__(self, directory: Path, nodes: List[str], ready_check: bool = False, by_channel: bool = False) -> None:
        if not os.path.exists(HAPROXY):
            pytest.fail("haproxy is not installed: scripts/setup.sh installs it (apt-get install haproxy)")
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = directory / "haproxy.cfg"
        # A Unix socket's path may not exceed 107 bytes (HAProxy allows 97), which a test's
        # directory under a long TMPDIR can: the socket gets a short directory of its own.
        self.admin_directory = Path(tempfile.mkdtemp(prefix="parley-haproxy-", dir="/tmp"))
        self.admin_socket = self.admin_directory / "haproxy.sock"
        try:
            servers = "\n".join(f"    server node{i} {node}" for i, node in enumerate(nodes))
            self.config_path.write_text(CONFIG.format(
                admin_socket=self.admin_socket, port=self.port, servers=servers,
                ready_check=READY_CHECK if ready_check else "", by_channel_key=BY_CHANNEL_KEY if by_channel else "",
                balance=BY_CHANNEL_BALANCE if by_channel else "    balance roundrobin"))
            check = subprocess.run([HAPROXY, "-c", "-f", str(self.config_path)], capture_output=True, text=True)
            if check.returncode != 0:
                pytest.fail(f"haproxy refused its configuration: {check.stdout}{check.stderr}")
            self.log = open(directory / "haproxy.log", "w")
            # -db: stay in the foreground, so that this process owns it and its end.
            self.process: Optional[subprocess.Popen] = subprocess.Popen(
                [HAPROXY, "-db", "-f", str(self.config_path)], stdout=self.log, stderr=subprocess.STDOUT)
        except BaseException:
            shutil.rmtree(self.admin_directory, ignore_errors=True)
            raise
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"haproxy did not start listening: see {directory / 'haproxy.log'}")
                time.sleep(0.05)

    def stat_rows(self) -> List[Dict[str, str]]:
        """HAProxy's `show stat`: one row per frontend, backend and server."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as admin:
            admin.settimeout(5)
            admin.connect(str(self.admin_socket))
            admin.sendall(b"show stat\n")
            reply = b""
            while chunk := admin.recv(65536):
                reply += chunk
        lines = reply.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        return [dict(zip(header, line.split(","))) for line in lines[1:] if line]

    def sessions_per_node(self) -> Dict[str, int]:
        """How many connections each node has been given so far (HAProxy's `stot`), by name."""
        rows = self.stat_rows()
        return {row["svname"]: int(row["stot"]) for row in rows
                if row["pxname"] == "nodes" and row["svname"] not in ("FRONTEND", "BACKEND")}

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        self.log.close()
        shutil.rmtree(self.admin_directory, ignore_errors=True)
