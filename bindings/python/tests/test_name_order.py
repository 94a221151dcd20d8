"""One total order for channel names and metadata values (docs/PROTOCOL.md, "Sort orders"):
names case-insensitively (the NFC text case-folded, ties by its exact bytes), metadata values
by the UTF-8 bytes of their NFC form, ties broken by the bytes of `channel_url`. Random
names built from combining marks, precomposed letters, case variants and exact ties are
listed by the server (keyset pages at limits 1-7), by a channel collection from the server,
from the cache and offline, and by the cached read: every walk equals the order computed
here with Python's own normalizer, without a skip or a repeat, and every channel is handed out
exactly once (in a page or as added)."""
from __future__ import annotations

import os
import random
import threading
import unicodedata
from pathlib import Path
from typing import Any, Dict, List, Tuple

import parley
from parley import ChangeKind, ChannelChange, GroupChannelListOrder as Order, GroupChannelListQuery
from conftest import Admin, RunningServer, walk_channels

TIMEOUT = 20.0
ME = "namer"
LIMITS = range(1, 8)

# Pieces whose combinations differ only by normalization (NFD vs NFC, the order of combining
# marks, singletons such as the Angstrom and Kelvin signs), by case, or not at all.
PIECES = [
    "e", "E", "\u00e9", "e\u0301", "\u00c9", "E\u0301", "a", "A", "\u00e4", "a\u0308", "\u00c4", "A\u0308",
    "o\u0308", "\u00f6", "\u212b", "\u00c5", "A\u030a", "\u212a", "K", "k", "d\u0323\u0307", "d\u0307\u0323",
    "\u1e0d\u0307", "b", "B", "f", " ", "-", "z",
]


def nfc_key(text: str) -> bytes:
    return unicodedata.normalize("NFC", text).encode("utf-8")


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))


def build_world(admin: Admin, rng: random.Random, count: int) -> Tuple[Dict[str, str], Dict[str, str]]:
    """`count` channels of ME with random names (a third of them copies of another's name, so
    ties are common) and, on most, a random metadata value under "rank"."""
    names: Dict[str, str] = {}
    ranks: Dict[str, str] = {}
    for index in range(count):
        url = f"n{rng.randrange(1 << 30):08x}{index:02d}"
        name = rng.choice(list(names.values())) if names and rng.random() < 0.33 else random_text(rng)
        # The same text in another normal form: a canonical tie.
        if rng.random() < 0.3:
            name = unicodedata.normalize(rng.choice(["NFC", "NFD"]), name)
        names[url] = name
        admin.call("POST", "/v3/group_channels", {"channel_url": url, "user_ids": [ME], "name": name})
        if rng.random() < 0.8:
            rank = rng.choice(list(ranks.values())) if ranks and rng.random() < 0.33 else random_text(rng)
            ranks[url] = rank
            admin.call("POST", f"/v3/group_channels/{url}/metadata", {"metadata": {"rank": rank}})
    return names, ranks


def name_key(text: str) -> bytes:
    """Names: the NFC text case-folded (lowercased, NFC again), U+0001, then the NFC text."""
    exact = unicodedata.normalize("NFC", text)
    return unicodedata.normalize("NFC", exact.lower()).encode("utf-8") + b"\x01" + exact.encode("utf-8")


def expected_by_name(names: Dict[str, str]) -> List[str]:
    return sorted(names, key=lambda url: (name_key(names[url]), url.encode()))


def expected_by_rank(names: Dict[str, str], ranks: Dict[str, str]) -> List[str]:
    return sorted(names, key=lambda url: (0, nfc_key(ranks[url]), url.encode()) if url in ranks else (1, b"", url.encode()))


def server_walk(server: RunningServer, token: str, params: Dict[str, Any], limit: int) -> List[str]:
    """The server's listing walked with its keyset tokens at `limit` a page."""
    return walk_channels(server.url, token, ME, {**params, "limit": limit, "show_empty": "true"})


class AddedRecorder:
    """Counts how often each channel is reported added (and catches any delete)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.added: Dict[str, int] = {}
        self.deleted: List[str] = []

    def __call__(self, change: ChannelChange) -> None:
        with self.lock:
            if change.kind is ChangeKind.ADDED:
                for channel in change.channels:
                    self.added[channel["channel_url"]] = self.added.get(channel["channel_url"], 0) + 1
            elif change.kind is ChangeKind.DELETED:
                self.deleted += change.channel_urls


def collection_walk(client: parley.Client, query: GroupChannelListQuery, what: str) -> List[str]:
    """Pages a collection to the end; the pages, the list and the added events must agree."""
    recorder = AddedRecorder()
    with client.group_channel_collection(query, on_added=recorder, on_updated=lambda change: None,
                                         on_deleted=recorder) as collection:
        pages: List[List[str]] = []
        while collection.has_more:
            pages.append([channel["channel_url"] for channel in collection.load_more().result(TIMEOUT)])
            assert len(pages) < 1000, f"{what}: has_more never became false"
        listed = collection.channel_urls
    walked = [url for page in pages for url in page]
    assert walked == listed, f"{what}: pages {pages} disagree with the list {listed}"
    assert not recorder.deleted, f"{what}: channels reported deleted while paging: {recorder.deleted}"
    # Each channel is handed out exactly once: in a page or as added.
    told: Dict[str, int] = dict(recorder.added)
    for url in walked:
        told[url] = told.get(url, 0) + 1
    assert all(n == 1 for n in told.values()) and set(told) == set(listed), \
        f"{what}: pages {pages} and added events {recorder.added} do not give each of {listed} once"
    return listed


def describe(urls: List[str], names: Dict[str, str]) -> str:
    return "[" + ", ".join(f"{url}:{names.get(url, '')!a}" for url in urls) + "]"


def test_names_and_metadata_values_have_one_total_order_everywhere(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    seed = int(os.environ.get("PARLEY_NAME_ORDER_SEED", "20261123"))
    print(f"PARLEY_NAME_ORDER_SEED={seed}")
    rng = random.Random(seed)
    token = admin.user(ME)
    names, ranks = build_world(admin, rng, 18)
    by_name, by_rank = expected_by_name(names), expected_by_rank(names, ranks)
    orders = [
        ("name", {"order": "channel_name_alphabetical"}, by_name, names),
        ("rank", {"order": "metadata_value_alphabetical", "metadata_order_key": "rank"}, by_rank, ranks),
    ]

    def query_for(params: Dict[str, Any], limit: int) -> GroupChannelListQuery:
        return GroupChannelListQuery(order=Order(params["order"]), metadata_order_key=params.get("metadata_order_key"),
                                     include_empty=True, limit=limit)

    # The server: every limit walks the same list (a keyset page never skips or repeats).
    for label, params, expected, texts in orders:
        for limit in LIMITS:
            walked = server_walk(server, token, params, limit)
            assert walked == expected, \
                f"seed {seed}: server {label} limit {limit}: {describe(walked, texts)} != {describe(expected, texts)}"

    # A collection from the server (a fresh cache each limit), then again from that cache.
    for limit in LIMITS:
        with parley.Client(server_url=server.url, cache_dir=str(tmp_path / f"cache{limit}")) as client:
            client.connect(ME, token).result(TIMEOUT)
            for label, params, expected, texts in orders:
                for source in ("server", "cache"):
                    listed = collection_walk(client, query_for(params, limit), f"seed {seed}: {label} {source} limit {limit}")
                    assert listed == expected, \
                        f"seed {seed}: {label} from the {source}, limit {limit}: {describe(listed, texts)} != {describe(expected, texts)}"
            cached = [channel["channel_url"] for channel in client.cached_channels("channel_name_alphabetical", 100)]
            assert cached == by_name, f"seed {seed}: cached read {describe(cached, names)} != {describe(by_name, names)}"

    # Offline: the server gone, each cache walked again.
    server.process.terminate()
    server.process.wait(timeout=10)
    for limit in LIMITS:
        with parley.Client(server_url=server.url, cache_dir=str(tmp_path / f"cache{limit}"),
                           connect_timeout_ms=300, reconnect_initial_delay_ms=100) as offline:
            offline.connect(ME, token).result(TIMEOUT)
            for label, params, expected, texts in orders:
                listed = collection_walk(offline, query_for(params, limit), f"seed {seed}: {label} offline limit {limit}")
                assert listed == expected, \
                    f"seed {seed}: {label} offline, limit {limit}: {describe(listed, texts)} != {describe(expected, texts)}"


def test_a_cache_of_the_case_sensitive_order_gets_its_name_keys_again(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """Cache migration 11: a cache file whose name keys are the plain NFC texts (schema 10)
    gets the case-insensitive keys when it is opened, as the server computes them."""
    import sqlite3
    token = admin.user(ME)
    names = ["b", "A", "a", "\u00c9clair", "e\u0301clair"]
    for index, name in enumerate(names):
        admin.call("POST", "/v3/group_channels", {"channel_url": f"old{index}", "user_ids": [ME], "name": name})
    query = GroupChannelListQuery(order=Order.CHANNEL_NAME_ALPHABETICAL, include_empty=True, limit=10)
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, token).result(TIMEOUT)
        assert len(collection_walk(client, query, "first")) == len(names)
    (path,) = list((tmp_path / "cache").rglob("*.sqlite"))
    db = sqlite3.connect(path)
    db.execute("UPDATE channels SET name_key = name")
    db.execute("PRAGMA user_version = 10")
    db.commit()
    db.close()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect(ME, token).result(TIMEOUT)
    db = sqlite3.connect(path)
    keys = dict(db.execute("SELECT name, name_key FROM channels"))
    version = db.execute("PRAGMA user_version").fetchone()[0]
    db.close()
    assert version >= 11
    assert {name: key.encode("utf-8") for name, key in keys.items()} == {name: name_key(name) for name in names}
