"""The cache equals the server, for what the server keeps per user: one test per defect
that used to make them differ (unread counts, hiding, metadata, changelog deletions, the
last message after a history reset)."""
from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import requests

from conftest import Admin, RunningServer
from test_engine import connect, connected, make_client, poll_until, short_retention
from tcp_relay import AnswerHoldingProxy, StreamHoldingProxy

FULL_VIEW = {"show_member": "true", "show_metadata": "true", "show_metacounter": "true"}
PRESENCE_FIELDS = ("is_online", "last_seen_at")


def server_channel(server_url: str, token: str, channel_url: str) -> Dict[str, Any]:
    """The channel as the server shows it to the token's user, with everything a cache keeps."""
    response = requests.get(f"{server_url}/v3/group_channels/{channel_url}", params=FULL_VIEW,
                            headers={"Session-Key": token}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def without_presence(channel: Dict[str, Any]) -> Dict[str, Any]:
    result = dict(channel)
    if "members" in result:
        result["members"] = [{k: v for k, v in m.items() if k not in PRESENCE_FIELDS} for m in result["members"]]
    return result


def wait_equal(client, server_url: str, token: str, channel_url: str) -> Dict[str, Any]:
    """Waits until the cached channel equals the server's, field by field; returns it."""
    def same() -> bool:
        cached = client.cached_channel(channel_url)
        return cached is not None and without_presence(cached) == without_presence(server_channel(server_url, token, channel_url))
    try:
        poll_until(same, timeout=10)
    except AssertionError:
        cached = without_presence(client.cached_channel(channel_url) or {})
        truth = without_presence(server_channel(server_url, token, channel_url))
        diff = {k: (truth.get(k), cached.get(k)) for k in set(truth) | set(cached) if truth.get(k) != cached.get(k)}
        raise AssertionError(f"cached channel differs from the server's (server, cache): {diff}")
    return client.cached_channel(channel_url)


def setup(admin: Admin):
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "sync-room",
                                                    "name": "Sync", "operator_ids": ["alice"]})["channel_url"]
    return tokens, url


def test_unread_counts_are_the_recipients_own(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        for i in range(3):
            admin.send(url, "bob", f"unread {i}", mentioned_user_ids=["alice"] if i == 0 else [])
        recorder.wait(lambda: len(recorder.of("message_received")) == 3)
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["unread_message_count"] == 3 and cached["unread_mention_count"] == 1
        # The event carried alice's own count, not bob's (who sent them: 0 unread).
        assert recorder.of("message_received")[-1]["channel"]["unread_message_count"] == 3
        client.mark_as_read(channel_url=url).result(10)
        assert wait_equal(client, server.url, tokens["alice"], url)["unread_message_count"] == 0


def test_hiding_is_cached_and_hidden_messages_leave_the_cache(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        for i in range(3):
            admin.send(url, "bob", f"before hiding {i}")
        recorder.wait(lambda: len(recorder.of("message_received")) == 3)
        assert len(client.cached_messages(url)) == 3
        client.hide_channel(channel_url=url, allow_auto_unhide=False).result(10)
        # The completion runs once the cache shows the change (the stream's event brought it).
        assert client.cached_channel(url)["hidden_state"] == "hidden_prevent_auto_unhide"
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["hidden_state"] == "hidden_prevent_auto_unhide" and cached["is_hidden"] is True
        assert len(client.cached_messages(url)) == 3  # hiding alone keeps the history
        client.unhide_channel(channel_url=url).result(10)
        assert client.cached_channel(url)["hidden_state"] == "unhidden"
        assert wait_equal(client, server.url, tokens["alice"], url)["hidden_state"] == "unhidden"
        client.hide_channel(channel_url=url, hide_previous_messages=True).result(10)
        assert client.cached_channel(url)["hidden_state"] == "hidden_allow_auto_unhide"
        assert client.cached_messages(url) == []
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["hidden_state"] == "hidden_allow_auto_unhide" and "last_message" not in cached
        poll_until(lambda: client.cached_messages(url) == [], timeout=10)
        # A new message unhides the channel and is the only one the user sees.
        admin.send(url, "bob", "after hiding")
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["hidden_state"] == "unhidden"
        poll_until(lambda: [m["message"] for m in client.cached_messages(url)] == ["after hiding"], timeout=10)


def test_metadata_and_metacounters_are_cached_live_and_after_being_away(server: RunningServer, admin: Admin,
                                                                       tmp_path: Path) -> None:
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        admin.call("POST", f"/v3/group_channels/{url}/metadata", {"metadata": {"topic": "cats", "color": "red"}})
        admin.call("POST", f"/v3/group_channels/{url}/metacounter", {"metacounter": {"likes": 2}})
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["metadata"] == {"topic": "cats", "color": "red"} and cached["metacounter"] == {"likes": 2}
        admin.call("DELETE", f"/v3/group_channels/{url}/metadata/color")
        admin.call("PUT", f"/v3/group_channels/{url}/metacounter", {"metacounter": {"likes": 3}, "mode": "increase"})
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["metadata"] == {"topic": "cats"} and cached["metacounter"] == {"likes": 5}
        client.disconnect()
        admin.call("PUT", f"/v3/group_channels/{url}/metadata", {"metadata": {"topic": "dogs"}})
        admin.call("DELETE", f"/v3/group_channels/{url}/metacounter/likes")
        connect(client, recorder, "alice", tokens["alice"])
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert cached["metadata"] == {"topic": "dogs"} and cached["metacounter"] == {}


def test_last_message_respects_the_users_history_reset(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "bob", tokens["bob"]) as (client, recorder):
        admin.send(url, "alice", "before the reset")
        recorder.wait(lambda: len(recorder.of("message_received")) == 1)
        client.reset_my_history(channel_url=url).result(10)
        # An event about the channel that brings no message: bob's copy has no last message.
        admin.call("PUT", f"/v3/group_channels/{url}", {"name": "Renamed"})
        renamed = lambda: [e for e in recorder.of("channel_changed") if e["channel"]["name"] == "Renamed"]
        recorder.wait(lambda: len(renamed()) == 1)
        assert "last_message" not in renamed()[0]["channel"]
        cached = wait_equal(client, server.url, tokens["bob"], url)
        assert cached["name"] == "Renamed" and "last_message" not in cached
        assert client.cached_messages(url) == []


def test_changelog_deletions_are_reported_and_applied(tmp_path: Path) -> None:
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        tokens, url = setup(admin)
        gone = admin.send(url, "bob", "will be deleted")
        admin.send(url, "bob", "stays")
        with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
            client.list_messages(channel_url=url).result(10)
            other = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "leaving"})
            poll_until(lambda: client.cached_channel(other["channel_url"]) is not None)
            assert len(client.cached_messages(url)) == 2
            client.disconnect()
            # More changes than the server keeps events for: only changelogs can tell.
            admin.call("DELETE", f"/v3/group_channels/{url}/messages/{gone['message_id']}")
            admin.call("PUT", "/v3/group_channels/leaving/leave", {"user_ids": ["alice"]})
            for i in range(5):
                admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {i}"})
            connect(client, recorder, "alice", tokens["alice"])
            recorder.wait(lambda: recorder.of("channel_changelog_deleted") == [{"channel_url": "leaving"}])
            recorder.wait(lambda: recorder.of("message_changelog_deleted")
                          == [{"channel_url": url, "message_id": gone["message_id"]}])
            assert client.cached_channel("leaving") is None
            assert [m["message"] for m in client.cached_messages(url)] == ["stays"]
            wait_equal(client, server.url, tokens["alice"], url)


def caught_up(client, recorder) -> None:
    """Reconnects and waits for the catch-up that follows (`connected` comes before the first
    one ends; `reconnect_succeeded` after it)."""
    done = len([n for n in recorder.names() if n == "reconnect_succeeded"])
    client.reconnect()
    recorder.wait(lambda: len([n for n in recorder.names() if n == "reconnect_succeeded"]) > done)


def cache_rows(path: Path) -> Dict[str, Any]:
    """Every row of every table of a closed cache file (virtual tables read through their own
    tables), sorted; the positions apart (the resume point, the changelog tokens)."""
    # Opened as it is: a cleanly closed file has everything in it (its WAL is empty or gone).
    with contextlib.closing(sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?immutable=1", uri=True)) as db:
        names = [name for (name,) in db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        rows = {name: sorted(db.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr) for name in names}
    positions = [row for row in rows["meta"] if row[0] == "last_event_id"] + rows.pop("sync_tokens")
    rows["meta"] = [row for row in rows["meta"] if row[0] != "last_event_id"]
    return {"rows": rows, "positions": positions}


def test_a_connect_with_nothing_new_writes_nothing_but_positions(server: RunningServer, admin: Admin,
                                                                 tmp_path: Path) -> None:
    """The second connect finds the user changed only in presence (`last_seen_at` moved when
    the first client left) and empty changelogs: they are not written (a write syncs the
    WAL's header, much of a warm connect's CPU). Only the positions may move: the resume point
    and the changelog tokens follow the server's newest id, which gaps in the ids move on
    PostgreSQL. When they did not, the file keeps its bytes."""
    tokens, url = setup(admin)
    admin.send(url, "bob", "hello")
    cache = tmp_path / "cache"
    client, recorder = make_client(server.url, cache)
    with client:
        first_user = connect(client, recorder, "alice", tokens["alice"])
        caught_up(client, recorder)
        wait_equal(client, server.url, tokens["alice"], url)
    [path] = list(cache.rglob("*.sqlite"))
    before_bytes, before = path.read_bytes(), cache_rows(path)
    client, recorder = make_client(server.url, cache)
    with client:
        second_user = connect(client, recorder, "alice", tokens["alice"])
        assert second_user["last_seen_at"] != first_user["last_seen_at"]
        caught_up(client, recorder)
        assert client.cached_channel(url)["last_message"]["message"] == "hello"
    after = cache_rows(path)
    assert after["rows"] == before["rows"]
    if after["positions"] == before["positions"]:
        assert path.read_bytes() == before_bytes


@contextlib.contextmanager
def alice_through(proxy: Any, tokens: Dict[str, str], tmp_path: Path) -> Iterator[Tuple[Any, Any]]:
    """Alice's client, connected through `proxy`; the proxy is closed after."""
    client, recorder = make_client(proxy.url, tmp_path / "cache")
    try:
        with client:
            connect(client, recorder, "alice", tokens["alice"])
            yield client, recorder
    finally:
        proxy.close()


def test_a_changelog_read_before_an_event_does_not_undo_it(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """A channel changelog answer read before a change whose event is applied first must not
    put the older copy back (it used to: the metadata below vanished from the cache)."""
    tokens, url = setup(admin)
    proxy = AnswerHoldingProxy(server.url, b"/my_group_channels/changelogs")
    with alice_through(proxy, tokens, tmp_path) as (client, recorder):
        caught_up(client, recorder)  # the changelog token predates the rename
        admin.call("PUT", f"/v3/group_channels/{url}", {"name": "Renamed"})  # listed by the next changelog
        poll_until(lambda: (client.cached_channel(url) or {}).get("name") == "Renamed", timeout=10)
        proxy.arm()
        done = len([n for n in recorder.names() if n == "reconnect_succeeded"])
        client.reconnect()
        assert proxy.answered.wait(10), "the catch-up read no channel changelog"
        # Read by the server before this change; its event is applied while the answer is held.
        admin.call("POST", f"/v3/group_channels/{url}/metadata", {"metadata": {"topic": "cats"}})
        poll_until(lambda: (client.cached_channel(url) or {}).get("metadata") == {"topic": "cats"}, timeout=10)
        proxy.release()
        assert proxy.forwarded.wait(10)
        # After the catch-up applied the answer.
        recorder.wait(lambda: len([n for n in recorder.names() if n == "reconnect_succeeded"]) > done)
        cached = client.cached_channel(url)
        assert cached["metadata"] == {"topic": "cats"} and cached["name"] == "Renamed"
        assert without_presence(cached) == without_presence(server_channel(server.url, tokens["alice"], url))


@contextlib.contextmanager
def replay_held_past_the_catch_up(server: RunningServer, admin: Admin, tmp_path: Path,
                                  while_away: Callable[[str], Dict[str, Any]],
                                  cached_first: Optional[str] = None) -> Iterator[Tuple[Any, Any, Dict[str, str], str, Dict[str, Any]]]:
    """Alice's client, offline while `while_away(url)` changes the channel and returns the last
    message it sent, then reconnected with the stream's replay held (`StreamHoldingProxy`)
    until the catch-up's changelog has stored that message as the channel's last: the replay
    comes after the changelog. `cached_first`: a message bob sends before, cached before the
    client goes away. Yields the client, its recorder, the tokens, the url and the message."""
    tokens, url = setup(admin)
    proxy = StreamHoldingProxy(server.url, b"/events")
    with alice_through(proxy, tokens, tmp_path) as (client, recorder):
        caught_up(client, recorder)
        if cached_first:
            first = admin.send(url, "bob", cached_first)
            poll_until(lambda: any(m["message_id"] == first["message_id"] for m in client.cached_messages(url)),
                       timeout=10)
        client.disconnect()
        sent = while_away(url)
        proxy.arm()
        client.connect("alice", tokens["alice"]).result(10)
        assert proxy.holding.wait(10), "the stream did not open"
        poll_until(lambda: ((client.cached_channel(url) or {}).get("last_message") or {}).get("message_id")
                   == sent["message_id"], timeout=10)
        proxy.release()
        yield client, recorder, tokens, url, sent


def test_a_replayed_leave_does_not_drop_a_channel_joined_again(server: RunningServer, admin: Admin,
                                                               tmp_path: Path) -> None:
    """Offline, the user leaves a channel and joins it again. The replay's old leave carries
    the channel as it is now (joined) and the events after it none: the channel stays (it used
    to be dropped for good, its new messages cached without it)."""
    def leave_and_come_back(url: str) -> Dict[str, Any]:
        admin.call("PUT", f"/v3/group_channels/{url}/leave", {"user_ids": ["alice"]})
        admin.call("POST", f"/v3/group_channels/{url}/invite", {"user_ids": ["alice"], "inviter_id": "bob"})
        return admin.send(url, "bob", "welcome back")

    with replay_held_past_the_catch_up(server, admin, tmp_path, leave_and_come_back) as (client, recorder, tokens, url, sent):
        # The replay applied to its last event (the message: the catch-up may bring it too).
        recorder.wait(lambda: {"user_left", "message_received"} <= {c for c, u, _ in recorder.events if u == url})
        assert any(m["message_id"] == sent["message_id"] for m in client.cached_messages(url))
        assert without_presence(client.cached_channel(url) or {}) == without_presence(
            server_channel(server.url, tokens["alice"], url))


def test_a_channel_joined_again_keeps_no_message_changed_while_the_user_was_away(server: RunningServer, admin: Admin,
                                                                                 tmp_path: Path) -> None:
    """Offline, the user leaves, a cached message is edited, the user joins again: no event told
    the user of the edit, and what the cache holds of the channel's messages equals the
    server's (the engine drops them on the replayed leave; long-mode seed 20270429 with
    PARLEY_CONVERGENCE_REPLAY_DELAY_MS=300 kept an edit out of the cache before it did)."""
    def leave_edit_and_come_back(url: str) -> Dict[str, Any]:
        admin.call("PUT", f"/v3/group_channels/{url}/leave", {"user_ids": ["alice"]})
        old = [m for m in requests.get(f"{server.url}/v3/group_channels/{url}/messages",
                                       params={"message_ts": 2**62, "prev_limit": 10, "next_limit": 0},
                                       headers={"Api-Token": server.api_token}, timeout=10).json()["messages"]]
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{old[0]['message_id']}",
                   {"message_type": "MESG", "message": "edited while alice was away"})
        admin.call("POST", f"/v3/group_channels/{url}/invite", {"user_ids": ["alice"], "inviter_id": "bob"})
        return admin.send(url, "bob", "welcome back")

    with replay_held_past_the_catch_up(server, admin, tmp_path, leave_edit_and_come_back,
                                       cached_first="before leaving") as (client, recorder, tokens, url, sent):
        recorder.wait(lambda: {"user_left", "message_received"} <= {c for c, u, _ in recorder.events if u == url})
        truth = {m["message_id"]: m["message"] for m in requests.get(
            f"{server.url}/v3/group_channels/{url}/messages", params={"message_ts": 2**62, "prev_limit": 10, "next_limit": 0},
            headers={"Session-Key": tokens["alice"]}, timeout=10).json()["messages"]}
        for message in client.cached_messages(url):
            assert truth.get(message["message_id"]) == message["message"], (message, truth)


def test_a_replayed_reply_summarizes_its_parent_as_edited_since(server: RunningServer, admin: Admin,
                                                                tmp_path: Path) -> None:
    """Offline, a cached message gets a reply and is then edited. The catch-up stores the edit;
    the replay's reply renders the parent as it was, and the replayed edit changes nothing of
    the parent: the cached reply still summarizes the parent as it reads now."""
    reply: Dict[str, Any] = {}

    def reply_then_edit_the_parent(url: str) -> Dict[str, Any]:
        parent = requests.get(f"{server.url}/v3/group_channels/{url}/messages",
                              params={"message_ts": 2**62, "prev_limit": 1, "next_limit": 0},
                              headers={"Api-Token": server.api_token}, timeout=10).json()["messages"][0]
        reply.update(admin.send(url, "bob", "a reply", parent_message_id=parent["message_id"]))
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{parent['message_id']}",
                   {"message_type": "MESG", "message": "the parent, edited"})
        return admin.send(url, "bob", "after the edit")

    with replay_held_past_the_catch_up(server, admin, tmp_path, reply_then_edit_the_parent,
                                       cached_first="the parent") as (client, recorder, tokens, url, sent):
        recorder.wait(lambda: "message_updated" in {c for c, u, _ in recorder.events if u == url})
        truth = requests.get(f"{server.url}/v3/group_channels/{url}/messages/{reply['message_id']}",
                             params={"include_parent_message_info": "true"},
                             headers={"Session-Key": tokens["alice"]}, timeout=10).json()["parent_message_info"]
        assert truth["message"] == "the parent, edited"
        poll_until(lambda: any(m["message_id"] == reply["message_id"] for m in client.cached_messages(url)), timeout=10)
        cached = next(m for m in client.cached_messages(url) if m["message_id"] == reply["message_id"])
        assert cached["parent_message_info"] == truth


def test_a_listed_edit_reaches_the_cached_replies_before_its_event(server: RunningServer, admin: Admin,
                                                                   tmp_path: Path) -> None:
    """A list answer brings a parent message edited since it was cached while the edit's event
    is held: the cached reply summarizes the edit at once, and the event, which then changes
    nothing of the parent, leaves it so."""
    tokens, url = setup(admin)
    proxy = StreamHoldingProxy(server.url, b"/events")
    with alice_through(proxy, tokens, tmp_path) as (client, recorder):
        parent = admin.send(url, "bob", "the parent")
        reply = admin.send(url, "bob", "a reply", parent_message_id=parent["message_id"])
        poll_until(lambda: {parent["message_id"], reply["message_id"]} <= {m["message_id"] for m in client.cached_messages(url)},
                   timeout=10)
        proxy.arm()
        caught_up(client, recorder)
        assert proxy.holding.wait(10), "the stream did not open"
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{parent['message_id']}",
                   {"message_type": "MESG", "message": "the parent, edited"})
        page = client.list_messages(channel_url=url, message_id=parent["message_id"], prev_limit=0, next_limit=0,
                                    include=True).result(10)
        assert [m["message_id"] for m in page["messages"]] == [parent["message_id"]]

        def cached_summary() -> str:
            cached = next(m for m in client.cached_messages(url) if m["message_id"] == reply["message_id"])
            return cached["parent_message_info"]["message"]

        assert cached_summary() == "the parent, edited"
        proxy.release()
        recorder.wait(lambda: "message_updated" in {c for c, u, _ in recorder.events if u == url})
        assert cached_summary() == "the parent, edited"


def test_a_poll_sent_to_a_channel_not_cached_yet_is_cached_as_the_server_shows_it(server: RunningServer, admin: Admin,
                                                                                  tmp_path: Path) -> None:
    """The user sends a poll into a channel whose event is still on its way: the send's answer
    is stored before the channel, and the poll keeps the user's votes (none) as the server's
    render for the user shows them; the message's own event, the same version, changes nothing."""
    tokens, _ = setup(admin)
    proxy = StreamHoldingProxy(server.url, b"/events")
    with alice_through(proxy, tokens, tmp_path) as (client, recorder):
        proxy.arm()
        caught_up(client, recorder)
        assert proxy.holding.wait(10), "the stream did not open"
        url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "name": "Polls"})["channel_url"]
        assert client.cached_channel(url) is None
        poll = client.create_poll(channel_url=url, title="Ready?", options=["yes", "no"]).result(10)
        _, done = client.send_user_message(url, "vote, please", poll_id=poll["id"])
        sent = done.result(10)
        proxy.release()
        poll_until(lambda: client.cached_channel(url) is not None, timeout=10)
        truth = requests.get(f"{server.url}/v3/group_channels/{url}/messages/{sent['message_id']}",
                             headers={"Session-Key": tokens["alice"]}, timeout=10).json()["poll"]
        assert truth["voted_option_ids"] == []
        cached = next(m for m in client.cached_messages(url) if m["message_id"] == sent["message_id"])
        assert cached["poll"] == truth


def test_a_replayed_deletion_does_not_drop_a_channel_made_again_under_its_url(server: RunningServer, admin: Admin,
                                                                             tmp_path: Path) -> None:
    """Offline, the channel is deleted and made again under the same url; the replay's old
    deletion comes after the changelog stored the new channel: the new channel stays."""
    def delete_and_make_again(url: str) -> Dict[str, Any]:
        admin.call("DELETE", f"/v3/group_channels/{url}")
        admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": url, "name": "Again"})
        return admin.send(url, "bob", "a new start")

    with replay_held_past_the_catch_up(server, admin, tmp_path, delete_and_make_again) as (client, recorder, tokens, url, sent):
        recorder.wait(lambda: any(category == "channel_deleted" for category, _, _ in recorder.events))
        wait_equal(client, server.url, tokens["alice"], url)
        poll_until(lambda: [m["message_id"] for m in client.cached_messages(url)] == [sent["message_id"]], timeout=10)


def test_a_replay_after_leaving_caches_nothing_of_the_channel(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """Offline, messages come and then the user leaves. The replay renders the channel as it is
    now (no longer the user's) on its first event only: the channel goes, and the later events
    store none of its messages."""
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        caught_up(client, recorder)
        client.disconnect()
        for i in range(3):
            admin.send(url, "bob", f"before leaving {i}")
        admin.call("PUT", f"/v3/group_channels/{url}/leave", {"user_ids": ["alice"]})
        client.connect("alice", tokens["alice"]).result(10)
        recorder.wait(lambda: any(c == "user_left" and u == url for c, u, _ in recorder.events))
        assert client.cached_channel(url) is None
        assert client.cached_messages(url) == []


def test_a_channel_first_seen_in_a_message_event_gets_its_members(server: RunningServer, admin: Admin,
                                                                  tmp_path: Path) -> None:
    """A message event carries the channel without its member list; a channel the cache did
    not hold is then read whole, so the cache still equals the server's full view."""
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        caught_up(client, recorder)  # no changelog answer in flight to bring the channel back
        client.clear_cached_data()
        assert client.cached_channel(url) is None
        admin.send(url, "bob", "hello")
        recorder.wait(lambda: len(recorder.of("message_received")) == 1)
        cached = wait_equal(client, server.url, tokens["alice"], url)
        assert [m["user_id"] for m in cached["members"]] == ["alice", "bob"]


def test_message_changelogs_bring_changes_that_do_not_move_updated_at(tmp_path: Path) -> None:
    """A reaction and thread info change a message without moving its `updated_at`: when the
    events are gone (the server keeps 3), the message changelog's copy must still replace the
    cached one. (Found by the fault-injection test across nodes: a first connect that failed
    left a reaction out of the cache for good.)"""
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        tokens, url = setup(admin)
        target = admin.send(url, "alice", "react to me")
        with connected(server.url, tmp_path / "cache", "bob", tokens["bob"]) as (client, recorder):
            client.list_messages(channel_url=url).result(10)
            poll_until(lambda: [m["message_id"] for m in client.cached_messages(url)] == [target["message_id"]])
            client.disconnect()
            admin.call("POST", f"/v3/group_channels/{url}/messages/{target['message_id']}/reactions",
                       {"user_id": "alice", "reaction": "heart"})
            admin.send(url, "alice", "a reply", parent_message_id=target["message_id"])
            for i in range(5):
                admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {i}"})
            connect(client, recorder, "bob", tokens["bob"])
            truth = admin.call("GET", f"/v3/group_channels/{url}/messages/{target['message_id']}", include_reactions="true",
                               include_thread_info="true", user_id="bob")
            assert truth["reactions"][0]["user_ids"] == ["alice"] and truth["updated_at"] == target["updated_at"]

            def cached_target() -> Dict[str, Any]:
                return next(m for m in client.cached_messages(url) if m["message_id"] == target["message_id"])
            poll_until(lambda: cached_target().get("reactions") == truth["reactions"])
            poll_until(lambda: cached_target().get("thread_info", {}).get("reply_count") == 1)


def test_an_edit_is_reported_to_every_device_but_the_editors(server: RunningServer, admin: Admin,
                                                             tmp_path: Path) -> None:
    """`message_updated` reaches the other members and the editor's other devices (here one
    sharing the editor's session token), not the device that made the edit, whose cache
    holds the edit from the answer."""
    tokens, url = setup(admin)
    with connected(server.url, tmp_path / "editor", "alice", tokens["alice"]) as (editor, editor_events), \
            connected(server.url, tmp_path / "other-device", "alice", tokens["alice"]) as (other, other_events), \
            connected(server.url, tmp_path / "bob", "bob", tokens["bob"]) as (bob, bob_events):
        sent = admin.send(url, "alice", "first words")
        for recorder in (editor_events, other_events, bob_events):
            recorder.wait(lambda r=recorder: len(r.of("message_received")) == 1)
        for n in range(3):
            edited = editor.update_message(channel_url=url, message_id=sent["message_id"], message=f"edit {n}").result(10)
            assert editor.cached_messages(url)[0]["message"] == f"edit {n}"
            for recorder in (other_events, bob_events):
                recorder.wait(lambda r=recorder, n=n: [p["message"]["message"] for p in r.of("message_updated")][-1:] == [f"edit {n}"])
            assert edited["message"] == f"edit {n}"
        # An edit by another device or user is reported here as usual.
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{sent['message_id']}", {"message": "by an operator"})
        editor_events.wait(lambda: [p["message"]["message"] for p in editor_events.of("message_updated")] == ["by an operator"])
        for client in (editor, other, bob):
            poll_until(lambda c=client: c.cached_messages(url)[0]["message"] == "by an operator", timeout=10)
