"""Polls as the library keeps them (docs/PROTOCOL.md §7.6): the message carrying a poll shows it
in the cache and in a message collection, kept current by the poll events (`poll_updated`,
`poll_voted`, `poll_deleted`), by the poll operations' answers and, after being away, by the
poll changelogs of the catch-up; every state is checked against the server's own listing
for the user, field by field."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import parley
from conftest import Admin, RunningServer, listing_for, server_database
from test_engine import RestartableServer, connect, connected, make_client, poll_until

TIMEOUT = 10


def server_message(server: RunningServer, token: str, channel_url: str, message_id: int) -> Dict[str, Any]:
    """The message as the server lists it to the token's user (with everything a cache keeps)."""
    listing = listing_for(server.url, token, channel_url, include_reactions="true", include_thread_info="true")
    return next(m for m in listing if m["message_id"] == message_id)


def cached_poll(client: parley.Client, channel_url: str, message_id: int) -> Optional[Dict[str, Any]]:
    message = next((m for m in client.cached_messages(channel_url, limit=200) if m["message_id"] == message_id), None)
    return None if message is None else message.get("poll")


def wait_poll_equal(client: parley.Client, server: RunningServer, token: str, channel_url: str, message_id: int) -> Dict[str, Any]:
    """Waits until the cached message's poll equals the server's for the user; returns it."""
    def same() -> bool:
        return cached_poll(client, channel_url, message_id) == server_message(server, token, channel_url, message_id).get("poll")
    try:
        poll_until(same, timeout=TIMEOUT)
    except AssertionError:
        raise AssertionError(f"cached poll {cached_poll(client, channel_url, message_id)} differs from the server's "
                             f"{server_message(server, token, channel_url, message_id).get('poll')}")
    poll = cached_poll(client, channel_url, message_id)
    assert poll is not None
    return poll


class Updates:
    """A message collection's `updated` reports: (source name, message ids)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: List[Tuple[str, List[int]]] = []

    def __call__(self, context: Any, channel: Any, messages: List[Dict[str, Any]]) -> None:
        with self.lock:
            self.seen.append((context.source.value, [m["message_id"] for m in messages]))

    def sources_for(self, message_id: int) -> List[str]:
        with self.lock:
            return [source for source, ids in self.seen if message_id in ids]


def setup_poll(admin: Admin) -> Tuple[Dict[str, str], str, int, int]:
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "lunch"})["channel_url"]
    poll = admin.call("POST", f"/v3/group_channels/{url}/polls",
                      {"title": "Lunch?", "options": ["pizza", "sushi", "tacos"], "allow_multiple_votes": True, "user_id": "alice"})
    message = admin.send(url, "alice", "vote, please", poll_id=poll["id"])
    return tokens, url, poll["id"], message["message_id"]


def test_poll_events_and_operations_keep_the_cached_poll_equal_to_the_server(server: RunningServer, admin: Admin,
                                                                            tmp_path: Path) -> None:
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "lunch"})["channel_url"]
    client, recorder = make_client(server.url, tmp_path / "cache")
    updates = Updates()
    with client:
        connect(client, recorder, "bob", tokens["bob"])
        with client.message_collection(url, on_updated=updates) as view:
            initial, remote = view.start()
            initial.result(TIMEOUT)
            remote.result(TIMEOUT)
            poll = admin.call("POST", f"/v3/group_channels/{url}/polls",
                              {"title": "Lunch?", "options": ["pizza", "sushi", "tacos"], "allow_multiple_votes": True,
                               "user_id": "alice"})
            message_id = admin.send(url, "alice", "vote, please", poll_id=poll["id"])["message_id"]
            poll_until(lambda: any(m["message_id"] == message_id for m in view.messages), timeout=TIMEOUT)
            # The message event's poll has nobody's votes: the cache shows bob's own (none yet).
            first = wait_poll_equal(client, server, tokens["bob"], url, message_id)
            assert first["voted_option_ids"] == [] and first["voter_count"] == 0

            # Another member votes: the counts change through `poll_voted`, bob's votes do not.
            admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll['id']}/vote", {"option_ids": [1, 3], "user_id": "alice"})
            voted = wait_poll_equal(client, server, tokens["bob"], url, message_id)
            assert [o["vote_count"] for o in voted["options"]] == [1, 0, 1] and voted["voted_option_ids"] == []
            poll_until(lambda: "poll_voted" in updates.sources_for(message_id), timeout=TIMEOUT)

            # Bob votes through the library: the answer (his view) is applied at once.
            answer = client.vote_poll(channel_url=url, poll_id=poll["id"], option_ids=[2]).result(TIMEOUT)
            assert answer["voted_option_ids"] == [2]
            mine = wait_poll_equal(client, server, tokens["bob"], url, message_id)
            assert mine["voted_option_ids"] == [2] and mine["voter_count"] == 2
            # A later edit of the message (its event carries the poll without votes) keeps them.
            admin.call("PUT", f"/v3/group_channels/{url}/messages/{message_id}", {"message_type": "MESG", "message": "vote now"})
            poll_until(lambda: any(m["message_id"] == message_id and m["message"] == "vote now" for m in view.messages),
                       timeout=TIMEOUT)
            assert wait_poll_equal(client, server, tokens["bob"], url, message_id)["voted_option_ids"] == [2]

            # Changes of the poll itself: an option, the title, the close (`poll_updated`).
            admin.call("POST", f"/v3/group_channels/{url}/polls/{poll['id']}/options", {"text": "curry", "user_id": "alice"})
            admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll['id']}", {"title": "Lunch today?"})
            admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll['id']}/close")
            closed = wait_poll_equal(client, server, tokens["bob"], url, message_id)
            assert closed["status"] == "closed" and closed["title"] == "Lunch today?" and len(closed["options"]) == 4
            # The cache has it; the view follows in its callback, which the recorder hears.
            poll_until(lambda: "poll_updated" in updates.sources_for(message_id)
                       and next(m for m in view.messages if m["message_id"] == message_id)["poll"] == closed, timeout=TIMEOUT)

            # Deleting the poll: the message stays, without it.
            admin.call("DELETE", f"/v3/group_channels/{url}/polls/{poll['id']}")
            poll_until(lambda: cached_poll(client, url, message_id) is None, timeout=TIMEOUT)
            assert "poll" not in server_message(server, tokens["bob"], url, message_id)
            poll_until(lambda: all("poll" not in m for m in view.messages if m["message_id"] == message_id), timeout=TIMEOUT)


def test_the_catch_up_brings_what_happened_to_a_poll_while_away(tmp_path: Path) -> None:
    # The server keeps 3 events: more happen while bob is away, so only changelogs can tell.
    restartable = RestartableServer(server_database(tmp_path), "--event-retention", "3")
    restartable.start()
    try:
        server = restartable.running()
        admin = Admin(server)
        tokens, url, poll_id, message_id = setup_poll(admin)
        second = admin.call("POST", f"/v3/group_channels/{url}/polls", {"title": "Dinner?", "options": ["yes", "no"], "user_id": "alice"})
        second_message = admin.send(url, "alice", "and this one", poll_id=second["id"])["message_id"]
        client, recorder = make_client(server.url, tmp_path / "cache")
        updates = Updates()
        with client:
            connect(client, recorder, "bob", tokens["bob"])
            client.vote_poll(channel_url=url, poll_id=poll_id, option_ids=[1]).result(TIMEOUT)
            with client.message_collection(url, on_updated=updates) as view:
                initial, remote = view.start()
                initial.result(TIMEOUT)
                remote.result(TIMEOUT)
                wait_poll_equal(client, server, tokens["bob"], url, message_id)
                client.disconnect()
                # While bob is away: votes, an edit and a close, and the second poll deleted.
                admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll_id}/vote", {"option_ids": [2, 3], "user_id": "alice"})
                admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll_id}", {"title": "Lunch, finally?"})
                admin.call("PUT", f"/v3/group_channels/{url}/polls/{poll_id}/close")
                admin.call("DELETE", f"/v3/group_channels/{url}/polls/{second['id']}")
                for i in range(4):
                    admin.call("PUT", f"/v3/group_channels/{url}", {"data": f"churn {i}"})
                cached = cached_poll(client, url, message_id)
                assert cached is not None and cached["status"] == "open"
                connect(client, recorder, "bob", tokens["bob"])
                caught_up = wait_poll_equal(client, server, tokens["bob"], url, message_id)
                assert caught_up["status"] == "closed" and caught_up["title"] == "Lunch, finally?"
                assert caught_up["voted_option_ids"] == [1] and caught_up["voter_count"] == 2
                poll_until(lambda: cached_poll(client, url, second_message) is None, timeout=TIMEOUT)
                assert "poll" not in server_message(server, tokens["bob"], url, second_message)
                # Reported as the poll changelog's, to the view and to the event handler.
                poll_until(lambda: "poll_changelog" in updates.sources_for(message_id), timeout=TIMEOUT)
                recorder.wait(lambda: any(e["message_id"] == message_id for e in recorder.of("poll_changelog")))
                shown = next(m for m in view.messages if m["message_id"] == message_id)
                assert shown["poll"] == caught_up
    finally:
        restartable.stop()


def test_sending_a_message_with_a_poll_through_the_library(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    tokens = {name: admin.user(name) for name in ("alice", "bob")}
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "ask"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, recorder):
        created = client.create_poll(channel_url=url, title="Ready?", options=["yes", "no"]).result(TIMEOUT)
        assert created["message_id"] == 0 and created["created_by"] == "alice"
        pending, future = client.send_user_message(url, "Please vote", poll_id=created["id"])
        sent = future.result(TIMEOUT)
        assert sent["poll"]["id"] == created["id"]
        cached = wait_poll_equal(client, server, tokens["alice"], url, sent["message_id"])
        assert cached["message_id"] == sent["message_id"] and cached["voted_option_ids"] == []
        voters = client.list_poll_voters(channel_url=url, poll_id=created["id"], option_id=1).result(TIMEOUT)
        assert voters["vote_count"] == 0 and voters["voters"] == []


def test_an_edit_of_a_poll_message_not_cached_leaves_it_to_a_listing(server: RunningServer, admin: Admin,
                                                                     tmp_path: Path) -> None:
    """The user votes on a poll whose message the cache does not hold, then the message is
    edited. The edit's event renders the poll without anyone's votes: the cache does not take
    the message from it (it would show the user's votes as none), and a listing caches it as
    the server shows it to the user."""
    tokens, url, poll_id, message_id = setup_poll(admin)
    with connected(server.url, tmp_path / "cache", "bob", tokens["bob"]) as (client, recorder):
        assert cached_poll(client, url, message_id) is None
        client.vote_poll(channel_url=url, poll_id=poll_id, option_ids=[2]).result(TIMEOUT)
        admin.call("PUT", f"/v3/group_channels/{url}/messages/{message_id}", {"message_type": "MESG", "message": "vote now"})
        recorder.wait(lambda: any(u == url for c, u, _ in recorder.events if c == "message_updated"))
        assert cached_poll(client, url, message_id) is None
        client.list_messages(channel_url=url).result(TIMEOUT)
        assert wait_poll_equal(client, server, tokens["bob"], url, message_id)["voted_option_ids"] == [2]


def test_the_users_own_edit_of_a_poll_message_not_cached_leaves_it_to_a_listing(server: RunningServer, admin: Admin,
                                                                                tmp_path: Path) -> None:
    """As above, through the user's own edit: its answer renders the poll without anyone's
    votes (docs/PROTOCOL.md), so it changes a cached message only."""
    tokens, url, poll_id, message_id = setup_poll(admin)
    with connected(server.url, tmp_path / "cache", "alice", tokens["alice"]) as (client, _):
        assert cached_poll(client, url, message_id) is None
        client.vote_poll(channel_url=url, poll_id=poll_id, option_ids=[2]).result(TIMEOUT)
        edited = client.update_message(channel_url=url, message_id=message_id, message="vote now").result(TIMEOUT)
        assert edited["message"] == "vote now" and "voted_option_ids" not in edited["poll"]
        assert cached_poll(client, url, message_id) is None
        client.list_messages(channel_url=url).result(TIMEOUT)
        assert wait_poll_equal(client, server, tokens["alice"], url, message_id)["voted_option_ids"] == [2]
        # Cached now: the next edit's answer changes the message and keeps the user's votes.
        client.update_message(channel_url=url, message_id=message_id, message="vote today").result(TIMEOUT)
        assert wait_poll_equal(client, server, tokens["alice"], url, message_id)["voted_option_ids"] == [2]
