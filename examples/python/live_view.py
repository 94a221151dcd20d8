"""Parley live view: a channel list and two chat views in the terminal, reacting while
bob chats, while alice's connection is cut (she misses messages, edits and a deletion,
and writes a message of her own) and when it comes back (changelog, fill, a huge gap in
the busy channel, her offline message delivered once).

    python3 examples/python/live_view.py --server-bin server/.build/release/parley-server

Starts its own server (SQLite in a temp directory, the embedded default), keeping only 200
events for resuming, so that alice's absence outlasts them and her client catches up with
changelogs. Alice reaches it
through a small TCP relay that the script can cut, so only her connection goes down.
On a terminal each frame redraws the screen; otherwise frames are printed one after another,
each as tall as the terminal (its size from shutil.get_terminal_size: COLUMNS and LINES, else
80x24). Each frame stays 2 s, a key frame 4 s (--pause, --key-pause); --step waits for Enter
instead. With --checks FILE, each check is also written to FILE (scripts/demo.sh sums them up).
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
from typing import Any, Dict, List, Optional, Tuple

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


def fit(text: str, width: int) -> str:
    """The text cut to `width` columns at a word boundary, "..." marking the cut."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    cut = text[:width - 3]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,") + "..."


def rule(title: str, width: int) -> str:
    """A section header: "-- title ------" across the width."""
    head = fit(f"-- {title} ", width)
    return head + "-" * (width - len(head))


class Screen:
    """What alice sees: her channel list, the chat views of 'general' and 'busy', and the
    latest events of the views with their sources. Each frame fits the terminal: its lines
    are cut to the width at a word boundary and it has fewer lines than the terminal."""

    KINDS = {MessageChangeKind.ADDED: "added", MessageChangeKind.UPDATED: "updated",
             MessageChangeKind.DELETED: "deleted", MessageChangeKind.CHANNEL_UPDATED: "channel",
             MessageChangeKind.CHANNEL_DELETED: "ch-gone", MessageChangeKind.HUGE_GAP_DETECTED: "HUGE GAP"}

    def __init__(self, tty: bool, frames: int) -> None:
        self.tty = tty
        self.frames = frames
        self.number = 0
        self.lock = threading.Lock()
        # (view, kind, source, status, message texts), oldest first
        self.log: List[Tuple[str, str, str, str, List[str]]] = []

    def event(self, where: str, change: MessageChange) -> None:
        if change.kind is MessageChangeKind.CHANNEL_UPDATED and change.context.source is not parley.CollectionEventSource.CHANNEL_CHANGELOG:
            return  # every message also updates the channel (last message, unread count): too many to list
        status = change.context.sending_status.name.lower() if change.messages else ""
        texts = [str(m.get("message", "")) for m in change.messages]
        with self.lock:
            self.log.append((where, self.KINDS.get(change.kind, change.kind.name.lower()), change.context.source.value, status, texts))

    def note(self, where: str, text: str) -> None:
        """A line in the events section that is not an event (what the app did)."""
        with self.lock:
            self.log.append((where, "(app)", text, "", []))

    def mark(self) -> int:
        with self.lock:
            return len(self.log)

    def events(self, since: int = 0, view: Optional[str] = None, text: Optional[str] = None) -> List[Tuple[str, str, str, str, List[str]]]:
        with self.lock:
            return [entry for entry in self.log[since:] if (view is None or entry[0] == view)
                    and (text is None or text in entry[4])]

    @staticmethod
    def event_line(entry: Tuple[str, str, str, str, List[str]], width: int) -> str:
        where, kind, source, status, texts = entry
        if kind == "(app)":
            return fit(f"  {where:7} app:     {source}", width)
        head = f"  {where:7} {kind:8} {source:17} {status:9} "
        # As many of the messages as fit, then how many more.
        items = [repr(text) for text in texts]
        shown = fit(items[0], width - len(head) - 5) + (f" (+{len(items) - 1})" if len(items) > 1 else "") if items else ""
        for count in range(2, len(items) + 1):
            candidate = ", ".join(items[:count]) + (f" (+{len(items) - count})" if count < len(items) else "")
            if len(head) + len(candidate) > width:
                break
            shown = candidate
        return fit(head + shown, width)

    def draw(self, title: str, client: parley.Client, channels: parley.GroupChannelCollection,
             views: Dict[str, parley.MessageCollection], events: List[Tuple[str, str, str, str, List[str]]],
             highlight: Optional[Any] = None, checks: Optional[List[Tuple[bool, str]]] = None,
             focus: str = "general", search: Optional[parley.MessageSearch] = None) -> None:
        width, height = shutil.get_terminal_size((80, 24))
        width, height = max(width, 40), max(height, 12)
        self.number += 1
        label = f"[{self.number}/{self.frames}] "
        lines = textwrap.wrap(title, width, initial_indent=label, subsequent_indent=" " * len(label))[:3]
        lines.append(rule(f"alice's channels (connection: {client.connection_state}; list: {channels.freshness.value})", width))
        for channel in channels.channels:
            last_message = channel.get("last_message")
            last = last_message.get("message", "") if last_message else ""
            lines.append(fit(f"  {channel['channel_url']:8} unread {channel.get('unread_message_count', 0):3}  last: {last}", width))
        # What is left for the two views and the events (or the checks), each under a header.
        room = height - 1 - len(lines) - 3
        if checks is not None:
            listing = [fit(f"  {'ok' if ok else 'FAILED':6} {text.replace('live view: ', '')}", width)
                       for ok, text in checks]
            below = min(len(listing), max(3, room - 4))
        else:
            listing = [self.event_line(entry, width) for entry in events] or ["  (none yet)"]
            below = min(9, max(3, room // 2))
        left = room - below
        if search is not None:
            # The search: its query, then its newest results with the matched words marked.
            results = search.results
            lines.append(rule(f"search '{search.query}': {len(results)} found in the cache, {search.freshness.value}", width))
            for result in results[:max(1, min(3, left // 3))]:
                lines.append(fit(f"  {result['snippet']}", width))
            left -= 1 + max(1, min(3, left // 3))
        # The view the frame is about gets the larger share.
        other = "busy" if focus == "general" else "general"
        sizes = {focus: min(6, max(1, left - left // 3))}
        sizes[other] = min(6, max(1, left - sizes[focus]))
        for name, view in views.items():
            shown = view.messages
            more = "more before" if view.has_previous else "the oldest"
            lines.append(rule(f"view '{name}': {len(shown)} shown, {more}, {view.freshness.value}", width))
            for message in shown[-sizes.get(name, 2):]:
                sender = message.get("user")
                who = sender.get("user_id", "") if sender else ""
                text = str(message.get("message", ""))
                status = f"[{message.get('sending_status', 'sent')}]"
                mark = ">" if highlight is not None and highlight(text) else " "
                lines.append(f"{mark} {who:6} {fit(text, width - 10 - len(status)):{width - 10 - len(status)}} {status}")
        if checks is not None:
            lines.append(rule("what the live view checked", width))
        else:
            lines.append(rule("events (view, kind, source, sending status, messages)", width))
        lines += listing[-below:]
        lines = [line.rstrip() for line in lines[:height - 1]]
        if self.tty:
            sys.stdout.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
        else:
            # One frame after another, each as tall as the terminal less a line, so that the
            # terminal shows exactly one frame even when the output goes through a pipe.
            sys.stdout.write("\n".join(lines + [""] * (height - 1 - len(lines))) + "\n")
        sys.stdout.flush()


class Checks:
    """What the live view checks, each passed or failed; with --checks, also written to a
    file (one line each, "ok<TAB>what" or "FAILED<TAB>what"), which scripts/demo.sh sums up."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.results: List[Tuple[bool, str]] = []

    def check(self, ok: bool, text: str) -> bool:
        self.results.append((ok, text))
        if self.path:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(f"{'ok' if ok else 'FAILED'}\t{text}\n")
        return ok

    @property
    def passed(self) -> bool:
        return all(ok for ok, _ in self.results)


def wait(condition: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def texts(view: parley.MessageCollection) -> List[str]:
    return [str(m.get("message", "")) for m in view.messages]


def outbox_status(view: parley.MessageCollection) -> str:
    """The sending status the view shows for the message alice wrote offline."""
    return next((str(m.get("sending_status", "sent")) for m in view.messages
                 if m.get("message") == "sent while offline"), "not shown")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-bin", required=True)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--pause", type=float, default=2.0, help="seconds a frame stays on screen (default 2)")
    parser.add_argument("--key-pause", type=float, default=4.0,
                        help="seconds a key frame (offline, back online, huge gap, delivered once) stays (default 4)")
    parser.add_argument("--step", action="store_true", help="wait for Enter after each frame (on a terminal)")
    parser.add_argument("--checks", default=None, help="append one line per check to this file (ok or FAILED, a tab, what)")
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
    screen = Screen(sys.stdout.isatty(), frames=10)
    checks = Checks(args.checks)
    step = args.step and sys.stdin.isatty()
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
        wait(lambda: client.connection_state == "open", 10)
        channels = client.group_channel_collection(order=parley.GroupChannelListOrder.CHRONOLOGICAL)
        channels.load_more().result(20)
        views: Dict[str, parley.MessageCollection] = {}

        def open_view(name: str) -> None:
            view = client.message_collection(name, previous_result_size=10)
            view.add_listener(lambda change: screen.event(name, change))
            if name == "busy":
                view.on_huge_gap_detected = lambda: threading.Thread(target=reopen_busy).start()
            views[name] = view
            view.start()[1].result(20)

        recreated = threading.Event()

        def reopen_busy() -> None:
            # The documented answer to a huge gap: dispose the view and create a new one.
            views["busy"].dispose()
            screen.note("busy", "disposed the view, opened a new one at the newest end")
            open_view("busy")
            recreated.set()

        open_view("general")
        open_view("busy")
        general = views["general"]

        def frame(title: str, key: bool = False, **options: Any) -> None:
            screen.draw(title, client, channels, views, **options)
            if step:
                input("  -- Enter: next frame --")
            else:
                time.sleep(args.key_pause if key else args.pause)

        frame("alice opens her channel list and two chat views: each shows her cache at once,"
              " then the server's newest page", events=screen.events())

        for text in ("hi alice!", "are you there?"):
            admin.send("general", "bob", text)
        checks.check(wait(lambda: texts(general)[-2:] == ["hi alice!", "are you there?"], 10),
                     "live view: bob's messages appeared in alice's view as he sent them")
        frame("bob writes twice: alice's view of 'general' adds his messages as they arrive"
              " (source message_received)", events=screen.events(),
              highlight=lambda text: text in ("hi alice!", "are you there?"))

        _, delivered = general.send_user_message("hello bob")
        delivered.result(20)
        reply = [(entry[3], entry[2]) for entry in screen.events(view="general", text="hello bob")]
        checks.check(wait(lambda: texts(general).count("hello bob") == 1, 10)
                     and reply[:1] == [("pending", "local_send")] and ("succeeded", "message_sent") in reply,
                     "live view: her reply shown at once as pending, then succeeded, once")
        frame("alice answers through the view: her message shows at once as pending, then as"
              " succeeded (the same message, never twice)", events=screen.events(),
              highlight=lambda text: text == "hello bob")

        relay.cut()
        offline_ok = wait(lambda: client.connection_state != "open", 10)
        # The frame is drawn once every view reads offline, so that it shows what it says.
        views_offline = wait(lambda: channels.freshness is parley.Freshness.OFFLINE
                             and all(v.freshness is parley.Freshness.OFFLINE for v in views.values()), 10)
        frame("OFFLINE: alice's connection is cut (the relay between her and the server drops it);"
              " her views read offline and keep showing what her cache holds", key=True, events=screen.events())

        before_cut = screen.mark()
        shown = general.messages
        edited, deleted = shown[-2], shown[-3]
        missed = [f"while you were away {i}" for i in range(5)]
        for text in missed:
            admin.send("general", "bob", text)
        admin.call("PUT", f"/v3/group_channels/general/messages/{edited['message_id']}", {"message": f"{edited['message']} (edited)"})
        admin.call("DELETE", f"/v3/group_channels/general/messages/{deleted['message_id']}")
        for index in range(320):
            admin.send("busy", "bob", f"flood {index}")
        offline, _ = general.send_user_message("sent while offline")
        wait(lambda: "sent while offline" in texts(general), 10)
        # Without a connection the first attempt fails; the message stays in the outbox, to be
        # resent once she is back. The frame says what its row shows.
        wait(lambda: outbox_status(general) == "failed", 10)
        waiting_as = outbox_status(general)
        checks.check(offline_ok and client.connection_state != "open" and texts(general)[-1] == "sent while offline"
                     and offline["sending_status"] == "pending" and not any(t in texts(general) for t in missed),
                     "live view: offline, the views showed her cache; her message waited")
        frame("STILL OFFLINE: bob writes 5 messages, edits one and deletes another that alice sees,"
              " floods 'busy' with 320; alice writes one: "
              + ("with no connection its send failed, and it waits in her outbox to be resent" if waiting_as == "failed"
                 else f"it waits in her outbox ({waiting_as})"), key=True,
              events=screen.events(since=before_cut), highlight=lambda text: text == "sent while offline")

        # A search typed offline: the cache answers; it stays open and follows the cache.
        search = client.search_messages("YOU", highlight_start="[", highlight_end="]")
        search_changes: List[parley.SearchChange] = []
        search.add_listener(search_changes.append)
        found_offline = [r["message"]["message"] for r in search.load_more().result(20)]
        checks.check(client.connection_state != "open" and found_offline == ["are you there?"],
                     "live view: a search typed offline found the cached message")
        frame("SEARCH OFFLINE: alice searches 'YOU' with no connection: her cache's full-text index"
              " answers at once, the matched word marked", key=True, events=screen.events(since=before_cut),
              search=search)

        reconnected = screen.mark()
        relay.restore()
        client.reconnect()
        online = wait(lambda: client.connection_state == "open", 20)
        wait(lambda: not general.pending_messages and not general.failed_messages, 20)
        wait(recreated.is_set, 20)
        filled = wait(lambda: all(text in texts(general) for text in missed), 20)
        changed = wait(lambda: f"{edited['message']} (edited)" in texts(general) and deleted["message"] not in texts(general), 20)
        checks.check(online and filled and changed,
                     "live view: back online, changelog (edit, deletion) and fill applied")
        views_live = wait(lambda: channels.freshness is parley.Freshness.LIVE and search.freshness is parley.Freshness.LIVE
                          and all(v.freshness is parley.Freshness.LIVE for v in views.values()), 20)
        checks.check(views_offline and views_live,
                     "live view: every view said 'offline' while cut and 'live' once caught up")
        expected_found = sorted(missed + [f"{edited['message']} (edited)"])
        searched = wait(lambda: sorted(r["message"]["message"] for r in search.results) == expected_found, 20)
        added_live = sorted(text for change in search_changes if change.kind is parley.SearchChangeKind.ADDED
                            for text in (r["message"]["message"] for r in change.results))
        checks.check(searched and added_live == sorted(missed),
                     "live view: the offline search added the 5 missed messages as they reached the cache")
        frame("BACK ONLINE: a changelog brings bob's edit and deletion, a fill the 5 messages"
              " alice missed; her search adds those that match", key=True,
              events=screen.events(since=reconnected, view="general"),
              highlight=lambda text: text in missed or text.endswith("(edited)"), search=search)
        search.dispose()

        busy_newest = lambda: texts(views["busy"])[-1:] == ["flood 319"]  # noqa: E731
        checks.check(recreated.is_set() and wait(busy_newest, 10)
                     and any(entry[1] == "HUGE GAP" for entry in screen.events(since=reconnected, view="busy")),
                     "live view: a huge gap in 'busy' reported, the view recreated")
        frame("HUGE GAP: 'busy' missed more messages than a view fills in; the view reports a huge gap"
              " and the app recreates it at the newest end", key=True,
              events=screen.events(since=reconnected, view="busy"), highlight=lambda text: text == "flood 319",
              focus="busy")

        copies = texts(general).count("sent while offline")
        listed = admin.call("GET", "/v3/group_channels/general/messages?prev_limit=200&include_reply_type=NONE")["messages"]
        on_server = sum(1 for m in listed if m["message"] == "sent while offline")
        shown_ids = [m["message_id"] for m in general.messages]
        server_ids = [m["message_id"] for m in listed][-len(shown_ids):]
        checks.check(copies == 1 and on_server == 1,
                     f"live view: sent offline, delivered once (view: {copies} copy, server: {on_server})")
        lasts = {c["channel_url"]: last.get("message") if (last := c.get("last_message")) else None for c in channels.channels}
        checks.check(shown_ids == server_ids and lasts == {"general": "sent while offline", "busy": "flood 319"},
                     "live view: the view and channel list equal what the server holds")
        frame("DELIVERED ONCE: the message alice wrote offline went from her outbox to the server:"
              f" {'pending, failed' if waiting_as == 'failed' else 'pending'}, then succeeded;"
              " one copy in her view, one on the server", key=True,
              events=screen.events(view="general", text="sent while offline"),
              highlight=lambda text: text == "sent while offline")
        frame("The live view's checks (scripts/demo.sh lists them again at the end)", key=True,
              events=[], checks=checks.results)

        for view in views.values():
            view.dispose()
        channels.dispose()
        client.close()
        relay.cut()
        print("live view:", "all checks passed" if checks.passed else "a check FAILED")
        return 0 if checks.passed else 1
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
