import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import API_TOKEN, EventReader, Server, assert_error, databases, wait_until


def test_stream_delivers_member_events_only(server):
    a, b, outsider = server.user(), server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    ra = EventReader(server, a, session=server.session(a))
    ro = EventReader(server, outsider, session=server.session(outsider))
    try:
        assert ra.next()["event"] == "connected"
        assert ro.next()["event"] == "connected"
        m = server.send(url, b, "hello")
        e, _ = ra.until("message_received")
        assert e["json"]["message"]["message_id"] == m["message_id"]
        assert e["json"]["channel_url"] == url and e["json"]["channel"]["channel_url"] == url
        assert int(e["id"]) > 0
        assert ro.drain(0.6) == []
        assert server.ok("GET", f"/v3/users/{a}")["is_online"] is True
    finally:
        ra.close()
        ro.close()


def test_event_categories(server):
    op, a, b = server.user(), server.user(), server.user()
    server.ok("PUT", f"/v3/users/{b}/channel_invitation_preference", json={"auto_accept": False})
    url = server.channel([op, a], operator_ids=[op])["channel_url"]
    r = EventReader(server, a, session=server.session(a))
    rb = EventReader(server, b, session=server.session(b))
    try:
        r.next()
        rb.next()
        m = server.send(url, op, "x", mentioned_user_ids=[a])
        r.until("message_received")
        r.until("mention")
        server.ok("PUT", f"/v3/group_channels/{url}/messages/{m['message_id']}", json={"message": "y"})
        r.until("message_updated")
        server.ok("POST", f"/v3/group_channels/{url}/messages/{m['message_id']}/reactions", json={"user_id": op, "reaction": "r"})
        e, _ = r.until("reaction_updated")
        assert e["json"]["reaction"]["operation"] == "ADD"
        server.send(url, op, "reply", parent_message_id=m["message_id"])
        e, _ = r.until("thread_info_updated")
        assert e["json"]["thread_info"]["reply_count"] == 1
        server.ok("PUT", f"/v3/group_channels/{url}/freeze", json={"freeze": True})
        r.until("channel_frozen")
        server.ok("PUT", f"/v3/group_channels/{url}/freeze", json={"freeze": False})
        r.until("channel_unfrozen")
        server.ok("PUT", f"/v3/group_channels/{url}", json={"name": "renamed"})
        e, _ = r.until("channel_changed")
        assert e["json"]["channel"]["name"] == "renamed"
        server.ok("POST", f"/v3/group_channels/{url}/metadata", json={"metadata": {"k": "v"}})
        r.until("metadata_created")
        server.ok("PUT", f"/v3/group_channels/{url}/metadata/k", json={"value": "w"})
        r.until("metadata_updated")
        server.ok("DELETE", f"/v3/group_channels/{url}/metadata/k")
        r.until("metadata_deleted")
        server.ok("POST", f"/v3/group_channels/{url}/metacounter", json={"metacounter": {"n": 1}})
        r.until("metacounter_created")
        server.ok("POST", f"/v3/group_channels/{url}/typing", json={"user_ids": [op]})
        e, _ = r.until("typing_status")
        assert [u["user_id"] for u in e["json"]["typing_users"]] == [op]
        server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": op})
        r.until("read_status")
        server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_delivered", json={"user_id": op})
        r.until("delivery_status")
        server.ok("POST", f"/v3/group_channels/{url}/messages/{m['message_id']}/pin", json={})
        r.until("pinned_message_updated")
        server.ok("POST", f"/v3/group_channels/{url}/operators", json={"operator_ids": [a]})
        r.until("operator_updated")
        server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [b]})
        r.until("invitation_received")
        e, _ = rb.until("invitation_received")  # the invitee hears of it too
        server.ok("PUT", f"/v3/group_channels/{url}/decline", json={"user_id": b})
        r.until("invitation_declined")
        server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": op})
        r.until("user_muted")
        server.ok("DELETE", f"/v3/group_channels/{url}/mute/{op}")
        r.until("user_unmuted")
        c = server.user()
        server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [c]})
        e, _ = r.until("user_joined")
        assert e["json"]["users"][0]["user_id"] == c
        server.ok("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [c]})
        r.until("user_left")
        server.ok("POST", f"/v3/group_channels/{url}/ban", json={"user_id": op})
        r.until("user_banned")
        server.ok("DELETE", f"/v3/group_channels/{url}/ban/{op}")
        r.until("user_unbanned")
        server.ok("DELETE", f"/v3/group_channels/{url}/messages/{m['message_id']}")
        e, _ = r.until("message_deleted")
        assert e["json"]["message_id"] == m["message_id"]
        server.ok("PUT", f"/v3/group_channels/{url}/hide", json={"user_id": a})
        r.until("channel_hidden")
        server.ok("DELETE", f"/v3/group_channels/{url}")
        e, _ = r.until("channel_deleted")
        assert "channel" not in e["json"]
    finally:
        r.close()
        rb.close()


def test_resume_with_last_event_id_no_missing_no_repeats(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    sa = server.session(a)
    r = EventReader(server, a, session=sa)
    r.next()
    server.send(url, b, "1")
    first, _ = r.until("message_received")
    r.close()
    time.sleep(0.2)
    sent = [server.send(url, b, str(i))["message_id"] for i in range(2, 8)]
    server.ok("PUT", f"/v3/group_channels/{url}", json={"name": "n"})
    r2 = EventReader(server, a, session=sa, last_event_id=first["id"])
    try:
        assert r2.next()["event"] == "connected"
        # The replay up to its last event, then whatever else came: nothing should.
        _, events = r2.until("channel_changed")
        events += r2.drain(0.3)
        ids = [int(e["id"]) for e in events]
        assert ids == sorted(ids) and len(ids) == len(set(ids))
        got = [e["json"]["message"]["message_id"] for e in events if e["event"] == "message_received"]
        assert got == sent
        assert events[-1]["event"] == "channel_changed"
        # live events continue after the replay
        live = server.send(url, b, "live")["message_id"]
        e, _ = r2.until("message_received")
        assert e["json"]["message"]["message_id"] == live and int(e["id"]) > ids[-1]
        # heartbeats arrive (0.5 s interval in tests)
        assert wait_until(lambda: r2.comments >= 1, timeout=5, step=0.05)
    finally:
        r2.close()


def test_resync_beyond_retention(fresh_server):
    server = fresh_server(["--event-retention", "5"])
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    sa = server.session(a)
    r = EventReader(server, a, session=sa)
    r.next()
    server.send(url, b, "first")
    first, _ = r.until("message_received")
    r.close()
    for i in range(10):
        server.send(url, b, str(i))
    r2 = EventReader(server, a, session=sa, last_event_id=first["id"])
    try:
        r2.next()
        e = r2.next()
        assert e["event"] == "resync" and e["json"]["reason"] == "retention"
        assert int(e["id"]) == e["json"]["last_event_id"]
        live = server.send(url, b, "after")["message_id"]
        e, _ = r2.until("message_received")
        assert e["json"]["message"]["message_id"] == live
    finally:
        r2.close()
    r3 = EventReader(server, a, session=sa, last_event_id=10**12)
    try:
        r3.next()
        assert r3.next()["json"]["reason"] == "unknown_id"
    finally:
        r3.close()


def stored_log(db):
    """(the ids of the stored events, the `pruned_through` counter), read from the database."""
    sql_ids = "SELECT id FROM events ORDER BY id"
    sql_pruned = "SELECT coalesce((SELECT value FROM meta WHERE name = 'pruned_through'), 0)"
    if databases.backend() == "sqlite":
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return [r[0] for r in c.execute(sql_ids)], c.execute(sql_pruned).fetchone()[0]
    ids = [int(line) for line in databases.psql(db, sql_ids).split()]
    return ids, int(databases.psql(db, sql_pruned).strip())


def test_writers_passing_the_retention_side_by_side_leave_the_log_to_one_pruning(tmp_path):
    """PostgreSQL: a writer whose commit takes the log a tenth past its retention prunes it
    (count, boundary, delete); writers that pass the limit while that runs leave the log to it.
    Every count then finds the log over its limit and deletes: a count that finds nothing to
    delete is a second pruning run beside the first."""
    if databases.backend() == "sqlite":
        pytest.skip("SQLite prunes in each write, under its one writer")
    retention = 100
    db = databases.database_for(tmp_path, "prunings.sqlite")
    if "pg_stat_statements" not in databases.psql(db, "SHOW shared_preload_libraries"):
        pytest.skip("pg_stat_statements is not loaded in this cluster (scripts/pg-test-cluster.sh loads it)")
    databases.psql(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    server = Server(db, ["--event-retention", str(retention)])
    try:
        pairs = [(server.user(), server.user()) for _ in range(8)]
        urls = [server.channel(list(pair))["channel_url"] for pair in pairs]
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")

        def send_all(index):
            for n in range(60):
                server.send(urls[index], pairs[index][0], f"m{n}")

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(send_all, range(8)))

        def calls(pattern):
            found = databases.psql(db, f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                                       f"WHERE dbid = {this_database} AND query LIKE '{pattern}'")
            return int(found.strip())
        counts, deletes = calls("SELECT (SELECT count(*) FROM (SELECT % FROM events LIMIT %"), calls("WITH gone AS (DELETE FROM events%")
        # 480 events past a limit of 110: at most about 480 / 10 prunings, fewer as more
        # commits fall into one.
        assert 10 <= deletes <= 60 and counts <= deletes + 2, (counts, deletes)
        # Commits during the last pruning are left to the next: the one of every second.
        deadline = time.monotonic() + 10
        while len(stored_log(db)[0]) > retention + retention // 10:
            assert time.monotonic() < deadline, len(stored_log(db)[0])
            time.sleep(0.1)
        assert len(stored_log(db)[0]) >= retention
    finally:
        server.stop()
        databases.drop_database(db)


def test_the_log_keeps_its_retention_pruned_at_once_on_sqlite_by_tenths_on_postgresql(tmp_path):
    """The log never holds fewer than `--event-retention` events once it has had them; SQLite
    prunes back to that after every write, PostgreSQL once the log is a tenth over it (the
    writes between spend no round trip on it). `pruned_through` is always just below the
    oldest kept event, so a resume from an id before it is told to resync."""
    retention = 30
    slack = 0 if databases.backend() == "sqlite" else retention // 10
    db = databases.database_for(tmp_path, "retention.sqlite")
    server = Server(db, ["--event-retention", str(retention)])
    try:
        a, b = server.user(), server.user()
        url = server.channel([a, b])["channel_url"]
        sizes = []
        for n in range(3 * retention):
            server.send(url, b, f"m{n}")
            ids, pruned = stored_log(db)
            sizes.append(len(ids))
            if pruned:
                assert ids[0] > pruned, (ids[:3], pruned)
        full = sizes[sizes.index(retention):]
        assert all(retention <= size <= retention + slack for size in full), full
        if slack:
            # It grows to the tenth over, then drops back, again and again.
            assert full.count(retention + slack) >= 3 and full.count(retention) >= 3, full
        # The stream agrees: from the pruned id it must resync, from the next one it replays.
        ids, pruned = stored_log(db)
        session = server.session(a)
        stale = EventReader(server, a, session=session, last_event_id=pruned - 1)
        try:
            stale.next()
            assert stale.next()["json"]["reason"] == "retention"
        finally:
            stale.close()
        kept = EventReader(server, a, session=session, last_event_id=ids[0])
        try:
            kept.next()
            e, _ = kept.until("message_received")
            assert int(e["id"]) > ids[0]
        finally:
            kept.close()
    finally:
        server.stop()
        if databases.backend() != "sqlite":
            databases.drop_database(db)


def test_stream_auth(server):
    a, b = server.user(), server.user()
    sb = server.session(b)
    r = requests.get(server.url(f"/v3/users/{a}/events"), headers={"Session-Key": sb}, timeout=5)
    assert_error(r, 403, 400108)
    r = requests.get(server.url(f"/v3/users/{a}/events"), timeout=5)
    assert_error(r, 401, 400301)
    r = requests.get(server.url(f"/v3/users/{a}/events"), headers={"Session-Key": sb, "Last-Event-ID": "x"}, timeout=5)
    assert_error(r, 400, 400100, "Last-Event-ID")
    r = requests.get(server.url("/v3/users/nobody-here/events"), headers={"Api-Token": API_TOKEN}, timeout=5)
    assert_error(r, 404, 400201)


def test_last_seen_after_disconnect(server):
    a = server.user()
    r = EventReader(server, a, session=server.session(a))
    r.next()
    r.close()
    deadline = time.time() + 5
    while time.time() < deadline:
        u = server.ok("GET", f"/v3/users/{a}")
        if not u["is_online"] and u["last_seen_at"] > 0:
            break
        time.sleep(0.2)
    assert u["is_online"] is False and u["last_seen_at"] > 0


def test_sigterm_ends_open_streams_and_stops_promptly(fresh_server):
    server = fresh_server()
    a = server.user()
    readers = [EventReader(server, a) for _ in range(3)]
    try:
        for reader in readers:
            assert reader.next()["event"] == "connected"
        started = time.time()
        server.proc.terminate()
        server.proc.wait(timeout=8)
        assert time.time() - started < 8
        for reader in readers:
            reader.thread.join(timeout=5)
            assert not reader.thread.is_alive(), "the stream was not ended by the shutdown"
    finally:
        for reader in readers:
            reader.close()


def _stream_ends_with_error(reader, code, timeout=5):
    """Reads until the stream's `error` event; returns it (the stream must end after it)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        e = reader.next(timeout=max(0.05, deadline - time.time()))
        if e.get("event") == "error":
            assert e["json"]["code"] == code and e["json"]["message"]
            reader.thread.join(timeout=5)
            assert not reader.thread.is_alive(), "the stream stays open after its error event"
            return e
    raise AssertionError("no error event")


def test_stream_ends_when_its_session_key_expires(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    expires = int(time.time() * 1000) + 1500
    r = EventReader(server, a, session=server.session(a, expires_at=expires))
    try:
        r.next()
        server.send(url, b, "before")
        r.until("message_received")
        _stream_ends_with_error(r, 400302)
        assert time.time() * 1000 >= expires - 50  # not before the moment
        server.send(url, b, "after")
    finally:
        r.close()


def test_stream_of_a_deactivated_or_deleted_user_ends(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    r = EventReader(server, a, session=server.session(a))
    try:
        r.next()
        server.ok("PUT", f"/v3/users/{a}", json={"is_active": False})
        _stream_ends_with_error(r, 400301)
        server.send(url, b, "not for a deactivated user")
    finally:
        r.close()
    c = server.user()
    r = EventReader(server, c, session=server.session(c))
    try:
        r.next()
        server.ok("DELETE", f"/v3/users/{c}")
        _stream_ends_with_error(r, 400301)
    finally:
        r.close()


def test_open_streams_per_user_are_limited(fresh_server):
    server = fresh_server(["--max-streams-per-user", "2", "--heartbeat-seconds", "0.2"])
    a = server.user()
    session = server.session(a)
    readers = [EventReader(server, a, session=session) for _ in range(2)]
    try:
        for reader in readers:
            assert reader.next()["event"] == "connected"
        r = requests.get(server.url(f"/v3/users/{a}/events"), headers={"Session-Key": session}, timeout=5)
        assert_error(r, 429, 400120, a)
        readers.pop().close()
        deadline = time.time() + 5
        while True:  # a closed stream is noticed when the server next writes to it (a heartbeat at the latest)
            third = EventReader(server, a, session=session)
            if third.resp.status_code == 200:
                assert third.next()["event"] == "connected"
                readers.append(third)
                break
            assert third.resp.status_code == 429
            third.close()
            assert time.time() < deadline, "a closed stream never frees its place"
            time.sleep(0.2)
    finally:
        for reader in readers:
            reader.close()


def test_a_send_renders_every_member_for_an_invitee_and_only_what_it_shows_for_members(server):
    """A send loads its channel without its members' users (its events leave members out,
    PROTOCOL.md §9.1), except where one of its events shows them: an invitee, who cannot read
    the message, receives `channel_changed` with the channel whole. Its members are those a
    GET shows the invitee, field by field; a member's `message_received` names the sender,
    the mentioned users and the operators with their profiles."""
    op = server.user("op", nickname="Op", profile_url="https://example.com/op.png")
    members = [server.user("m", nickname=f"Member {n}", metadata={"n": str(n)}) for n in range(4)]
    invitee = server.user("inv", nickname="Invitee")
    server.ok("PUT", f"/v3/users/{invitee}/channel_invitation_preference", json={"auto_accept": False})
    url = server.channel([op] + members, operator_ids=[op])["channel_url"]
    server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [invitee], "inviter_id": op})
    ri = EventReader(server, invitee, session=server.session(invitee))
    rm = EventReader(server, members[0], session=server.session(members[0]))
    try:
        ri.next()
        rm.next()
        server.send(url, members[1], "hello", mentioned_user_ids=[members[2]])
        changed, _ = ri.until("channel_changed")
        received, _ = rm.until("message_received")
    finally:
        ri.close()
        rm.close()
    whole = server.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true", "user_id": invitee})

    def lasting(member):
        # Presence moved since: the streams closed.
        return {k: v for k, v in member.items() if k not in ("is_online", "last_seen_at")}

    assert changed["json"]["channel"]["member_state"] == "invited"
    assert len(changed["json"]["channel"]["members"]) == 6
    assert [lasting(m) for m in changed["json"]["channel"]["members"]] == [lasting(m) for m in whole["members"]]
    assert [m["nickname"] for m in changed["json"]["channel"]["members"] if m["user_id"] in members] == \
        [f"Member {n}" for n in range(4)]
    channel = received["json"]["channel"]
    assert "members" not in channel
    assert channel["operators"][0]["profile_url"] == "https://example.com/op.png"
    assert channel["last_message"]["user"]["nickname"] == "Member 1"
    assert channel["last_message"]["user"]["metadata"] == {"n": "1"}
    assert [u["nickname"] for u in received["json"]["message"]["mentioned_users"]] == ["Member 2"]
    assert [m["nickname"] for m in received["json"]["changed_members"]] == ["Member 1"]
