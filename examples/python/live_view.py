"""Parley live view: a channel list and two chat views in the terminal, reacting while
bob chats, while alice's connection is cut (she misses messages, edits and a deletion,
and writes a message of her own) and when it comes back (changelog, fill, a huge gap in
the busy channel, her offline message delivered once).

    python3 examples/python/live_view.py --server-bin server/.build/release/parley-server

Starts its own server (SQLite in a temp directory, the embedded default), keeping only 200
events for resuming, so that alice's absence outlasts them and her client catches up with
changelogs. Alice reaches it
through a small TCP relay that the script can cut, so only her connection goes down.
On a terminal each frame redraws the screen; otherwise frames are printed one after another.
"""
from __future__ import annotations

import argparse
import functools
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
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "bindings" / "python"))
import parley  # noqa: E402
from parley import MessageChange, MessageChangeKind  # noqa: E402


class Relay:
    """Forwards TCP connections to the server; `cut()` drops them and refuses new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.sockets: List[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.open = False
        with self.lock:
            for end in self.sockets:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.sockets = []

    def restore(self) -> None:
        self.open = True


class Admin:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        request = urllib.request.Request(self.url + path, method=method, data=json.dumps(body or {}).encode(),
                                         headers={"Api-Token": self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def send(self, channel: str, user: str, text: str) -> Any:
        return self.call("POST", f"/v3/group_channels/{channel}/messages",
                         {"message_type": "MESG", "user_id": user, "message": text})


class Screen:
    """What alice sees: her channel list, the chat view of 'general', the 'busy' view, and
    the latest events with their sources."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.log: List[str] = []
        self.lock = threading.Lock()
        self.step = ""

    def event(self, where: str, change: MessageChange) -> None:
        if change.kind is MessageChangeKind.CHANNEL_UPDATED and change.context.source is not parley.CollectionEventSource.CHANNEL_CHANGELOG:
            return  # every message also updates the channel (last message, unread count): too many to list
        texts = ", ".join(repr(m.get("message", "")) for m in change.messages[:3])
        more = f" (+{len(change.messages) - 3})" if len(change.messages) > 3 else ""
        status = change.context.sending_status.name.lower() if change.messages else ""
        line = f"{where:8} {change.kind.name.lower():17} {change.context.source.value:17} {status:9} {texts}{more}"
        with self.lock:
            self.log = (self.log + [line])[-9:]

    def draw(self, client: parley.Client, channels: parley.GroupChannelCollection,
             views: Dict[str, parley.MessageCollection]) -> None:
        lines = [f"== {self.step}", "", f"connection: {client.connection_state}", "", "CHANNELS (alice)"]
        for channel in channels.channels:
            last_message = channel.get("last_message")
            last = last_message.get("message", "") if last_message else ""
            lines.append(f"  {channel['channel_url']:10} unread {channel.get('unread_message_count', 0):3}  last: {last[:40]}")
        for name, view in views.items():
            shown = view.messages
            lines += ["", f"VIEW {name}: {len(shown)} shown, has_previous={view.has_previous} has_next={view.has_next}"]
            for message in shown[-6:]:
                sender = message.get("user")
                who = sender.get("user_id", "") if sender else ""
                status = message.get("sending_status", "sent")
                lines.append(f"  {who:6} {message.get('message', '')[:44]:44} [{status}]")
        lines += ["", "EVENTS (view, kind, source, status, messages)"]
        with self.lock:
            lines += ["  " + line for line in self.log]
        text = "\n".join(lines)
        if self.tty:
            sys.stdout.write("\x1b[2J\x1b[H" + text + "\n")
        else:
            sys.stdout.write(text + "\n\n")
        sys.stdout.flush()


def wait(condition: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-bin", required=True)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--pause", type=float, default=1.2, help="seconds each frame stays on screen")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="parley-live-"))
    workdir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    server = subprocess.Popen([args.server_bin, "--port", "0", "--database", str(workdir / "server.sqlite"), "--event-retention", "200"],
                              env=dict(os.environ, PARLEY_API_TOKEN=token),  # not in argv, where ps shows it
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert server.stdout is not None
    url = server.stdout.readline().strip().rsplit(" ", 1)[-1]
    admin = Admin(url, token)
    screen = Screen(sys.stdout.isatty())
    try:
        for user in ("alice", "bob"):
            admin.call("POST", "/v3/users", {"user_id": user, "nickname": user.title()})
        for channel in ("general", "busy"):
            admin.call("POST", "/v3/group_channels", {"channel_url": channel, "name": channel, "user_ids": ["alice", "bob"]})
        for index in range(12):
            admin.send("general", "bob", f"earlier message {index}")
            admin.send("busy", "bob", f"busy {index}")
        session = admin.call("POST", "/v3/users/alice/token")["token"]
        relay = Relay(int(url.rsplit(":", 1)[1]))
        client = parley.Client(server_url=f"http://127.0.0.1:{relay.port}", cache_dir=str(workdir / "alice-cache"),
                               reconnect_initial_delay_ms=200, reconnect_max_delay_ms=800, request_timeout_ms=3000)
        client.connect("alice", session).result(20)
        channels = client.group_channel_collection(order=parley.GroupChannelListOrder.CHRONOLOGICAL)
        channels.load_more().result(20)
        views: Dict[str, parley.MessageCollection] = {}

        def open_view(name: str) -> None:
            view = client.message_collection(name, previous_result_size=10)
            view.add_listener(functools.partial(screen.event, name))
            if name == "busy":
                view.on_huge_gap_detected = lambda: threading.Thread(target=reopen_busy).start()
            views[name] = view
            view.start()[1].result(20)

        recreated = threading.Event()

        def reopen_busy() -> None:
            # The documented answer to a huge gap: dispose the view and create a new one.
            views["busy"].dispose()
            open_view("busy")
            recreated.set()

        open_view("general")
        open_view("busy")

        def frame(step: str) -> None:
            screen.step = step
            time.sleep(args.pause / 2)
            screen.draw(client, channels, views)
            time.sleep(args.pause / 2)

        frame("1. alice opened her channel list and two chat views (cache, then the server's page)")
        for text in ("hi alice!", "are you there?"):
            admin.send("general", "bob", text)
        frame("2. bob writes: the view adds his messages live (message_received)")
        _, delivered = views["general"].send_user_message("hello bob")
        delivered.result(20)
        frame("3. alice answers through the view: pending, then succeeded (same message, never twice)")

        relay.cut()
        wait(lambda: client.connection_state != "open", 10)
        frame("4. alice's connection is cut")
        missed = [admin.send("general", "bob", f"while you were away {i}") for i in range(5)]
        shown = views["general"].messages
        admin.call("PUT", f"/v3/group_channels/general/messages/{shown[-2]['message_id']}", {"message": "are you there? (edited)"})
        admin.call("DELETE", f"/v3/group_channels/general/messages/{shown[-3]['message_id']}")
        for index in range(320):
            admin.send("busy", "bob", f"flood {index}")
        _, offline = views["general"].send_user_message("sent while offline")
        frame("5. offline: bob writes 5, edits and deletes messages alice sees, floods 'busy' (320);"
              " alice writes one")

        relay.restore()
        client.reconnect()
        wait(lambda: client.connection_state == "open", 20)
        offline.result(30) if not offline.done() or offline.exception() is None else None
        wait(lambda: not views["general"].pending_messages and not views["general"].failed_messages, 20)
        wait(recreated.is_set, 20)
        wait(lambda: any("while you were away 4" == m.get("message") for m in views["general"].messages), 20)
        frame("6. back online: changelog (edit, delete), fill of the missed messages, huge gap in 'busy'"
              " (view recreated at the newest end), the offline message delivered once")

        copies = [m for m in views["general"].messages if m.get("message") == "sent while offline"]
        listed = admin.call("GET", "/v3/group_channels/general/messages?prev_limit=200&include_reply_type=NONE")["messages"]
        on_server = sum(1 for m in listed if m["message"] == "sent while offline")
        shown_ids = [m["message_id"] for m in views["general"].messages]
        server_ids = [m["message_id"] for m in listed][-len(shown_ids):]
        print(f"check: 'sent while offline' shown {len(copies)}x, stored {on_server}x on the server; "
              f"view equals the server's listing: {shown_ids == server_ids}")
        for view in views.values():
            view.dispose()
        channels.dispose()
        client.close()
        relay.cut()
        ok = len(copies) == 1 and on_server == 1 and shown_ids == server_ids and recreated.is_set()
        print("live view demo:", "OK" if ok else "MISMATCH")
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
