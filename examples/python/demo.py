"""Parley demo: two users chatting through a local parley-server, the cache answering
while the server is down, and the outbox delivering a message sent while offline.

    python3 examples/python/demo.py --server-bin server/.build/release/parley-server

Starts its own server (SQLite database in a temp directory, the embedded default),
creates the users and a channel with the admin token, then drives two clients. The
clients' callbacks run on the library's callback thread while the main thread prints too:
every line is printed whole under one lock. With --checks FILE, each check is also
written to FILE ("ok" or "FAILED", a tab, what was checked; scripts/demo.sh sums them up).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, List, Optional

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "bindings" / "python"))
import parley  # noqa: E402


OUTPUT = threading.Lock()


def say(text: str) -> None:
    """Prints one line (wrapped to the terminal's width, never cut) in one write under a
    lock, so that a callback's line and the main thread's never mix."""
    width = shutil.get_terminal_size((80, 24)).columns
    indent = " " * (len(text) - len(text.lstrip()) + 4)
    lines = textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False) or [""]
    with OUTPUT:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


class Checks:
    """What the demo checks, each passed or failed; with --checks, also written to a file."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.failed = False

    def check(self, ok: bool, text: str) -> bool:
        say(f"  check: {text}: {'ok' if ok else 'FAILED'}")
        self.failed = self.failed or not ok
        if self.path:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(f"{'ok' if ok else 'FAILED'}\t{text}\n")
        return ok


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
        self.failures = 0  # reconnection attempts failed in a row
        self.client.set_connection_handler(self.on_connection)
        self.client.set_event_handler(self.on_event)

    def on_connection(self, event: str, error: Optional[parley.ParleyError]) -> None:
        detail = f" ({error.message.split(':')[0]})" if error else ""  # its first clause
        # While the server is down the client retries every second: the first failure is
        # shown, the others are counted.
        if event == "reconnect_started":
            self.failures = 0
        elif event == "reconnect_failed":
            self.failures += 1
            if self.failures > 1:
                self.note(f"connection:{event}")
                return
            detail += "; retrying"
        elif event == "reconnect_succeeded" and self.failures:
            detail = f" (after {self.failures} failed attempts)"
        say(f"  [{self.name}] connection: {event.replace('_', ' ')}{detail}")
        self.note(f"connection:{event}")

    def on_event(self, category: str, channel_url: str, payload: Any) -> None:
        if category in ("message_received", "message_sent"):
            message = payload.get("message", payload) if category == "message_received" else payload
            sender = message.get("user", {}).get("user_id", "?")
            what = "received" if category == "message_received" else "confirmed"
            say(f"  [{self.name}] {what}: {sender}: {message.get('message')} (id {message.get('message_id')})")
        elif category == "message_pending":
            say(f"  [{self.name}] pending: {payload.get('message')} (request {payload.get('req_id')[:8]})")
        elif category == "message_failed":
            reason = str(payload.get("error_message")).split(":")[0]
            say(f"  [{self.name}] failed: {payload.get('message')} ({reason})")
        self.note(category)

    def note(self, what: str) -> None:
        with self.lock:
            self.seen.append(what)
            self.lock.notify_all()

    def wait_for(self, what: str, count: int = 1, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.seen.count(what) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    say(f"  {self.name}: timed out waiting for {what}")
                    return False
                self.lock.wait(left)
        return True


def show(person: Person, url: str) -> None:
    """The messages a user's cache holds for a channel, one a line with its sending state."""
    for message in person.client.cached_messages(url):
        status = message.get("sending_status", "succeeded")
        say(f"    {message['user']['user_id']}: {message['message']} [{status}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-bin", default=str(HERE.parents[2] / "server" / ".build" / "release" / "parley-server"))
    parser.add_argument("--workdir", help="where the server database and the caches go (default: a temp dir)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between the steps (default 1)")
    parser.add_argument("--checks", default=None, help="append one line per check to this file")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="parley-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    checks = Checks(args.checks)
    say(f"Parley {parley.version()} demo (files in {workdir})")

    def step(title: str) -> None:
        time.sleep(args.pause)
        say("")
        say(title)

    step("1. Start a local parley-server (SQLite): two users and a channel")
    server = Server(args.server_bin, workdir)
    server.start()
    people: List[Person] = []
    try:
        for user in ("alice", "bob"):
            server.admin("POST", "/v3/users", {"user_id": user, "nickname": user.title()})
        tokens = {user: server.admin("POST", f"/v3/users/{user}/token", {})["token"] for user in ("alice", "bob")}
        channel = server.admin("POST", "/v3/group_channels",
                               {"user_ids": ["alice", "bob"], "name": "Demo room", "channel_url": "demo-room"})
        url = channel["channel_url"]
        say(f"  created users alice, bob and channel '{url}'")

        step("2. Connect both users (each gets a cache file of its own)")
        alice = Person("alice", server, workdir / "cache-alice")
        bob = Person("bob", server, workdir / "cache-bob")
        people = [alice, bob]
        for person in people:
            person.client.connect(person.name, tokens[person.name]).result(30)
            person.wait_for("connection:connected")

        step("3. Exchange messages: pending at once, then confirmed; the other receives it")
        pending, delivered = alice.client.send_user_message(url, "Hi Bob! Parley here.")
        say(f"  alice's send returned at once: {pending['sending_status']}, no id yet ({pending['message_id']})")
        delivered.result(30)
        got = bob.wait_for("message_received")
        _, reply = bob.client.send_user_message(url, "Hi Alice, got it.")
        reply.result(30)
        if not checks.check(got and alice.wait_for("message_received"),
                            "Python demo: alice and bob each received the other's message"):
            return 1

        step("4. Stop the server: the cache still answers")
        server.stop()
        alice.wait_for("connection:reconnect_started")
        channels = alice.client.cached_channels()
        say(f"  alice's cached channels: {', '.join(c['name'] or c['channel_url'] for c in channels)}")
        say("  alice's cached messages:")
        show(alice, url)
        cached = [m["message"] for m in alice.client.cached_messages(url)]
        checks.check([c["channel_url"] for c in channels] == [url] and cached == ["Hi Bob! Parley here.", "Hi Alice, got it."],
                     "Python demo: with the server stopped, the cache answered")

        step("5. Send while offline: the message waits in the outbox")
        offline, offline_result = alice.client.send_user_message(url, "Sent while the server was down")
        first_failed = False
        try:
            offline_result.result(30)
        except parley.ParleyError as error:
            first_failed = True
            say(f"  the first attempt failed, as it should: {error.name}")
        say("  alice's cached messages:")
        show(alice, url)

        step("6. Start the server again: the outbox delivers, bob receives it once")
        server.start()
        back = alice.wait_for("connection:reconnect_succeeded")
        back = alice.wait_for("message_sent", count=2) and back
        back = bob.wait_for("message_received", count=2) and back
        time.sleep(0.5)
        on_server = [m for m in server.admin("GET", f"/v3/group_channels/{url}/messages?prev_limit=50&message_ts=9999999999999")["messages"]
                     if m["req_id"] == offline["req_id"]]
        say(f"  copies of the offline message on the server: {len(on_server)}")
        say("  alice's cached messages:")
        show(alice, url)
        statuses = [m.get("sending_status", "succeeded") for m in alice.client.cached_messages(url)]
        checks.check(first_failed and back and len(on_server) == 1 and bob.seen.count("message_received") == 2
                     and statuses == ["succeeded"] * 3,
                     "Python demo: sent offline, delivered once after the restart")
        say("")
        say("Demo finished." if not checks.failed else "Demo finished: a check FAILED.")
        return 1 if checks.failed else 0
    finally:
        for person in people:
            person.client.close()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
