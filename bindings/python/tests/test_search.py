"""The message search view (include/parley/search.h) against the real server.

The acceptance test drives random messages, edits, deletions, history resets and cache
clears through the server, and after each step checks every open search view against a
brute-force scan of the cache file: all of its messages read with Python's own sqlite3, put
in a fresh FTS5 table of the same tokenizer, searched with the same expression — the same
results, in the same order, with the same messages and snippets — and the hits themselves
against a pure-Python reading of the plain-text rule. Then: a search typed offline finds
what the cache holds and adds a matching message that arrives after reconnecting; bad
params are refused by name; and "search the server too" merges the server's hits."""
from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import parley
from conftest import Admin, RunningServer, listing_for, server_database
from test_engine import RestartableServer, connect, connected, make_client, poll_until

TIMEOUT = 15
VOCABULARY = ["apple", "apricot", "banana", "band", "cherry", "chat", "chart", "delta", "dog", "echo", "Éclair", "eclipse"]


def words(text: str) -> List[str]:
    """Runs of letters and digits: the library's word rule for the Latin texts these tests send
    (`index_words` is the rule itself, for any text)."""
    return [w for w in re.split(r"[\W_]+", text) if w]


def match_expression(text: str) -> Optional[str]:
    found = words(text)
    if not found:
        return None
    parts = [f'"{w}"' for w in found]
    parts[-1] += " *"
    return " AND ".join(parts)


def fold(word: str) -> str:
    import unicodedata
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if not unicodedata.combining(c))


def plain_match(query: str, text: str) -> bool:
    wanted = [fold(w) for w in words(query)]
    have = {fold(w) for w in words(text)}
    return bool(wanted) and all(w in have for w in wanted[:-1]) and any(h.startswith(wanted[-1]) for h in have)


def searched_text(message: Dict[str, Any]) -> Tuple[str, str]:
    text = message.get("message") if isinstance(message.get("message"), str) else ""
    file = message.get("file")
    name = file.get("name") if isinstance(file, dict) and isinstance(file.get("name"), str) else ""
    return text or "", name or ""


def rank_score(query: str, terms: List[str]) -> float:
    """The relevance score of a message whose index terms (text and file name) are `terms`, by
    the documented rule: per query word (the last as a prefix) its occurrences n, saturated as
    n × 2.2 / (n + 1.2), summed."""
    wanted = index_words(query)
    score = 0.0
    for position, word in enumerate(wanted):
        last = position == len(wanted) - 1
        n = float(sum(1 for term in terms if term == word or (last and term.startswith(word))))
        score += n * (1.2 + 1) / (n + 1.2)
    return score


def brute_force(cache_path: Path, query: str, order: str, start: str = "<b>", end: str = "</b>") -> List[Dict[str, Any]]:
    """Every cached message matching `query`, in `order`, by a fresh index of the cache's rows."""
    expression = match_expression(query)
    if expression is None:
        return []
    cache = sqlite3.connect(str(cache_path))
    try:
        rows = cache.execute("SELECT message_id, channel_url, created_at, json FROM messages").fetchall()
    finally:
        cache.close()
    fresh = sqlite3.connect(":memory:")
    fresh.execute("CREATE VIRTUAL TABLE t USING fts5(text, file_name, tokenize = 'unicode61 remove_diacritics 2')")
    keys = {}
    for message_id, channel_url, created_at, text in rows:
        message = json.loads(text)
        fresh.execute("INSERT INTO t (rowid, text, file_name) VALUES (?, ?, ?)", (message_id, *searched_text(message)))
        keys[message_id] = (created_at, message_id, message)
    hits = fresh.execute("SELECT rowid, snippet(t, -1, ?, ?, '…', 16) FROM t WHERE t MATCH ?", (start, end, expression)).fetchall()
    fresh.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    terms: Dict[int, List[str]] = {}
    for term, doc in fresh.execute("SELECT term, doc FROM v"):
        terms.setdefault(doc, []).append(term)
    results = [{"message": keys[rowid][2], "snippet": snippet, "score": rank_score(query, terms[rowid]), "key": keys[rowid][:2]}
               for rowid, snippet in hits]
    # Time order is message_id order (the server never gives a later id an earlier time).
    if order == "time":
        results.sort(key=lambda r: r["key"][1], reverse=True)
    else:
        results.sort(key=lambda r: (-r["score"], -r["key"][1]))
    return results


def check_view(search: parley.MessageSearch, cache_path: Path, order: str) -> Optional[str]:
    """None when the view equals the brute-force search of the cache (its window of it), else why not."""
    shown = search.results
    expected = brute_force(cache_path, search.query, order)
    if order == "time":
        if search.has_more:
            if not shown:
                return "has_more with nothing shown"
            oldest = shown[-1]["message"]["message_id"]
            expected = [r for r in expected if r["key"][1] >= oldest]
    else:
        if search.has_more:
            expected = expected[:len(shown)]
    got_ids = [r["message"]["message_id"] for r in shown]
    want_ids = [r["message"]["message_id"] for r in expected]
    if got_ids != want_ids:
        return f"'{search.query}' ({order}): shown {got_ids}, expected {want_ids}"
    for got, want in zip(shown, expected):
        if got["message"] != want["message"] or got["snippet"] != want["snippet"] or got["origin"] != "cache":
            return f"'{search.query}': result {got} differs from {want}"
        text, name = searched_text(got["message"])
        if not plain_match(search.query, text + " " + name):
            return f"'{search.query}' does not match {text!r} / {name!r} by the plain-text rule"
    return None


def wait_equal(views: List[Tuple[parley.MessageSearch, str]], cache_path: Path, what: str) -> None:
    last: List[Optional[str]] = [None]

    def all_equal() -> bool:
        for search, order in views:
            problem = check_view(search, cache_path, order)
            if problem:
                last[0] = problem
                return False
        return True

    try:
        poll_until(all_equal, timeout=TIMEOUT)
    except AssertionError:
        raise AssertionError(f"after {what}: {last[0]}") from None


def cached_texts(client: parley.Client, channel_url: str) -> Dict[int, str]:
    return {m["message_id"]: m["message"] for m in client.cached_messages(channel_url, limit=500)}


def listed_texts(server: RunningServer, token: str, channel_url: str) -> Dict[int, str]:
    return {m["message_id"]: m["message"] for m in listing_for(server.url, token, channel_url)}


def sentence(rng: random.Random) -> str:
    return (" " if rng.random() < 0.5 else ", ").join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 5)))


# PARLEY_SEARCH_SEEDS=N runs N seeds (a longer campaign); the suite runs three.
@pytest.mark.plain_cache_file
@pytest.mark.parametrize("seed", range(1, 1 + int(os.environ.get("PARLEY_SEARCH_SEEDS", "3"))))
def test_search_views_equal_a_brute_force_scan_of_the_cache_after_every_step(server: RunningServer, admin: Admin,
                                                                             tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    channels = [admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": f"room{i}"})["channel_url"]
                for i in range(3)]
    for url in channels:
        for _ in range(8):
            admin.send(url, "bob", sentence(rng))
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        cache_path = next((tmp_path / "cache").rglob("alice.sqlite"))

        def open_collections() -> List[parley.MessageCollection]:
            """A started view of each channel, as an application showing them has (its loads fill the cache)."""
            opened = []
            for url in channels:
                collection = client.message_collection(url, previous_result_size=100)
                first, remote = collection.start()
                first.result(TIMEOUT)
                remote.result(TIMEOUT)
                opened.append(collection)
            return opened

        collections = open_collections()
        views: List[Tuple[parley.MessageSearch, str]] = []
        changes: List[parley.SearchChange] = []
        for query, order, limit in [("ap", "time", 3), ("cha", "relevance", 4), ("banana d", "time", 50), ("eclair", "relevance", 50),
                                    ("dog, echo!", "time", 2), ("e", "relevance", 5)]:
            search = client.search_messages(query, order=order, limit=limit)
            search.add_listener(changes.append)
            search.load_more().result(TIMEOUT)
            views.append((search, order))
        wait_equal(views, cache_path, "the first loads")
        sent: List[Tuple[str, int]] = []
        shown_total = 0
        for step in range(40):
            choice = rng.random()
            url = rng.choice(channels)
            if choice < 0.45 or not sent:
                message = admin.send(url, rng.choice(["alice", "bob"]), sentence(rng))
                sent.append((url, message["message_id"]))
                what = f"step {step}: a message"
            elif choice < 0.65:
                url, message_id = rng.choice(sent)
                try:
                    admin.call("PUT", f"/v3/group_channels/{url}/messages/{message_id}", {"message_type": "MESG", "message": sentence(rng)})
                except AssertionError:
                    continue  # deleted, or gone with a history reset
                what = f"step {step}: an edit"
            elif choice < 0.8:
                url, message_id = sent.pop(rng.randrange(len(sent)))
                try:
                    admin.call("DELETE", f"/v3/group_channels/{url}/messages/{message_id}")
                except AssertionError:
                    continue
                what = f"step {step}: a deletion"
            elif choice < 0.9:
                client.reset_my_history(channel_url=url).result(TIMEOUT)
                sent = [(u, m) for u, m in sent if u != url]
                what = f"step {step}: a history reset of {url}"
            else:
                client.clear_cached_data()
                for collection in collections:
                    collection.dispose()
                collections = open_collections()
                what = f"step {step}: a cache clear and reload"
            # The step reached the cache (then the views must follow it).
            for room in channels:
                poll_until(lambda: cached_texts(client, room) == listed_texts(server, tokens["alice"], room), timeout=TIMEOUT)
            if rng.random() < 0.3:
                search, _ = rng.choice(views)
                if search.has_more:
                    search.load_more().result(TIMEOUT)
            wait_equal(views, cache_path, what)
            shown_total += sum(len(search.results) for search, _ in views)
        # The views did follow the cache: every kind of change was reported (the results change
        # just before the callback that reports it), and they show results.
        poll_until(lambda: {change.kind for change in changes} == set(parley.SearchChangeKind), timeout=TIMEOUT)
        assert shown_total > 10 * len(views)
        for search, _ in views:
            search.dispose()
        for collection in collections:
            collection.dispose()


def test_an_offline_search_finds_cached_messages_and_goes_live_after_reconnecting(tmp_path: Path) -> None:
    restartable = RestartableServer(server_database(tmp_path))
    restartable.start()
    try:
        admin = Admin(restartable.running())
        tokens = {name: admin.user(name) for name in ("alice", "bob")}
        url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "trip"})["channel_url"]
        admin.send(url, "bob", "The café near the station opens at eight")
        admin.send(url, "bob", "Train tickets are booked")
        with connected(restartable.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
            with client.message_collection(url) as collection:
                first, remote = collection.start()
                first.result(TIMEOUT)
                remote.result(TIMEOUT)
            restartable.stop()
            recorder.wait(lambda: "reconnect_started" in recorder.names())
            added: List[List[Dict[str, Any]]] = []
            lock = threading.Lock()

            def on_added(results: List[Dict[str, Any]]) -> None:
                with lock:
                    added.append(results)

            with client.search_messages("CAFE sta", on_added=on_added, highlight_start="[", highlight_end="]") as search:
                page = search.load_more().result(TIMEOUT)
                assert [r["message"]["message"] for r in page] == ["The café near the station opens at eight"]
                assert page[0]["snippet"] == "The [café] near the [station] opens at eight"
                assert page[0]["origin"] == "cache" and not search.has_more
                restartable.start()
                recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
                admin.send(url, "bob", "Meet me at the cafe by the station")
                poll_until(lambda: len(search.results) == 2)
                assert [r["message"]["message"] for r in search.results] == [
                    "Meet me at the cafe by the station", "The café near the station opens at eight"]
                # The list is published on the callback thread as the callback is delivered,
                # just before the handler runs: it can show the result a moment before on_added.
                poll_until(lambda: len(added) >= 1)
                with lock:
                    assert [[r["message"]["message"] for r in batch] for batch in added] == [["Meet me at the cafe by the station"]]
    finally:
        restartable.stop()


def test_bad_params_are_refused_by_name(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user("alice")
    client, recorder = make_client(server.url, tmp_path / "cache")
    with client:
        with pytest.raises(parley.InvalidState):
            client.search_messages("hello")  # no cache before connecting
        connect(client, recorder, "alice", token)
        for kwargs, field in [({"query": ""}, "query"), ({"query": "   "}, "query"), ({"query": "x" * 1001}, "query"),
                              ({"query": "a", "limit": 0}, "limit"), ({"query": "a", "limit": 101}, "limit"),
                              ({"query": "a", "channel_urls": ["a,b"]}, "channel_urls"),
                              ({"query": "a", "highlight_start": "<" * 17}, "highlight_start"),
                              ({"query": "a", "message_ts_from": 5, "message_ts_to": 4}, "message_ts_from"),
                              ({"query": "a", "advanced_query": True, "search_server": True}, "search_server"),
                              ({"query": "a AND (", "advanced_query": True}, "search query"),
                              ({"query": "a", "order": "size"}, "order")]:
            with pytest.raises(parley.InvalidArgument, match=field):
                client.search_messages(**kwargs)
        # Text without words is a valid query that finds nothing.
        with client.search_messages("*** ()") as search:
            assert search.load_more().result(TIMEOUT) == [] and not search.has_more
        search = client.search_messages("a")
        search.dispose()
        with pytest.raises(parley.InvalidHandle):
            search.load_more()


def test_a_search_says_how_fresh_it_is_through_cuts(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    from parley import Freshness as F, PageOrigin
    from test_fault_injection import FaultyProxy
    from test_freshness import ME, Seen, fill_cache, proxied_client, reached, two_rooms, wait_for

    token = two_rooms(admin, " lunch")
    proxy = FaultyProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        cache_dir = tmp_path / "cache"
        fill_cache(proxy, cache_dir, token)  # the newest 10 of each channel cached
        proxy.go_offline()
        with proxied_client(proxy, cache_dir) as client:
            client.connect(ME, token).result(TIMEOUT)
            local_seen, server_seen = Seen(), Seen()
            errors: List[parley.ParleyError] = []
            local = client.search_messages("lunch", limit=50, on_freshness_changed=local_seen)
            remote = client.search_messages("lunch", limit=50, search_server=True, on_freshness_changed=server_seen,
                                            on_error=errors.append)
            local_seen.view, server_seen.view = local, remote
            assert local.freshness is F.OFFLINE and remote.freshness is F.OFFLINE
            # Offline both answer from the cache; the server's page is owed, its error reported.
            page = local.load_more().result(TIMEOUT)
            assert len(page) == 20 and page.origin is PageOrigin.CACHE and not local.has_more
            page = remote.load_more().result(TIMEOUT)
            assert len(page) == 20 and page.origin is PageOrigin.CACHE and remote.has_more
            assert all(r["origin"] == "cache" for r in page)
            poll_until(lambda: len(errors) == 1)
            assert isinstance(errors[0], parley.NetworkError)
            assert local_seen.snapshot() == [] and server_seen.snapshot() == []

            # Back: the cache's search is live once caught up; the server's waits for its answer.
            proxy.come_back()
            wait_for(reached(local_seen, F.LIVE), "the cache's search to be live")
            wait_for(reached(server_seen, F.CACHED), "the server search to be caught up")
            assert local_seen.snapshot() == [F.CATCHING_UP, F.LIVE]
            assert server_seen.snapshot() == [F.CATCHING_UP, F.CACHED]
            more = remote.load_more().result(TIMEOUT)
            assert more.origin is PageOrigin.SERVER and remote.last_page_origin is PageOrigin.SERVER
            assert len(remote.results) == 50 and remote.has_more  # the server's first page of 50
            remote.load_more().result(TIMEOUT)
            assert not remote.has_more
            # The server's 60 hits, the cache's 20 among them: 60 results, each once, newest first.
            ids = [r["message"]["message_id"] for r in remote.results]
            assert len(ids) == 60 and ids == sorted(set(ids), reverse=True)
            assert sum(r["origin"] == "server" for r in remote.results) == 40
            wait_for(reached(server_seen, F.LIVE), "the server search to be live")

            proxy.go_offline()
            wait_for(reached(local_seen, F.OFFLINE), "offline")
            wait_for(reached(server_seen, F.OFFLINE), "offline")
            assert local_seen.mismatches == [] and server_seen.mismatches == []
            local.dispose()
            remote.dispose()
    finally:
        proxy.close()


def server_search(server: RunningServer, token: str, query: str, sort_field: str) -> List[Dict[str, Any]]:
    """Every page of the server's own search for the token's user."""
    import requests

    results: List[Dict[str, Any]] = []
    params: Dict[str, Any] = {"query": query, "sort_field": sort_field, "limit": 7}
    while True:
        answer = requests.get(f"{server.url}/v3/search/messages", params=params, headers={"Session-Key": token}, timeout=10).json()
        results += answer["results"]
        if not answer["has_next"]:
            return results
        params["token"] = answer["next"]


@pytest.mark.parametrize("order", ["time", "relevance"])
def test_searching_the_server_too_merges_its_hits_with_the_cache_s(server: RunningServer, admin: Admin, tmp_path: Path,
                                                                     order: str) -> None:
    rng = random.Random(5)
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    for url in ("room0", "room1"):
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": url})
        for _ in range(40):
            admin.send(url, "bob", sentence(rng))
    admin.call("POST", "/v3/group_channels", {"user_ids": ["bob"], "channel_url": "private"})
    admin.send("private", "bob", "apple apple apple")  # not alice's: never found
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        with client.message_collection("room0", previous_result_size=15) as view:
            view.start()[1].result(TIMEOUT)  # the cache holds room0's newest 15, nothing of room1
        query = "ap"
        truth = server_search(server, tokens["alice"], query, "ts" if order == "time" else "score")
        listed = [m for url in ("room0", "room1") for m in listing_for(server.url, tokens["alice"], url)]
        assert sorted(r["message"]["message_id"] for r in truth) == sorted(
            m["message_id"] for m in listed if plain_match(query, m["message"]))
        with client.search_messages(query, order=order, limit=6, search_server=True) as search:
            pages = 0
            while search.has_more and pages < 50:
                search.load_more().result(TIMEOUT)
                pages += 1
            shown = search.results
            cached = {m["message_id"]: m for m in client.cached_messages("room0", limit=100)}
            ids = [r["message"]["message_id"] for r in shown]
            assert len(ids) == len(set(ids)), "a message shown twice"
            assert sorted(ids) == sorted(r["message"]["message_id"] for r in truth)
            if order == "time":
                assert ids == sorted(ids, reverse=True)
            else:
                # The server's order for everything it returned (the cache holds nothing it did not).
                assert ids == [r["message"]["message_id"] for r in truth]
            for result in shown:
                message_id = result["message"]["message_id"]
                if message_id in cached:
                    assert result["origin"] == "cache" and result["message"] == cached[message_id]
                else:
                    assert result["origin"] == "server"
                    server_copy = next(r for r in truth if r["message"]["message_id"] == message_id)
                    assert result["message"]["message"] == server_copy["message"]["message"]
                    assert result["snippet"] == server_copy["snippet"]
            # A server-only hit follows its message's events: edited, then deleted.
            target = next(r for r in shown if r["origin"] == "server")
            target_id = target["message"]["message_id"]
            channel = target["message"]["channel_url"]
            admin.call("PUT", f"/v3/group_channels/{channel}/messages/{target_id}", {"message_type": "MESG", "message": "apricot edited"})
            poll_until(lambda: any(r["message"]["message_id"] == target_id and r["message"]["message"] == "apricot edited"
                                   for r in search.results))
            admin.call("DELETE", f"/v3/group_channels/{channel}/messages/{target_id}")
            poll_until(lambda: all(r["message"]["message_id"] != target_id for r in search.results))


def index_words(text: str) -> List[str]:
    """The words the cache's index makes of `text`: a fresh FTS5 table with the cache's tokenizer,
    read back through fts5vocab (the same SQLite library the engine links)."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        db.execute("INSERT INTO t (rowid, text) VALUES (1, ?)", (text,))
        return [term for (term,) in db.execute("SELECT term FROM v ORDER BY offset")]
    finally:
        db.close()


# One message for each kind of text whose words the Unicode tables of Swift and of SQLite's
# tokenizer tell apart; each holds a word of its own ("k1".."k9") besides the sample.
WORD_CLASS_MESSAGES = {
    "circled": "k1 circled \u24d0 marker probe",               # ⓐ: a symbol (So), no letter for the index
    "overlay": "k2 stru\u0336ck through",                       # U+0336: a mark outside the tokenizer's diacritics
    "acute": "k3 re\u0301sume\u0301 draft",                     # U+0301 inside a word: belongs to it, dropped
    "skin": "k4 thumbs \U0001F44D\U0001F3FD up",                # 👍🏽: the modifier is newer than SQLite's tables
    "family": "k5 family \U0001F468\u200d\U0001F469\u200d\U0001F467 photo",  # an emoji ZWJ sequence of older emoji
    "coder": "k6 coder \U0001F469\U0001F3FD\u200d\U0001F4BB at work",        # a ZWJ sequence with a skin tone
    "vithkuqi": "k7 vithkuqi \U00010570\U00010597 letters",     # letters of Unicode 14, unknown to SQLite's tables
    "greek": "k8 \u03ac\u03bb\u03c6\u03b1 \u1f08\u03b8\u1fc6\u03bd\u03b1\u03b9",  # άλφα Ἀθῆναι: accents kept
    "cyrillic": "k9 \u0451\u043b\u043a\u0430 \u0439",             # ёлка й: accents kept
}

# What each query typed finds: the same words on both sides, whatever the class.
WORD_CLASS_QUERIES = [
    ("circled \u24d0", {"circled"}), ("\u24d0 marker", {"circled"}), ("marker \u24d0", {"circled"}),
    ("\u24d0 probe k1", {"circled"}), ("\u24d0", set()),
    ("stru\u0336ck", {"overlay"}), ("through stru\u0336", {"overlay"}), ("ck", {"overlay"}), ("struck", set()),
    ("r\u00e9sum\u00e9", {"acute"}), ("re\u0301sume\u0301 draft", {"acute"}), ("RESUME", {"acute"}), ("resu\u0301", {"acute"}),
    ("\U0001F44D\U0001F3FD", {"skin", "coder"}), ("\U0001F44D\U0001F3FD up", {"skin"}), ("\U0001F44D up", {"skin"}),
    ("\U0001F44D\U0001F3FE up", set()), ("thumbs \U0001F44D\U0001F3FD", {"skin"}),
    ("\U0001F468\u200d\U0001F469\u200d\U0001F467 photo", {"family"}), ("\U0001F468\u200d\U0001F469\u200d\U0001F467", set()),
    ("\U0001F469\U0001F3FD\u200d\U0001F4BB work", {"coder"}), ("coder \U0001F469\U0001F3FD\u200d\U0001F4BB", {"coder"}),
    ("\U00010570\U00010597", {"vithkuqi"}), ("vithkuqi \U00010570", {"vithkuqi"}), ("\U00010597 k7", set()),
    ("\U00010597\U00010597", set()),  # no case folding for letters SQLite's tables lack
    ("\u03ac\u03bb\u03c6\u03b1", {"greek"}), ("\u0386\u039b\u03a6\u0391", {"greek"}), ("\u03b1\u03bb\u03c6\u03b1", set()),
    ("\u1f08\u03b8\u1fc6\u03bd\u03b1\u03b9 k8", {"greek"}), ("\u03b1\u03b8\u03b7\u03bd\u03b1\u03b9", set()),
    ("\u0451\u043b\u043a\u0430", {"cyrillic"}), ("\u0415\u041b\u041a\u0410", set()), ("\u0419 k9", {"cyrillic"}),
]


@pytest.mark.parametrize("order", ["time", "relevance"])
def test_a_query_is_split_into_words_as_the_index_splits_messages(server: RunningServer, admin: Admin, tmp_path: Path,
                                                                  order: str) -> None:
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "scripts"})["channel_url"]
    ids = {admin.send(url, "bob", text)["message_id"]: name for name, text in WORD_CLASS_MESSAGES.items()}
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        with client.message_collection(url, previous_result_size=50) as view:
            view.start()[1].result(TIMEOUT)
        assert len(client.cached_messages(url, limit=50)) == len(WORD_CLASS_MESSAGES)
        wrong = []
        for query, expected in WORD_CLASS_QUERIES:
            with client.search_messages(query, order=order, limit=50) as search:
                found = {ids[r["message"]["message_id"]] for r in search.load_more().result(TIMEOUT)}
            # The rule the expectation follows: every word the index makes of the query is one of
            # the message's, the last one the start of one.
            wanted = index_words(query)
            by_rule = {name for name, text in WORD_CLASS_MESSAGES.items()
                       if wanted and all(w in index_words(text) for w in wanted[:-1])
                       and any(w.startswith(wanted[-1]) for w in index_words(text))}
            assert by_rule == expected, f"{query!r}: the table says {expected}, the tokenizer's words {by_rule}"
            if found != expected:
                wrong.append(f"{query!r} ({wanted}) found {sorted(found)}, expected {sorted(expected)}")
        assert wrong == [], "\n".join(wrong)


def window_room(admin: Admin, fillers: int = 30) -> Tuple[Dict[str, str], str]:
    """Alice and bob in a channel with `fillers` messages without the searched word (so that it
    stays rare and BM25 ranks by how often and in how short a text it occurs)."""
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "window"})["channel_url"]
    for n in range(fillers):
        admin.send(url, "bob", f"filler number {n} about nothing in particular")
    return tokens, url


def ids_of(results: List[Dict[str, Any]]) -> List[int]:
    return [r["message"]["message_id"] for r in results]


def fresh_search(client: parley.Client, query: str, order: str, limit: int) -> Tuple[List[int], bool]:
    """What a new search shows after one load: the view it is compared with."""
    with client.search_messages(query, order=order, limit=limit) as search:
        search.load_more().result(TIMEOUT)
        return ids_of(search.results), search.has_more


@pytest.mark.parametrize("order", ["time", "relevance"])
def test_a_window_shrunk_by_deletions_says_it_shows_everything_and_refills_to_its_size(
        server: RunningServer, admin: Admin, tmp_path: Path, order: str) -> None:
    tokens, url = window_room(admin)
    matches = [admin.send(url, "bob", "probe " + "word " * (n % 7))["message_id"] for n in range(25)]
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        with client.message_collection(url, previous_result_size=100) as view:
            view.start()[1].result(TIMEOUT)
        with client.search_messages("probe", order=order, limit=20) as search:
            search.load_more().result(TIMEOUT)
            assert len(search.results) == 20 and search.has_more
            # Down to 18 matches: two of those shown go, and the five past them.
            shown = ids_of(search.results)
            gone = shown[:2] + [m for m in matches if m not in shown]
            assert len(gone) == 7
            for message_id in gone:
                admin.call("DELETE", f"/v3/group_channels/{url}/messages/{message_id}")
            poll_until(lambda: len(client.cached_messages(url, limit=100)) == 30 + 18)
            poll_until(lambda: len(search.results) == 18)
            assert sorted(ids_of(search.results)) == sorted(m for m in matches if m not in gone)
            poll_until(lambda: not search.has_more)  # all 18 are shown: nothing more exists
            # Four new matches: a time view adds them at the top (its window reaches the oldest
            # match); a relevance view shows its first 20, as a new search with one load does.
            for n in range(4):
                admin.send(url, "bob", f"probe new {n}")
            poll_until(lambda: len(client.cached_messages(url, limit=100)) == 30 + 22)
            if order == "time":
                poll_until(lambda: len(search.results) == 22)
                assert not search.has_more
                assert ids_of(search.results) == sorted(ids_of(search.results), reverse=True)
            else:
                # The view follows the cache a moment after each write: it settles on the new search's page.
                expected = fresh_search(client, "probe", order, 20)
                assert expected[1] and len(expected[0]) == 20
                poll_until(lambda: (ids_of(search.results), search.has_more) == expected)


@pytest.mark.parametrize("order", ["time", "relevance"])
def test_better_matches_after_the_last_load_fill_a_relevance_window_to_its_size_only(
        server: RunningServer, admin: Admin, tmp_path: Path, order: str) -> None:
    tokens, url = window_room(admin)
    weak = [admin.send(url, "bob", "probe in a long message with many other words around it " + str(n))["message_id"]
            for n in range(3)]
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        with client.message_collection(url, previous_result_size=100) as view:
            view.start()[1].result(TIMEOUT)
        deleted: List[List[int]] = []
        with client.search_messages("probe", order=order, limit=5, on_deleted=lambda r: deleted.append(ids_of(r))) as search:
            search.load_more().result(TIMEOUT)
            assert sorted(ids_of(search.results)) == sorted(weak) and not search.has_more
            strong = [admin.send(url, "bob", f"probe probe {n}")["message_id"] for n in range(4)]
            poll_until(lambda: len(client.cached_messages(url, limit=100)) == 30 + 7)
            if order == "time":
                # Newer: added at the top; the window is every match, more exist nowhere.
                poll_until(lambda: len(search.results) == 7)
                assert ids_of(search.results) == sorted(strong, reverse=True) + sorted(weak, reverse=True)
                assert not search.has_more and deleted == []
            else:
                # Better: the first five are the four new ones and the best of the old; the two
                # pushed past the window are deleted, and more exist than it shows.
                poll_until(lambda: set(strong) <= set(ids_of(search.results)))
                poll_until(lambda: len(search.results) == 5)
                assert set(ids_of(search.results)[:4]) == set(strong)
                assert ids_of(search.results)[4] in weak
                poll_until(lambda: search.has_more)
                # The list changes just before the callbacks that report it run (docs/THREADING.md, rule 7).
                poll_until(lambda: sum(len(batch) for batch in deleted) >= 2)
                assert sorted(m for batch in deleted for m in batch) == sorted(set(weak) - {ids_of(search.results)[4]})
                assert (ids_of(search.results), search.has_more) == fresh_search(client, "probe", order, 5)


def occurrence_score(occurrences: int) -> float:
    """The documented relevance score of a message in which the one query word occurs n times."""
    return occurrences * 2.2 / (occurrences + 1.2)


def test_relevance_ranks_a_window_of_the_newest_matches_and_loads_older_windows_after_it(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    tokens, url = window_room(admin, fillers=10)
    # 120 matches, the word one to four times in each: the truth is what was sent.
    sent = []
    for n in range(120):
        occurrences = 1 + (n * 7) % 4
        message = admin.send(url, "bob", "probe " * occurrences + f"number{n}")
        sent.append((message["message_id"], occurrences))
    admin.send(url, "bob", "rare words only once")
    newest_first = sorted(sent, reverse=True)
    windows = [newest_first[:50], newest_first[50:100], newest_first[100:]]

    def ranked(window: List[Tuple[int, int]]) -> List[int]:
        return [message_id for message_id, occurrences in sorted(window, key=lambda m: (-occurrence_score(m[1]), -m[0]))]

    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        with client.message_collection(url, previous_result_size=100) as view:
            view.start()[1].result(TIMEOUT)
            while view.has_previous:
                view.load_previous().result(TIMEOUT)
        assert len(client.cached_messages(url, limit=200)) == 10 + 120 + 1
        deleted: List[int] = []
        with client.search_messages("probe", order="relevance", limit=20, relevance_window=50,
                                    on_deleted=lambda results: deleted.extend(ids_of(results))) as search:
            assert search.relevance_window == parley.RelevanceWindow(0, False)
            page = search.load_more().result(TIMEOUT)
            # The newest 50 are ranked, by score then newest first; the older 70 wait below.
            assert ids_of(page) == ranked(windows[0])[:20]
            assert [r["score"] for r in page] == [occurrence_score(dict(sent)[i]) for i in ids_of(page)]
            assert search.relevance_window == parley.RelevanceWindow(50, True) and search.has_more
            # The next pages stay in that window.
            search.load_more().result(TIMEOUT)
            search.load_more().result(TIMEOUT)
            assert ids_of(search.results) == ranked(windows[0]) and not search.has_more
            # Older: the next 50, then the last 20 (no older then), then nothing moves.
            page = search.load_older().result(TIMEOUT)
            assert ids_of(page) == ranked(windows[1])[:20] == ids_of(search.results)
            poll_until(lambda: sorted(deleted) == sorted(m for m, _ in windows[0]))
            assert search.relevance_window == parley.RelevanceWindow(50, True) and search.has_more
            page = search.load_older().result(TIMEOUT)
            assert ids_of(page) == ranked(windows[2])[:20] == ids_of(search.results)
            assert search.relevance_window == parley.RelevanceWindow(20, False) and not search.has_more
            assert list(search.load_older().result(TIMEOUT)) == []
            assert ids_of(search.results) == ranked(windows[2])[:20]
        with client.search_messages("probe", order="relevance", limit=5, relevance_window=50) as search:
            search.load_more().result(TIMEOUT)
            assert ids_of(search.results) == ranked(windows[0])[:5]
            # A new match joins the newest window (it is one of the newest matches).
            best = admin.send(url, "bob", "probe " * 6)["message_id"]
            poll_until(lambda: ids_of(search.results)[:1] == [best])
            poll_until(lambda: search.relevance_window == parley.RelevanceWindow(51, True))
        # Fewer matches than the window: every one is ranked, none older.
        with client.search_messages("rare", order="relevance", relevance_window=50) as search:
            search.load_more().result(TIMEOUT)
            assert len(search.results) == 1 and search.relevance_window == parley.RelevanceWindow(1, False)
        for size in (0, -5, 1_000_001):
            with pytest.raises(parley.InvalidArgument, match="relevance_window"):
                client.search_messages("probe", order="relevance", relevance_window=size)
        with client.search_messages("probe", order="time") as search:
            with pytest.raises(parley.InvalidState, match="relevance order"):
                search.load_older()
            search.load_more().result(TIMEOUT)
            assert search.relevance_window == parley.RelevanceWindow(0, False)
