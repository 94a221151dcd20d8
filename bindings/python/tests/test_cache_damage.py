"""A damaged cache file: what is read is verified (a row that is not valid UTF-8 JSON is an
error naming the damage, never undecodable text handed to the application, and marks the
file for replacement), and when the file is replaced its unsent messages are carried over
(delivered once) or reported lost. The outbox journal beside the file (`<file>.outbox`) gives
back the unsent messages of a file destroyed as a whole, so their number is known."""
from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import parley
from conftest import Admin, RunningServer, server_database

TIMEOUT = 20.0
# Every test here reads or damages the cache file with Python's sqlite3 or by its bytes.
pytestmark = pytest.mark.plain_cache_file


class Events:
    def __init__(self) -> None:
        self.items: List[Tuple[str, str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, category: str, channel_url: str, payload: Any) -> None:
        with self.lock:
            self.items.append((str(category), channel_url, payload))

    def of(self, category: str) -> List[Any]:
        with self.lock:
            return [payload for c, _, payload in self.items if c == category]


def wait_until(condition: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def restart(server: RunningServer, tmp_path: Path) -> subprocess.Popen:
    import os

    process = subprocess.Popen([os.environ.get("PARLEY_SERVER_BIN", ""), "--port", server.url.rsplit(":", 1)[1], "--database",
                                server_database(tmp_path), "--api-token", server.api_token],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None and "listening" in process.stdout.readline()
    return process


@contextlib.contextmanager
def restarted(server: RunningServer, tmp_path: Path) -> Iterator[None]:
    """The server (killed by :func:`unsent_messages_then_close`) running again, stopped after the block."""
    again = restart(server, tmp_path)
    try:
        yield
    finally:
        again.terminate()
        again.wait()


@contextlib.contextmanager
def recovered_client(server: RunningServer, cache_dir: Path, token: str,
                     events: Events) -> Iterator[Tuple[parley.Client, Dict[str, Any]]]:
    """alice's client on the damaged cache, connected, once it reported ``cache_recovered``:
    the client and that event's payload."""
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir)) as client:
        client.set_event_handler(events)
        client.connect("alice", token).result(TIMEOUT)
        wait_until(lambda: events.of("cache_recovered"), "cache_recovered")
        yield client, events.of("cache_recovered")[0]


def unsent_messages_then_close(server: RunningServer, admin: Admin, cache_dir: Path,
                               count: int = 2) -> Tuple[str, List[str], Path]:
    """alice caches 5 messages of bob's, the server dies, she sends `count` (kept unsent), closes."""
    token = admin.user("alice")
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"channel_url": "room", "user_ids": ["alice", "bob"]})
    client = parley.Client(server_url=server.url, cache_dir=str(cache_dir), reconnect_initial_delay_ms=100, reconnect_max_delay_ms=300)
    client.connect("alice", token).result(TIMEOUT)
    wait_until(lambda: client.connection_state == "open", "the stream")
    for index in range(5):
        admin.send("room", "bob", f"cached {index}")
    wait_until(lambda: len(client.cached_messages("room")) == 5, "cached")
    server.process.kill()
    server.process.wait()
    req_ids = [client.send_user_message("room", f"unsent {index}")[0]["req_id"] for index in range(count)]
    time.sleep(0.3)
    client.close()
    files = list(cache_dir.rglob("alice.sqlite"))
    assert len(files) == 1
    return token, req_ids, files[0]


def delivered_once(admin: Admin, texts: List[str]) -> bool:
    listed = admin.call("GET", "/v3/group_channels/room/messages?prev_limit=200&include_reply_type=ALL")["messages"]
    return all(sum(1 for m in listed if m["message"] == text) == 1 for text in texts)


def test_a_row_that_is_not_valid_utf8_json_is_an_error_and_the_file_is_replaced_keeping_the_outbox(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token, req_ids, path = unsent_messages_then_close(server, admin, cache_dir)
    with sqlite3.connect(path) as db:  # one byte that is not UTF-8 inside a stored message
        db.execute("UPDATE messages SET json = CAST(x'7b226d657373616765223a22ff227d' AS TEXT) "
                   "WHERE message_id = (SELECT min(message_id) FROM messages)")
    with restarted(server, tmp_path):
        events = Events()
        with parley.Client(server_url=server.url, cache_dir=str(cache_dir), auto_resend=False) as client:
            client.set_event_handler(events)
            client.connect("alice", token).result(TIMEOUT)
            with pytest.raises(parley.CacheError, match="damaged"):
                client.cached_messages("room")
        assert Path(str(path) + ".damaged").exists()
        with recovered_client(server, cache_dir, token, events) as (client, recovered):
            assert sorted(recovered["restored_req_ids"]) == sorted(req_ids) and recovered["lost"] == []
            assert recovered["lost_unknown"] is False
            assert "marked damaged" in recovered["reason"] and Path(recovered["moved_to"]).exists()
            assert not Path(str(path) + ".damaged").exists()
            wait_until(lambda: delivered_once(admin, ["unsent 0", "unsent 1"]), "the unsent messages delivered")
            wait_until(lambda: not [m for m in client.cached_messages("room") if m.get("sending_status")], "no local copy left")
            time.sleep(0.5)
            assert delivered_once(admin, ["unsent 0", "unsent 1"])


def journal_of(path: Path) -> Path:
    return Path(str(path) + ".outbox")


def test_an_unreadable_outbox_without_its_journal_is_reported_lost(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token, req_ids, path = unsent_messages_then_close(server, admin, cache_dir)
    journal_of(path).unlink()  # as a version without the journal left it: only the file can tell
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'outbox'").fetchone()[0]
    with open(path, "r+b") as file:  # the outbox table's page becomes garbage
        file.seek((root - 1) * page_size)
        file.write(b"\xde\xad\xbe\xef" * (page_size // 4))
    events = Events()
    with restarted(server, tmp_path), recovered_client(server, cache_dir, token, events) as (client, recovered):
        assert recovered["restored_req_ids"] == [] and recovered.get("unreadable"), recovered
        assert recovered["lost_unknown"] is True and recovered["journal_unreadable"] == "no outbox journal"
        assert sorted(item["req_id"] for item in recovered["lost"]) == sorted(req_ids)
        failed = [m["req_id"] for m in events.of("message_failed")]
        assert sorted(failed) == sorted(req_ids)
        client.cached_messages("room")  # the fresh cache reads fine


def destroy(path: Path, damage: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(path, "r+b") as file:
        if damage == "header":
            file.write(b"\xde\xad\xbe\xef" * 25)
        else:
            file.truncate(512)


@pytest.mark.parametrize("damage", ["header", "truncated"])
def test_a_file_unreadable_as_a_whole_gives_its_unsent_messages_back_from_the_journal(
        server: RunningServer, admin: Admin, tmp_path: Path, damage: str) -> None:
    """Nothing of the file can be read, but the outbox journal lists every unsent message:
    all are restored, none is lost, the losses are known, and each is delivered once."""
    cache_dir = tmp_path / "cache"
    token, req_ids, path = unsent_messages_then_close(server, admin, cache_dir, count=3)
    texts = [f"unsent {index}" for index in range(3)]
    destroy(path, damage)
    events = Events()
    with restarted(server, tmp_path), recovered_client(server, cache_dir, token, events) as (client, recovered):
        assert recovered.get("unreadable"), recovered
        assert recovered["restored_req_ids"] == req_ids and recovered["restored_from_journal"] == req_ids, recovered
        assert recovered["lost"] == [] and recovered["lost_unknown"] is False and "journal_unreadable" not in recovered
        assert events.of("message_failed") == []
        wait_until(lambda: delivered_once(admin, texts), "the restored messages delivered")
        wait_until(lambda: not [m for m in client.cached_messages("room") if m.get("sending_status")], "no local copy left")
        # Nothing is unsent any more: the journal holds no live record.
        wait_until(lambda: journal_of(path).stat().st_size == 0, "the journal emptied")
        time.sleep(0.5)
        assert delivered_once(admin, texts)
        assert sorted(m["req_id"] for m in client.cached_messages("room") if m["message"] in texts) == sorted(req_ids)


@pytest.mark.parametrize("damage,journal", [("header", "damaged"), ("truncated", "missing")])
def test_a_file_unreadable_as_a_whole_without_a_readable_journal_says_its_losses_are_unknown(
        server: RunningServer, admin: Admin, tmp_path: Path, damage: str, journal: str) -> None:
    """Nothing of the file can be read, nor the journal, so not even the unsent messages can
    be counted: the event must not claim that none was lost."""
    cache_dir = tmp_path / "cache"
    token, _, path = unsent_messages_then_close(server, admin, cache_dir)
    if journal == "damaged":
        journal_of(path).write_bytes(b"garbage\n" + journal_of(path).read_bytes())
    else:
        journal_of(path).unlink()
    destroy(path, damage)
    events = Events()
    with restarted(server, tmp_path), recovered_client(server, cache_dir, token, events) as (client, recovered):
        assert recovered["restored_req_ids"] == [] and recovered.get("unreadable"), recovered
        assert recovered["lost_unknown"] is True and recovered.get("journal_unreadable"), recovered
        if journal == "damaged":  # kept for inspection beside the damaged file
            assert Path(recovered["moved_to"] + ".outbox").read_bytes().startswith(b"garbage")
        client.cached_messages("room")  # the fresh cache reads fine
