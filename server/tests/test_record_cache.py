"""The record cache (server/Sources/ParleyServer/RecordCache.swift) keeps channels and users
between requests but checks each against the database before using it. Two servers on one
database show it: what one changes, the other (which cached the old state) shows next."""
import time

import pytest

from conftest import Server, databases, metric, server_reading_peers_late, wait_for_a_held_request


def nth_message_received(stream, count):
    """The data of the `count`th message_received frame of an EventCollector, once it came."""
    assert stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "message_received") >= count, 15)
    return [f["data"] for f in stream.snapshot() if f["event"] == "message_received"][count - 1]


def test_a_second_server_sees_what_the_first_changed(tmp_path):
    db = databases.database_for(tmp_path, "shared.sqlite")
    first = Server(db)
    second = Server(db)
    try:
        a, b = first.user(nickname="before"), first.user()
        url = first.channel([a, b], name="old name")["channel_url"]
        sent = first.send(url, a, text="first text")
        # The second server reads (and caches) the channel, its last message and the users.
        seen = second.ok("GET", f"/v3/group_channels/{url}", params={"user_id": b, "show_member": "true"})
        assert seen["name"] == "old name" and seen["last_message"]["message"] == "first text"
        assert {m["user_id"]: m["nickname"] for m in seen["members"]}[a] == "before"

        # Changed through the first server: a profile, the channel, the last message.
        first.ok("PUT", f"/v3/users/{a}", json={"nickname": "after"})
        first.ok("PUT", f"/v3/group_channels/{url}", json={"name": "new name"})
        first.ok("PUT", f"/v3/group_channels/{url}/messages/{sent['message_id']}",
                 json={"message_type": "MESG", "message": "edited text"})

        seen = second.ok("GET", f"/v3/group_channels/{url}", params={"user_id": b, "show_member": "true"})
        assert seen["name"] == "new name"
        assert seen["last_message"]["message"] == "edited text"
        assert {m["user_id"]: m["nickname"] for m in seen["members"]}[a] == "after"
        assert second.ok("GET", f"/v3/users/{a}")["nickname"] == "after"
        listed = second.ok("GET", f"/v3/users/{b}/my_group_channels", params={"show_member": "true"})["channels"]
        assert [(c["name"], c["last_message"]["message"]) for c in listed] == [("new name", "edited text")]

        # A member who left, through the first server, is gone from the second's render.
        first.ok("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [b]})
        seen = second.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})
        assert [m["user_id"] for m in seen["members"]] == [a]
        # A deleted channel is gone.
        first.ok("DELETE", f"/v3/group_channels/{url}")
        assert second.request("GET", f"/v3/group_channels/{url}").status_code == 404
        # Made again under the same key, through the first server: the second shows the new
        # one, not what it kept of the old one (a new row never takes up an old version).
        assert second.ok("GET", f"/v3/users/{b}")["nickname"] == b
        first.ok("DELETE", f"/v3/users/{b}")
        first.ok("POST", "/v3/users", json={"user_id": b, "nickname": "reborn"})
        assert second.ok("GET", f"/v3/users/{b}")["nickname"] == "reborn"
        first.channel([a], channel_url=url, name="again")
        seen = second.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})
        assert seen["name"] == "again" and [m["user_id"] for m in seen["members"]] == [a]
    finally:
        first.stop()
        second.stop()
        if databases.backend() != "sqlite":
            databases.drop_database(db)


@pytest.mark.postgres_only
def test_a_writer_on_another_server_sees_a_changed_user(tmp_path):
    """A writer trusts cached users while the database's `users_written` counter has not
    moved since it found them current; a user changed through another server moves it."""
    db = databases.database_for(tmp_path, "shared.sqlite")
    first = Server(db)
    second = Server(db)
    try:
        a, b = first.user(nickname="before"), first.user(nickname="b before")
        url = first.channel([a, b])["channel_url"]
        # The second server's writers load (and cache) both users, then use them unchecked.
        for text in ("one", "two"):
            assert second.send(url, a, text=text)["user"]["nickname"] == "before"
        first.ok("PUT", f"/v3/users/{a}", json={"nickname": "after"})
        assert second.send(url, a, text="three")["user"]["nickname"] == "after"
        # Changed again, while the second server's writers have found `a` current since.
        first.ok("PUT", f"/v3/users/{b}", json={"nickname": "b after"})
        first.ok("PUT", f"/v3/users/{a}", json={"nickname": "again"})
        assert second.send(url, b, text="four")["user"]["nickname"] == "b after"
        assert second.send(url, a, text="five")["user"]["nickname"] == "again"
        # A user deleted through the first server is gone for the second's writers.
        first.ok("DELETE", f"/v3/users/{b}")
        assert second.request("POST", f"/v3/group_channels/{url}/messages",
                              json={"message_type": "MESG", "user_id": b, "message": "six"}).status_code in (400, 403, 404)
    finally:
        first.stop()
        second.stop()
        databases.drop_database(db)


@pytest.mark.postgres_only
def test_a_writer_on_another_server_does_not_write_back_a_stale_channel(tmp_path, monkeypatch):
    """A writer writes back the whole channel it loaded, so a cached copy must be current
    when it sends: the version of the channel its path names is read once the writer holds
    the channel's lock (Writers/StreamPositions.swift). A change made through another server since the copy
    was kept must survive the send. The second server reads the first's events late (a test
    hook), so that its copy is not refreshed by rendering them before it sends."""
    db = databases.database_for(tmp_path, "shared.sqlite")
    first = Server(db)
    second = server_reading_peers_late(db, monkeypatch, 4000)
    try:
        a, b, c = first.user(), first.user(), first.user()
        url = first.channel([a, b], name="old name")["channel_url"]
        # The second server's writer loads (and caches) the channel.
        second.send(url, a, text="one")
        first.ok("PUT", f"/v3/group_channels/{url}", json={"name": "new name"})
        first.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [c]})
        mid = first.send(url, b, text="two")
        last = second.send(url, a, text="three")
        seen = first.ok("GET", f"/v3/group_channels/{url}", params={"user_id": b, "show_member": "true"})
        assert seen["name"] == "new name"
        assert sorted(m["user_id"] for m in seen["members"]) == sorted([a, b, c])
        assert seen["last_message"]["message_id"] == last["message_id"] and last["message_id"] > mid["message_id"]
        # b sent "two" (read) and has "three" unread; c, invited (and so shown the history),
        # has all three.
        assert seen["unread_message_count"] == 1
        assert first.ok("GET", f"/v3/group_channels/{url}", params={"user_id": c})["unread_message_count"] == 3
        page = second.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10})
        assert [m["message"] for m in page["messages"]] == ["one", "two", "three"]
    finally:
        first.stop()
        second.stop()
        databases.drop_database(db)


@pytest.mark.postgres_only
def test_a_server_rendering_another_servers_events_sees_changed_users_and_channels(tmp_path):
    """The second server reads the first one's events with the `users_written` counter of its
    snapshot and trusts users it found current at that value; it loads a channel that one of
    the events is newer than without checking its copy. A user and a channel changed through
    the first server show in the next event the second server renders."""
    from concurrency_support import EventCollector
    db = databases.database_for(tmp_path, "shared.sqlite")
    first = Server(db)
    second = Server(db)
    try:
        a, b = first.user(nickname="before"), first.user(nickname="watcher")
        url = first.channel([a, b], name="old name")["channel_url"]
        stream = EventCollector(second, b, session_key=first.session(b))
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)

        def received(count):
            return nth_message_received(stream, count)

        def sender_as_rendered_there(seen):
            # The message's own `user` was rendered by the first server, stored with the event;
            # the channel and `changed_members` by the second, from what it loaded.
            return {m["user_id"]: m["nickname"] for m in seen["changed_members"]}[a]

        # Two events read by the second server: the users are cached and stamped current.
        for n, text in enumerate(("one", "two"), 1):
            first.send(url, a, text=text)
            seen = received(n)
            assert seen["message"]["user"]["nickname"] == "before" == sender_as_rendered_there(seen)
            assert seen["channel"]["name"] == "old name"
            assert seen["channel"]["unread_message_count"] == n
        first.ok("PUT", f"/v3/users/{a}", json={"nickname": "after"})
        first.ok("PUT", f"/v3/group_channels/{url}", json={"name": "new name"})
        first.send(url, a, text="three")
        seen = received(3)
        assert seen["message"]["message"] == "three"
        assert seen["message"]["user"]["nickname"] == "after" == sender_as_rendered_there(seen)
        assert seen["channel"]["name"] == "new name"
        assert seen["channel"]["unread_message_count"] == 3
        # The counter unchanged since: the next event renders from the copies stamped above.
        first.send(url, a, text="four")
        seen = received(4)
        assert (sender_as_rendered_there(seen), seen["channel"]["unread_message_count"]) == ("after", 4)
        stream.close()
    finally:
        first.stop()
        second.stop()
        databases.drop_database(db)


@pytest.mark.postgres_only
def test_a_server_reads_only_the_members_written_since_its_copy(tmp_path):
    """A server that holds a copy of a channel another server changed reads the channel's row
    and only the member rows written since its copy (each write numbers its rows,
    ChannelQueries.swift "Members written since a copy"); a channel that lost members since
    is read again whole. What it renders, and what it answers afterwards, equal what the
    server that made the changes answers, field by field."""
    from concurrency_support import EventCollector
    db = databases.database_for(tmp_path, "shared.sqlite")
    first = Server(db)
    second = Server(db)
    try:
        a, b, c, d = first.user(), first.user(), first.user(), first.user()
        url = first.channel([a, b, c], name="copies")["channel_url"]
        stream = EventCollector(second, b, session_key=first.session(b))
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)

        def caught_up():
            made = int(databases.psql(db, "SELECT coalesce(max(id), 0) FROM events").strip())
            deadline = time.monotonic() + 15
            while metric(second, "parley_events_delivered_through_id") < made:
                assert time.monotonic() < deadline, "the second server did not catch up"
                time.sleep(0.1)

        def loads():
            return (metric(second, "parley_channel_loads_total"), metric(second, "parley_channel_loads_from_copies_total"))

        def same_channel_on_both():
            params = {"user_id": b, "show_member": "true"}
            theirs = first.ok("GET", f"/v3/group_channels/{url}", params=params)
            ours = second.ok("GET", f"/v3/group_channels/{url}", params=params)
            assert ours == theirs

        # Warm: the second server has read the channel with the events that made it.
        caught_up()
        first.send(url, a, text="one")
        seen = nth_message_received(stream, 1)
        assert seen["channel"]["unread_message_count"] == 1
        before = loads()
        first.send(url, a, text="two")
        seen = nth_message_received(stream, 2)
        assert seen["channel"]["unread_message_count"] == 2
        after = loads()
        assert (after[0] - before[0], after[1] - before[1]) == (1, 1), (before, after)
        same_channel_on_both()

        # b read up to "two" on the first server: b's row, written since the copy, is read.
        first.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": b})
        first.send(url, a, text="three")
        seen = nth_message_received(stream, 3)
        assert seen["channel"]["unread_message_count"] == 1
        same_channel_on_both()

        # c left: no row says so, the count does; the channel is read whole.
        caught_up()
        before = loads()
        first.ok("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [c]})
        caught_up()
        after = loads()
        assert after[1] - before[1] == 0 and after[0] - before[0] == 1, (before, after)
        first.send(url, a, text="four")
        seen = nth_message_received(stream, 4)
        assert seen["channel"]["member_count"] == 2 and seen["channel"]["unread_message_count"] == 2
        same_channel_on_both()

        # d joined: a new row, read from the copy again.
        first.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [d]})
        before = loads()
        first.send(url, a, text="five")
        seen = nth_message_received(stream, 5)
        assert seen["channel"]["member_count"] == 3 and seen["channel"]["unread_message_count"] == 3
        after = loads()
        assert after[1] - before[1] >= 1, (before, after)
        same_channel_on_both()
        members = second.ok("GET", f"/v3/group_channels/{url}/members", params={"limit": 10})["members"]
        assert sorted(m["user_id"] for m in members) == sorted([a, b, d])
        stream.close()
    finally:
        first.stop()
        second.stop()
        databases.drop_database(db)


@pytest.mark.postgres_only
def test_a_read_of_one_snapshot_takes_no_member_newer_than_it(tmp_path):
    """A read runs in one snapshot. A writer that commits after that snapshot began leaves a
    newer copy of the channel in the record cache; the read finds the copy stale against its
    snapshot and reads the channel whole in it, members included, not the member rows written
    since the copy (which its snapshot does not see) beside the newer members of the copy.
    Here the read takes its snapshot and waits (a test hook) while its user reads the channel:
    it must show the channel as it was, one message unread. The channel was made through
    another server, so that this one's copy comes from a whole read, which numbers it."""
    import threading
    db = databases.database_for(tmp_path, "snapshot")
    first = Server(db)
    server = Server(db)
    try:
        a, b = first.user(), first.user()
        url = first.channel([a, b], name="snapshot")["channel_url"]
        first.send(url, a, text="one")
        params = {"user_id": b, "show_member": "true"}
        assert server.ok("GET", f"/v3/group_channels/{url}", params=params)["unread_message_count"] == 1
        answers = []
        held = threading.Thread(target=lambda: answers.append(server.ok(
            "GET", f"/v3/group_channels/{url}", params=params, headers={"Parley-Test-Hold-Ms": "1500"})))
        held.start()
        wait_for_a_held_request(server, margin=0.3)
        server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": b})
        held.join(10)
        assert answers, "the held read did not answer"
        seen = answers[0]
        assert (seen["unread_message_count"], seen["user_last_read"]) == (1, 0)
        now = server.ok("GET", f"/v3/group_channels/{url}", params=params)
        assert now["unread_message_count"] == 0 and now["user_last_read"] > 0
    finally:
        first.stop()
        server.stop()
        databases.drop_database(db)
