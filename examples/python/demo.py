"""Parley demo: two users chatting through a local parley-server, the cache answering
while the server is down, and the outbox delivering a message sent while offline.

    python3 examples/python/demo.py --server-bin server/.build/release/parley-server

Starts its own server (SQLite database in a temp directory, the embedded default),
creates the users and a channel with the admin token, then drives two clients.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, List, Optional

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "bindings" / "python"))
import parley  # noqa: E402


def say(text: str) -> None:
    print(text, flush=True)


class Server:
    """A parley-server process on a fixed port, so it can be stopped and started again."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.database = directory / "server.sqlite"
        self.token = secrets.token_hex(16)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Optional[subprocess.Popen[str]] = None

    def start(self) -> None:
        for _ in range(50):
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--database", str(self.database)],
                env=dict(os.environ, PARLEY_API_TOKEN=self.token),  # not in argv, where ps shows it
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert self.process.stdout is not None
            line = self.process.stdout.readline().strip()
            if line.startswith("parley-server listening on"):
                say(f"  server: {line}")
                return
            self.process.wait()
            time.sleep(0.2)
        raise SystemExit("parley-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
            self.process = None

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Api-Token": self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")


class Person:
    """One user's client, printing what it is told."""

    def __init__(self, name: str, server: Server, cache_dir: Path) -> None:
        self.name = name
        self.client = parley.Client(server_url=server.url, cache_dir=str(cache_dir),
                                    reconnect_initial_delay_ms=200, reconnect_max_delay_ms=1000,
                                    request_timeout_ms=5000, connect_timeout_ms=2000)
        self.lock = threading.Condition()
        self.seen: List[str] = []
        self.client.set_connection_handler(self.on_connection)
        self.client.set_event_handler(self.on_event)

    def on_connection(self, event: str, error: Optional[parley.ParleyError]) -> None:
        detail = f" ({error.message})" if error else ""
        say(f"  [{self.name}] connection: {event}{detail}")
        self.note(f"connection:{event}")

    def on_event(self, category: str, channel_url: str, payload: Any) -> None:
        if category in ("message_received", "message_sent"):
            message = payload.get("message", payload) if category == "message_received" else payload
            sender = message.get("user", {}).get("user_id", "?")
            say(f"  [{self.name}] {category}: {sender}: {message.get('message')!r} (id {message.get('message_id')})")
        elif category in ("message_pending", "message_failed"):
            say(f"  [{self.name}] {category}: {payload.get('message')!r} req_id={payload.get('req_id')[:8]}…"
                + (f" error={payload.get('error_message')!r}" if category == "message_failed" else ""))
        self.note(category)

    def note(self, what: str) -> None:
        with self.lock:
            self.seen.append(what)
            self.lock.notify_all()

    def wait_for(self, what: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.seen.count(what) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"{self.name}: timed out waiting for {what}")
                self.lock.wait(left)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-bin", default=str(HERE.parents[2] / "server" / ".build" / "release" / "parley-server"))
    parser.add_argument("--workdir", help="where the server database and the caches go (default: a temp dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="parley-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    say(f"Parley {parley.version()} demo (files in {workdir})")

    say("\n1. Start a local parley-server (SQLite storage) and create two users and a channel")
    server = Server(args.server_bin, workdir)
    server.start()
    try:
        for user in ("alice", "bob"):
            server.admin("POST", "/v3/users", {"user_id": user, "nickname": user.title()})
        tokens = {user: server.admin("POST", f"/v3/users/{user}/token", {})["token"] for user in ("alice", "bob")}
        channel = server.admin("POST", "/v3/group_channels",
                               {"user_ids": ["alice", "bob"], "name": "Demo room", "channel_url": "demo-room"})
        url = channel["channel_url"]
        say(f"  created users alice, bob and channel '{url}'")

        say("\n2. Connect both users (each gets a cache file of its own)")
        alice = Person("alice", server, workdir / "cache-alice")
        bob = Person("bob", server, workdir / "cache-bob")
        for person in (alice, bob):
            person.client.connect(person.name, tokens[person.name]).result(30)
            person.wait_for("connection:connected")

        say("\n3. Exchange messages (pending at once, then delivered; the other side gets an event)")
        pending, delivered = alice.client.send_user_message(url, "Hi Bob! Parley here.")
        say(f"  alice's send returned at once: sending_status={pending['sending_status']}, message_id={pending['message_id']}")
        delivered.result(30)
        bob.wait_for("message_received")
        _, reply = bob.client.send_user_message(url, "Hi Alice, got it.")
        reply.result(30)
        alice.wait_for("message_received")

        say("\n4. Stop the server: the cache still answers")
        server.stop()
        alice.wait_for("connection:reconnect_started")
        channels = alice.client.cached_channels()
        say(f"  alice's cached channels: {[c['name'] or c['channel_url'] for c in channels]}")
        for message in alice.client.cached_messages(url):
            say(f"  alice's cached message: {message['user']['user_id']}: {message['message']!r}")

        say("\n5. Send while offline: the message waits in the outbox")
        offline, offline_result = alice.client.send_user_message(url, "Sent while the server was down")
        try:
            offline_result.result(30)
        except parley.ParleyError as error:
            say(f"  first attempt failed as expected: {error.name}: {error.message}")
        statuses = [(m["message"], m.get("sending_status", "succeeded")) for m in alice.client.cached_messages(url)]
        say(f"  alice's view now: {statuses}")

        say("\n6. Start the server again: both reconnect, the outbox delivers, bob receives it once")
        server.start()
        alice.wait_for("connection:reconnect_succeeded")
        alice.wait_for("message_sent", count=2)
        bob.wait_for("message_received", count=2)
        time.sleep(0.5)
        on_server = [m for m in server.admin("GET", f"/v3/group_channels/{url}/messages?prev_limit=50&message_ts=9999999999999")["messages"]
                     if m["req_id"] == offline["req_id"]]
        say(f"  copies of the offline message on the server: {len(on_server)}")
        statuses = [(m["message"], m.get("sending_status", "succeeded")) for m in alice.client.cached_messages(url)]
        say(f"  alice's view now: {statuses}")
        if len(on_server) != 1:
            raise SystemExit("the offline message should be on the server exactly once")

        for person in (alice, bob):
            person.client.close()
        say("\nDemo finished.")
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
