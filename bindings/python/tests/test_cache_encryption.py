"""The cache encrypted at rest (``cache_key`` / ``cache_passphrase``): no text of a session
reaches any file of the cache folder, also when the process is killed mid-send; a wrong key
or none is :class:`parley.CacheKeyError` and the file stays byte for byte as it was; a rekey
killed at any point leaves a cache that opens under one of the two keys, whole."""
from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List

import pytest

import parley
from conftest import Admin, RunningServer

TIMEOUT = 20.0
KEY = "5a" * 32
OTHER_KEY = "a5" * 32
MARKERS = ["ZEBRAMARKERTEXT", "MARKERUSERID", "MARKERCHANNELNAME", "MARKERSEARCHWORD", "MARKERPENDINGTEXT"]


def wait_until(condition, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def markers_found(folder: Path) -> List[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}: {marker}" for marker in MARKERS if marker.encode() in data]
    return found


def hashes(folder: Path) -> Dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.rglob("*")) if path.is_file()}


def plain_cache() -> Dict[str, str]:
    """Options for a client whose cache starts plain. In the encrypted lane (which would give
    it the lane's key) it starts under this file's KEY instead, which the rekeyers know."""
    return {"cache_key": KEY} if os.environ.get("PARLEY_TEST_CACHE_KEY") else {}


def room(admin: Admin) -> str:
    token = admin.user("MARKERUSERID")
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"channel_url": "room", "name": "MARKERCHANNELNAME",
                                              "user_ids": ["MARKERUSERID", "bob"]})
    return token


# A client that connects, then sends messages in a loop until it is killed.
def child_environment() -> Dict[str, str]:
    """The environment of a child Python that imports this package (however the tests found it)."""
    package = str(Path(parley.__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")])))


SENDER = textwrap.dedent("""
    import sys, parley
    url, cache_dir, token, key = sys.argv[1:5]
    client = parley.Client(server_url=url, cache_dir=cache_dir, cache_key=key)
    client.connect("MARKERUSERID", token).result(20)
    print("connected", flush=True)
    index = 0
    while True:
        client.send_user_message("room", f"ZEBRAMARKERTEXT {index} MARKERSEARCHWORD")
        index += 1
""")


def test_no_text_of_a_session_reaches_any_file_of_the_cache_folder(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token = room(admin)
    for index in range(20):
        admin.send("room", "bob", f"ZEBRAMARKERTEXT from bob {index} MARKERSEARCHWORD")
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        wait_until(lambda: client.connection_state == "open", "the stream")
        client.send_user_message("room", "ZEBRAMARKERTEXT mine MARKERSEARCHWORD")[1].result(TIMEOUT)
        with client.message_collection("room") as collection:
            collection.start()[1].result(TIMEOUT)
        wait_until(lambda: len(client.cached_messages("room")) >= 15, "the cached messages")
        with client.search_messages("MARKERSEARCHWORD", limit=100) as search:
            search.load_more().result(TIMEOUT)
            assert len(search.results) >= 15, search.results
        assert "MARKERCHANNELNAME" in str(client.cached_channels())
        # A message that stays pending: the server is gone.
        server.process.kill()
        server.process.wait()
        client.send_user_message("room", "MARKERPENDINGTEXT")
        time.sleep(0.3)
        # The WAL (not checkpointed yet) and the outbox journal hold the session's writes.
        assert any(path.name.endswith("-wal") and path.stat().st_size > 0 for path in cache_dir.rglob("*"))
        assert any(path.name.endswith(".outbox") and path.stat().st_size > 0 for path in cache_dir.rglob("*"))
        assert markers_found(cache_dir) == []
    assert markers_found(cache_dir) == []
    for path in cache_dir.rglob("*.sqlite"):
        assert not path.read_bytes().startswith(b"SQLite format 3")


def test_a_process_killed_mid_send_leaves_no_text_in_the_cache_folder(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token = room(admin)
    sender = subprocess.Popen([sys.executable, "-c", SENDER, server.url, str(cache_dir), token, KEY],
                              stdout=subprocess.PIPE, text=True, env=child_environment())
    assert sender.stdout is not None and sender.stdout.readline().strip() == "connected"
    time.sleep(1.0 + random.random())
    sender.send_signal(signal.SIGKILL)
    sender.wait()
    assert any(path.name.endswith("-wal") for path in cache_dir.rglob("*"))
    assert markers_found(cache_dir) == []
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        assert "ZEBRAMARKERTEXT" in str(client.cached_messages("room"))
    assert markers_found(cache_dir) == []


def test_a_wrong_key_or_none_is_an_error_and_the_files_stay_as_they_were(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token = room(admin)
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        client.send_user_message("room", "ZEBRAMARKERTEXT")[1].result(TIMEOUT)
    before = hashes(cache_dir)
    for options in ({"cache_key": OTHER_KEY}, {}, {"cache_passphrase": "guess", "cache_passphrase_iterations": 1,
                                                  "cache_passphrase_memory_mb": 8}):
        with parley.Client(server_url=server.url, cache_dir=str(cache_dir), **options) as client:
            with pytest.raises(parley.CacheKeyError):
                client.connect("MARKERUSERID", token).result(TIMEOUT)
        assert hashes(cache_dir) == before
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        assert "ZEBRAMARKERTEXT" in str(client.cached_messages("room"))


# Opens the cache under whichever of the two keys it has, then rekeys to the other, forever.
REKEYER = textwrap.dedent("""
    import sys, parley
    url, cache_dir, token, first, second = sys.argv[1:6]
    for key, other in ((first, second), (second, first)):
        client = parley.Client(server_url=url, cache_dir=cache_dir, cache_key=key)
        try:
            client.connect("MARKERUSERID", token).result(20)
            break
        except parley.CacheKeyError:
            client.close()
    else:
        sys.exit("neither key opens the cache")
    print("connected", flush=True)
    while True:
        client.rekey_cache(key=other)
        key, other = other, key
""")


@pytest.mark.plain_cache_file
def test_a_plain_cache_larger_than_the_copys_page_cache_is_encrypted(server: RunningServer, admin: Admin,
                                                                     tmp_path: Path) -> None:
    # The sealed copy (VACUUM INTO) outgrows its page cache (2 MB): pages are written before page 1.
    cache_dir = tmp_path / "cache"
    token = room(admin)
    admin.send("room", "bob", "ZEBRAMARKERTEXT the newest")
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir)) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        with client.message_collection("room") as collection:
            collection.start()[1].result(TIMEOUT)
    [path] = list(cache_dir.rglob("*.sqlite"))
    db = sqlite3.connect(str(path))
    # Copies of the message below it, written as bench_support.h's add_message_copies writes them.
    db.executescript("CREATE TEMP TABLE template AS SELECT * FROM messages LIMIT 1;"
                     "UPDATE template SET message_id = 1000000000;")
    with db:
        for _ in range(20000):
            db.execute("UPDATE template SET message_id = message_id + 1, created_at = created_at - 1")
            db.execute("INSERT INTO messages SELECT * FROM template")
    db.close()
    assert path.stat().st_size > 4 << 20
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        assert not path.read_bytes().startswith(b"SQLite format 3")
        assert client.metrics()["cache_messages"] > 20000
    assert markers_found(cache_dir) == []


def test_a_rekey_killed_at_random_points_leaves_the_cache_whole_under_one_key(server: RunningServer, admin: Admin,
                                                                              tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    token = room(admin)
    for index in range(200):
        admin.send("room", "bob", f"message {index}")
    # A plain cache: the first rekeyer's open encrypts it.
    with parley.Client(server_url=server.url, cache_dir=str(cache_dir), **plain_cache()) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        with client.message_collection("room") as collection:
            collection.start()[1].result(TIMEOUT)
        expected = client.cached_messages("room", limit=1000)
        assert len(expected) >= 20
    rng = random.Random(77)
    for _ in range(8):
        rekeyer = subprocess.Popen([sys.executable, "-c", REKEYER, server.url, str(cache_dir), token, KEY, OTHER_KEY],
                                   stdout=subprocess.PIPE, text=True, env=child_environment())
        assert rekeyer.stdout is not None and rekeyer.stdout.readline().strip() == "connected"
        time.sleep(rng.random() * 0.5)
        rekeyer.send_signal(signal.SIGKILL)
        rekeyer.wait()
    opened = 0
    for key in (KEY, OTHER_KEY):
        with parley.Client(server_url=server.url, cache_dir=str(cache_dir), cache_key=key) as client:
            try:
                client.connect("MARKERUSERID", token).result(TIMEOUT)
            except parley.CacheKeyError:
                continue
            opened += 1
            assert client.cached_messages("room", limit=1000) == expected
    assert opened == 1
    assert not any(".corrupt-" in path.name for path in cache_dir.rglob("*"))


def test_open_views_and_searches_keep_working_across_a_rekey(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = room(admin)
    admin.send("room", "bob", "before MARKERSEARCHWORD")
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), cache_key=KEY) as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        wait_until(lambda: client.connection_state == "open", "the stream")
        with client.message_collection("room") as collection, client.search_messages("MARKERSEARCHWORD") as search:
            collection.start()[1].result(TIMEOUT)
            search.load_more().result(TIMEOUT)
            client.rekey_cache(passphrase="another secret", passphrase_iterations=1, passphrase_memory_mb=8)
            admin.send("room", "bob", "after MARKERSEARCHWORD")
            wait_until(lambda: [m["message"] for m in collection.messages][-1:] == ["after MARKERSEARCHWORD"], "the new message in the view")
            wait_until(lambda: len(search.results) == 2, "the new message in the search")
            client.send_user_message("room", "mine after the rekey")[1].result(TIMEOUT)
            assert "mine after the rekey" in str(client.cached_messages("room"))
        with pytest.raises(parley.InvalidArgument):
            client.rekey_cache(key="not hex")
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), cache_passphrase="another secret") as client:
        client.connect("MARKERUSERID", token).result(TIMEOUT)
        assert "mine after the rekey" in str(client.cached_messages("room"))
