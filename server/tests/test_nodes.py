"""Several servers on one PostgreSQL database (docs/ARCHITECTURE.md "Order across servers"):
writers of different channels run side by side on every server, and each server delivers
every server's events to its own streams in id order, once, as far as the stream positions
allow; a stream resumes on any server exactly where it left off."""
import contextlib
import json
import threading
import time

import pytest
import requests

from concurrency_support import EventCollector
from conftest import API_TOKEN, UNDO_TO_SCHEMA_10, Server, databases, metric, server_reading_peers_late, wait_for_a_held_request, wait_until
from tests_support.balancer import Balancer
from tests_support.round_trips import RoundTripCounter, statements_in

pytestmark = pytest.mark.postgres_only

HOLD_MS = 2000


def started_servers(db, count, **options):
    """`count` servers on `db`. If one fails to start, those already started are stopped and the
    database dropped before the error goes on: a fixture whose setup fails gets no teardown."""
    servers = []
    try:
        for _ in range(count):
            servers.append(Server(db, **options))
    except BaseException:
        for s in servers:
            s.stop()
        databases.drop_database(db)
        raise
    return servers


@pytest.fixture
def two_servers(tmp_path):
    db = databases.database_for(tmp_path, "shared")
    first, second = started_servers(db, 2)
    yield first, second
    for s in (first, second):
        s.stop()
    databases.drop_database(db)


def message_texts(stream):
    return [f[3] for f in stream.message_frames()]


def wait_for_texts(stream, count, timeout=10):
    return stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "message_received") >= count, timeout)


def test_a_write_held_on_one_server_comes_first_on_both(two_servers):
    """Server A holds a send into X open after taking its numbers (test hook); meanwhile a send
    into Y goes to server B. Writers of different channels run side by side: B answers while A
    holds, and Y's ids follow X's (taken later). Y's event waits for X's commit: a stream on
    either server receives X then Y, each once; a resume from X's event id, on either server,
    gives exactly Y."""
    a, b = two_servers
    sender, watcher = a.user("held"), a.user("held")
    x = a.channel([sender, watcher], name="held-x")["channel_url"]
    y = a.channel([sender, watcher], name="held-y")["channel_url"]
    key = a.session(watcher)
    on_a = EventCollector(a, watcher, session_key=key)
    on_b = EventCollector(b, watcher, session_key=key)
    for stream in (on_a, on_b):
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    results = {}

    def held_send():
        r = a.request("POST", f"/v3/group_channels/{x}/messages", headers={"Parley-Test-Hold-Ms": str(HOLD_MS)},
                      json={"message_type": "MESG", "user_id": sender, "message": "held in x"})
        results["x"] = (r.status_code, r.json(), time.monotonic())

    thread = threading.Thread(target=held_send)
    thread.start()
    wait_for_a_held_request(a, margin=0.3)  # A has taken its locks and its numbers, and holds them
    y_message = b.send(y, sender, "free in y")
    y_done = time.monotonic()
    # Not delivered before X: X's lower number is still in flight.
    time.sleep(0.3)
    for stream in (on_a, on_b):
        assert message_texts(stream) == [], stream.snapshot()
    thread.join(15)
    status, x_message, x_done = results["x"]
    assert status == 200, x_message
    assert y_done < x_done - HOLD_MS / 2000, "server B's writer of another channel waited for A's"
    assert x_message["message_id"] < y_message["message_id"]

    for stream in (on_a, on_b):
        assert wait_for_texts(stream, 2), stream.snapshot()
    time.sleep(0.3)
    for name, stream in (("A", on_a), ("B", on_b)):
        frames = stream.message_frames()
        assert [f[3] for f in frames] == ["held in x", "free in y"], (name, frames)
        assert [f[1] for f in frames] == [x_message["message_id"], y_message["message_id"]], (name, frames)
        assert frames[0][0] < frames[1][0], (name, frames)
    x_event = on_a.message_frames()[0][0]
    assert on_b.message_frames()[0][0] == x_event, "the two servers gave one event two ids"
    for server in (a, b):
        resumed = EventCollector(server, watcher, session_key=key, last_event_id=x_event)
        assert wait_for_texts(resumed, 1), resumed.snapshot()
        time.sleep(0.3)
        assert message_texts(resumed) == ["free in y"], resumed.snapshot()
        assert not any(f["event"] == "resync" for f in resumed.snapshot()), resumed.snapshot()
        resumed.close()
    on_a.close()
    on_b.close()


def test_sends_through_both_servers_reach_every_stream_in_the_stored_order(two_servers):
    """Messages sent alternately through A and B, four at a time: a member's stream on A and
    one on B each receive every message once, in the order the server lists them, with the
    same event ids."""
    a, b = two_servers
    members = [a.user("burst") for _ in range(3)]
    url = a.channel(members, name="burst")["channel_url"]
    watcher = members[0]
    key = a.session(watcher)
    on_a = EventCollector(a, watcher, session_key=key)
    on_b = EventCollector(b, watcher, session_key=key)
    for stream in (on_a, on_b):
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    count = 80
    errors = []

    def sender(worker):
        for n in range(worker, count, 4):
            server = a if n % 2 == 0 else b
            r = server.request("POST", f"/v3/group_channels/{url}/messages",
                               json={"message_type": "MESG", "user_id": members[1 + n % 2], "message": f"m{n}"})
            if r.status_code != 200:
                errors.append((n, r.status_code, r.text))

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    listed = a.ok("GET", f"/v3/group_channels/{url}/messages",
                  params={"message_ts": 0, "next_limit": 200, "prev_limit": 0, "include": "true"})["messages"]
    stored = [m["message"] for m in listed]
    assert sorted(stored) == sorted(f"m{n}" for n in range(count))
    for name, stream in (("A", on_a), ("B", on_b)):
        assert wait_for_texts(stream, count, 20), (name, len(stream.message_frames()))
    time.sleep(0.5)
    frames_a, frames_b = on_a.message_frames(), on_b.message_frames()
    assert [f[3] for f in frames_a] == stored, "A's stream is not in the stored order"
    assert [f[3] for f in frames_b] == stored, "B's stream is not in the stored order"
    assert [f[0] for f in frames_a] == [f[0] for f in frames_b], "the servers numbered the events differently"
    assert [f[0] for f in frames_a] == sorted(set(f[0] for f in frames_a)), "event ids repeat or go back"
    for server in (a, b):
        # Each server read the other's events from the log, at most once per event delivered.
        samples = scrape_metrics(server)
        reads = sum(v for (name, _), v in samples.items() if name == "parley_event_log_reads_total")
        delivered = sum(v for (name, _), v in samples.items() if name == "parley_events_delivered_total")
        assert 0 < reads <= delivered, (reads, delivered)
        # Every read is timed, with the delivery of its batch; the wait before it is timed
        # when an announcement asked for it (not when this server's own writer found the
        # gap first, as it mostly does here, both servers writing: see the test below).
        for step in ("read_duration", "read_delivery_duration"):
            assert samples[(f"parley_event_log_{step}_seconds_count", "")] == reads, (step, samples)
            assert samples[(f"parley_event_log_{step}_seconds_sum", "")] > 0, step
        waits = samples[("parley_event_log_read_wait_seconds_count", "")]
        assert 0 <= waits <= reads, (waits, reads)
        assert samples[("parley_event_log_read_wait_seconds_bucket", '{le="+Inf"}')] == waits
    on_a.close()
    on_b.close()


def test_a_server_that_only_streams_times_the_wait_before_each_read(two_servers):
    """Sends go through A alone; B only streams. Each of B's reads of A's events is asked for
    by an announcement, so each is timed from it (the wait histogram), beside the read and the
    delivery."""
    a, b = two_servers
    members = [a.user("waits") for _ in range(2)]
    url = a.channel(members, name="waits")["channel_url"]
    stream = EventCollector(b, members[1], session_key=b.session(members[1]))
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    before, announced_before = scrape_metrics(b), scrape_metrics(a).get(("parley_commit_announcements_total", ""), 0)
    for n in range(5):
        a.send(url, members[0], text=f"w{n}")
        assert wait_for_texts(stream, n + 1), stream.snapshot()
    after = scrape_metrics(b)
    assert scrape_metrics(a).get(("parley_commit_announcements_total", ""), 0) - announced_before >= 5

    def grown(name):
        return after.get((name, ""), 0) - before.get((name, ""), 0)

    reads = grown("parley_event_log_reads_total")
    waits = grown("parley_event_log_read_wait_seconds_count")
    assert 5 <= reads <= 7, reads  # one per send; a periodic catch-up may add one
    assert reads - 2 <= waits <= reads, (waits, reads)
    assert grown("parley_event_log_read_wait_seconds_sum") > 0
    stream.close()


def test_announcements_that_come_while_a_read_waits_join_that_read(tmp_path, monkeypatch):
    """Server B's reads of A's events are slowed (test hook), so A's announcements arrive
    while one waits: they join the read queued behind it instead of each queuing a read of
    its own. B's stream gets every message once, in the stored order, from a few reads."""
    db = databases.database_for(tmp_path, "joined")
    a = Server(db)
    b = server_reading_peers_late(db, monkeypatch, 500)
    try:
        sender, watcher = a.user("join"), a.user("join")
        url = a.channel([sender, watcher], name="join")["channel_url"]
        on_b = EventCollector(b, watcher, session_key=a.session(watcher))
        assert on_b.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
        time.sleep(1.5)  # the reads of the setup's events are done

        def reads():
            return sum(v for (name, _), v in scrape_metrics(b).items() if name == "parley_event_log_reads_total")

        before = reads()
        count = 30
        for n in range(count):
            a.send(url, sender, f"j{n}")
        assert wait_for_texts(on_b, count, 20), len(on_b.message_frames())
        time.sleep(0.5)
        texts = [f[3] for f in on_b.message_frames()]
        assert texts == [f"j{n}" for n in range(count)]
        # One read per announcement would be 30; the periodic catch-up may add a few.
        assert reads() - before <= 8, reads() - before
        on_b.close()
    finally:
        for s in (a, b):
            s.stop()
        databases.drop_database(db)


def test_a_server_killed_while_holding_a_channel_lock_leaves_no_stall(two_servers):
    """Server A is killed (-9) while a write of its holds its channel's lock and its server's
    busy lock: PostgreSQL ends its session and its locks with it, so B's writers go on; B's streams get B's message, and A's message was never
    stored (nor acknowledged)."""
    a, b = two_servers
    sender, watcher = a.user("kill"), a.user("kill")
    url = a.channel([sender, watcher], name="kill")["channel_url"]
    on_b = EventCollector(b, watcher, session_key=a.session(watcher))
    assert on_b.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    answered = {}

    def held_send():
        try:
            r = a.request("POST", f"/v3/group_channels/{url}/messages", headers={"Parley-Test-Hold-Ms": "5000"},
                          json={"message_type": "MESG", "user_id": sender, "message": "never stored"})
            answered["status"] = r.status_code
        except Exception as e:  # the server died under the request
            answered["error"] = repr(e)

    thread = threading.Thread(target=held_send)
    thread.start()
    time.sleep(0.7)
    a.kill()
    thread.join(15)
    assert "status" not in answered, answered
    started = time.monotonic()
    b.send(url, sender, "after the kill")
    assert time.monotonic() - started < 5, "B's writer waited for the dead server's lock"
    assert wait_for_texts(on_b, 1), on_b.snapshot()
    time.sleep(0.3)
    assert message_texts(on_b) == ["after the kill"], on_b.snapshot()
    listed = b.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
    assert [m["message"] for m in listed["messages"]] == ["after the kill"]
    on_b.close()


def test_a_database_of_schema_3_numbers_past_the_bounds_it_reserved(tmp_path):
    """Before migration 4, servers on PostgreSQL handed numbers out in memory and kept a bound
    past them in sequences, not in `meta`. A database of that schema (made here from a new one
    by undoing migration 4, with bounds past what `meta` says) is migrated at start: numbers
    continue past the bounds, and the sequences are gone."""
    db = databases.database_for(tmp_path, "schema3")
    first = Server(db)
    a, b = first.user("m3"), first.user("m3")
    url = first.channel([a, b], name="m3")["channel_url"]
    before = first.send(url, a, "before")
    first.stop()
    databases.psql(db, UNDO_TO_SCHEMA_10 + """
        DELETE FROM schema_migrations WHERE version >= 4;
        DROP FUNCTION IF EXISTS parley_write_turn();
        DROP TABLE typing, server_nodes, presence, application_settings, polls, poll_options, poll_votes, poll_tombstones;
        ALTER TABLE messages DROP COLUMN poll_id;
        DROP TRIGGER messages_search_insert ON messages; DROP TRIGGER messages_search_update ON messages;
        DROP FUNCTION parley_message_search_trigger();
        ALTER TABLE messages DROP COLUMN search_vector; DROP FUNCTION parley_message_search_vector(text, text);
        DROP FUNCTION parley_search_text(text);
        DELETE FROM meta WHERE name = 'stored_events';
        CREATE SEQUENCE parley_reserved_seq MINVALUE 0 START 0;
        CREATE SEQUENCE parley_reserved_message_id MINVALUE 0 START 0;
        CREATE SEQUENCE parley_reserved_report_id MINVALUE 0 START 0;
        CREATE SEQUENCE parley_reserved_channel_number MINVALUE 0 START 0;
        SELECT setval('parley_reserved_seq', 50000);
        SELECT setval('parley_reserved_message_id', 70000);
        """)
    second = Server(db)
    try:
        after = second.send(url, b, "after")
        assert after["message_id"] == 70001, after
        reader = EventCollector(second, a, last_event_id=0)
        assert reader.wait_for(lambda fs: any(f["event"] == "message_received" and f["data"]["message"]["message"] == "after"
                                              for f in fs), 10), reader.snapshot()
        ids = [f["id"] for f in reader.snapshot() if f["event"] == "message_received"]
        assert ids[-1] > 50000 and ids[0] < 50000, ids
        reader.close()
        listed = second.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
        assert [m["message_id"] for m in listed["messages"]] == [before["message_id"], 70001]
        sequences = databases.psql(db, "SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relname LIKE 'parley_reserved%'")
        assert sequences.strip() == "0"
    finally:
        second.stop()
        databases.drop_database(db)


def test_one_req_id_sent_to_two_servers_at_once_stores_one_message(two_servers):
    """The same `req_id` sent by four clients at once, two through each server: one message is
    stored per `req_id`, all four answers name it, and a stream on either server gets one
    event for it."""
    a, b = two_servers
    sender, other = a.user("rq"), a.user("rq")
    url = a.channel([sender, other], name="rq")["channel_url"]
    key = a.session(other)
    streams = [EventCollector(a, other, session_key=key), EventCollector(b, other, session_key=key)]
    for stream in streams:
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    rounds = [f"both-{i}" for i in range(10)]
    answers = {req_id: [None] * 4 for req_id in rounds}
    gates = [threading.Barrier(4) for _ in rounds]

    def racer(k):
        server = a if k % 2 == 0 else b
        for req_id, gate in zip(rounds, gates):
            gate.wait(timeout=20)
            r = server.request("POST", f"/v3/group_channels/{url}/messages",
                               json={"message_type": "MESG", "user_id": sender, "message": f"{req_id} from {k}",
                                     "req_id": req_id})
            answers[req_id][k] = (r.status_code, r.json())

    threads = [threading.Thread(target=racer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    listed = a.ok("GET", f"/v3/group_channels/{url}/messages",
                  params={"message_ts": 0, "next_limit": 100, "prev_limit": 0})["messages"]
    assert sorted(m["req_id"] for m in listed) == sorted(rounds), [(m["req_id"], m["message"]) for m in listed]
    stored = {m["req_id"]: m["message_id"] for m in listed}
    for req_id in rounds:
        assert [s for s, _ in answers[req_id]] == [200] * 4, answers[req_id]
        assert {body["message_id"] for _, body in answers[req_id]} == {stored[req_id]}, (req_id, answers[req_id])
    for stream in streams:
        assert wait_for_texts(stream, len(rounds)), stream.snapshot()
    time.sleep(0.5)
    for stream in streams:
        assert [f[1] for f in stream.message_frames()] == [m["message_id"] for m in listed], stream.message_frames()
        stream.close()


def presence_of(server, user_id):
    u = server.ok("GET", f"/v3/users/{user_id}")
    return u["is_online"], u["last_seen_at"]


def test_a_stream_on_one_server_makes_the_user_online_on_every_server(two_servers):
    """The user's stream is on A: B shows them online (the user and their member entry), then,
    once the stream closes, offline with a last-seen time no earlier than the close."""
    a, b = two_servers
    user, friend = a.user("here"), a.user("here")
    url = a.channel([user, friend], name="presence")["channel_url"]
    assert presence_of(b, user) == (False, 0)
    stream = EventCollector(a, user)
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    assert wait_until(lambda: presence_of(b, user)[0]), "server B does not see the stream on A"
    members = b.ok("GET", f"/v3/group_channels/{url}/members")["members"]
    assert {m["user_id"]: m["is_online"] for m in members} == {user: True, friend: False}
    closed_at = int(time.time() * 1000)
    stream.close()
    assert wait_until(lambda: not presence_of(b, user)[0]), "server B still shows the user online"
    online, last_seen = presence_of(b, user)
    assert last_seen >= closed_at - 1000, (last_seen, closed_at)
    assert presence_of(a, user) == (online, last_seen)


def test_a_user_online_only_on_a_killed_server_goes_offline_elsewhere_once_it_is_taken_for_dead(two_servers):
    """A is killed (-9) with the user's only stream: no notification says the stream closed.
    B's heartbeats see A's heartbeat age past the 10 s window and stop counting A's streams
    (without a full read of every user), so B shows the user offline."""
    a, b = two_servers
    user = a.user("gone")
    stream = EventCollector(a, user)
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    assert wait_until(lambda: presence_of(b, user)[0]), "server B does not see the stream on A"
    killed_at = time.monotonic()
    a.kill()
    assert presence_of(b, user)[0], "B dropped the user before A could be taken for dead"
    assert wait_until(lambda: not presence_of(b, user)[0], timeout=20), "B still shows the user online"
    assert time.monotonic() - killed_at >= 8, "B took A for dead before its heartbeat window passed"


@pytest.fixture
def two_servers_two_streams_each(tmp_path):
    db = databases.database_for(tmp_path, "limited")
    servers = started_servers(db, 2, extra_args=["--max-streams-per-user", "2"])
    yield servers
    for s in servers:
        s.stop()
    databases.drop_database(db)


def open_status(server, user_id):
    r = requests.get(server.url(f"/v3/users/{user_id}/events"), headers={"Api-Token": API_TOKEN}, stream=True, timeout=10)
    status, body = r.status_code, (r.text if r.status_code != 200 else "")
    r.close()
    return status, body


def test_the_per_user_stream_limit_counts_the_streams_on_every_server(two_servers_two_streams_each):
    """At most 2 streams per user: one on A and one on B use both; a third is refused on
    either server (429, code 400120); once one closes, a stream opens again."""
    a, b = two_servers_two_streams_each
    user = a.user("limit")
    first = EventCollector(a, user)
    second = EventCollector(b, user)
    for status, body in (open_status(a, user), open_status(b, user)):
        assert status == 429, (status, body)
        assert json.loads(body)["code"] == 400120, body
    first.close()
    # Server A learns that the stream closed when its next heartbeat cannot go out.
    third = None
    deadline = time.monotonic() + 8
    while third is None and time.monotonic() < deadline:
        try:
            third = EventCollector(b, user)
        except AssertionError:
            time.sleep(0.2)
    assert third is not None, "the closed stream on A still counts"
    assert open_status(a, user)[0] == 429
    second.close()
    third.close()


def test_stream_opens_racing_on_both_servers_admit_exactly_the_limit(two_servers_two_streams_each):
    """Eight streams of one user open at once, four through each server: exactly two are
    admitted, the others refused with 429. Once the two close, the user is offline on both
    servers and two streams open again (the counts went back to zero, not below)."""
    a, b = two_servers_two_streams_each
    user = a.user("racing")
    outcomes, lock, start = [], threading.Lock(), threading.Barrier(8)

    def open_one(server):
        start.wait()
        r = requests.get(server.url(f"/v3/users/{user}/events"), headers={"Api-Token": API_TOKEN},
                         stream=True, timeout=10)
        with lock:
            outcomes.append(r)

    threads = [threading.Thread(target=open_one, args=(s,)) for s in (a, b) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    try:
        statuses = sorted(r.status_code for r in outcomes)
        assert statuses == [200, 200] + [429] * 6, statuses
        assert wait_until(lambda: presence_of(a, user)[0] and presence_of(b, user)[0])
    finally:
        for r in outcomes:
            r.close()
    assert wait_until(lambda: not presence_of(a, user)[0] and not presence_of(b, user)[0]), \
        "a closed stream still counts as online"
    again = [EventCollector(a, user), EventCollector(b, user)]
    assert open_status(a, user)[0] == 429
    for stream in again:
        stream.close()


def test_deactivating_a_user_ends_their_streams_on_every_server(two_servers):
    """The admin deactivates the user through A: their streams on A and on B both end with
    error 400301, and a stream no longer opens on B with their session key."""
    a, b = two_servers
    user = a.user("gone")
    key = a.session(user)
    streams = [EventCollector(server, user, session_key=key) for server in (a, b)]
    for stream in streams:
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    a.ok("PUT", f"/v3/users/{user}", json={"is_active": False})
    for name, stream in zip("AB", streams):
        assert stream.wait_for(lambda fs: any(f["event"] == "error" for f in fs), 10), (name, stream.snapshot())
        errors = [f["data"] for f in stream.snapshot() if f["event"] == "error"]
        assert errors == [{"code": 400301, "message": "The user was deactivated."}], (name, errors)
        with stream.cond:
            stream.cond.wait_for(lambda: stream.ended, timeout=5)
        assert stream.ended, name
        assert not [f for f in stream.snapshot() if f["event"] not in ("connected", "error")], stream.snapshot()
    r = requests.get(b.url(f"/v3/users/{user}/events"), headers={"Session-Key": key}, timeout=10)
    assert r.status_code in (401, 403), (r.status_code, r.text)
    # The event that ended them is no event of the wire: a resume does not show it.
    a.ok("PUT", f"/v3/users/{user}", json={"is_active": True})
    resumed = EventCollector(b, user, last_event_id=0)
    assert resumed.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    time.sleep(0.5)
    assert all(f["event"] in ("connected", "resync") for f in resumed.snapshot()), resumed.snapshot()
    resumed.close()


def test_typing_through_two_servers_lists_both_typers(two_servers):
    """One member types through A, another through B: B's typing event lists both, on a
    stream on either server; one stops through B: the next event lists the other alone."""
    a, b = two_servers
    first, second, watcher = a.user("typer"), a.user("typer"), a.user("typer")
    url = a.channel([first, second, watcher], name="typing")["channel_url"]
    on_a, on_b = EventCollector(a, watcher), EventCollector(b, watcher)
    for stream in (on_a, on_b):
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    a.ok("POST", f"/v3/group_channels/{url}/typing", json={"user_ids": [first]})
    b.ok("POST", f"/v3/group_channels/{url}/typing", json={"user_ids": [second]})
    b.ok("DELETE", f"/v3/group_channels/{url}/typing", json={"user_ids": [first]})
    expected = [sorted([first]), sorted([first, second]), [second]]
    for name, stream in (("A", on_a), ("B", on_b)):
        assert stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "typing_status") >= 3, 10), stream.snapshot()
        lists = [sorted(u["user_id"] for u in f["data"]["typing_users"])
                 for f in stream.snapshot() if f["event"] == "typing_status"]
        assert lists == expected, (name, lists)
        stream.close()


def test_a_database_restart_answers_503_with_retry_after_and_loses_nothing(two_servers):
    """PostgreSQL stops for two seconds while two senders (one per server) send with req_ids
    and retry as a client would: meanwhile requests get 503 with `Retry-After` and code 500902
    (never 500); the servers reconnect by themselves; afterwards every message is stored
    once, each acknowledged one with the id its answer gave, and a stream on either server
    received every one of them once."""
    a, b = two_servers
    sender, watcher = a.user("pg"), a.user("pg")
    url = a.channel([sender, watcher], name="restart")["channel_url"]
    streams = [EventCollector(a, watcher), EventCollector(b, watcher)]
    for stream in streams:
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    stop = threading.Event()
    acknowledged, refusals, others = {}, [], []

    def send_loop(server, prefix):
        n = 0
        while not stop.is_set():
            req_id = f"{prefix}-{n}"
            while True:
                try:
                    r = server.request("POST", f"/v3/group_channels/{url}/messages",
                                       json={"message_type": "MESG", "user_id": sender, "message": req_id, "req_id": req_id})
                except requests.RequestException as e:
                    others.append((req_id, repr(e)))
                    time.sleep(0.2)
                    continue
                if r.status_code == 200:
                    acknowledged[req_id] = r.json()["message_id"]
                    break
                if r.status_code == 503:
                    refusals.append((r.headers.get("Retry-After"), r.json().get("code")))
                    time.sleep(min(float(r.headers.get("Retry-After", "1")), 1.0))
                    continue
                others.append((req_id, r.status_code, r.text[:200]))
                break
            n += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=send_loop, args=(server, name), daemon=True)
               for server, name in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    try:
        time.sleep(0.7)
        databases.stop_cluster()
        stopped = len(acknowledged)
        time.sleep(2)
        assert len(acknowledged) <= stopped + 2, "requests were acknowledged while the database was down"
    finally:
        databases.start_cluster()
        restarted = time.monotonic()
        # Both servers answer again by themselves, and the senders go on.
        try:
            assert wait_until(lambda: len(acknowledged) > stopped + 10, timeout=20), (len(acknowledged), stopped, others[-3:])
        finally:
            stop.set()
            for t in threads:
                t.join(30)
    assert not any(t.is_alive() for t in threads), f"a sender is stuck: {others[-3:]}"
    assert time.monotonic() - restarted < 15
    assert not [o for o in others if len(o) == 3], others  # no answer but 200 or 503
    assert refusals, "no request was refused while the database was down"
    assert all(ra == "1" and code == 500902 for ra, code in refusals), refusals[:5]
    listed = a.ok("GET", f"/v3/group_channels/{url}/messages",
                  params={"message_ts": 0, "next_limit": 200, "prev_limit": 0})["messages"]
    stored = {m["req_id"]: m["message_id"] for m in listed}
    assert len(stored) == len(listed), "a req_id was stored twice"
    assert stored == acknowledged, (sorted(set(stored) ^ set(acknowledged)))
    for name, stream in zip("AB", streams):
        wait_for_texts(stream, len(listed), timeout=15)
        time.sleep(0.3)
        got = [f[1] for f in stream.message_frames()]
        want = [m["message_id"] for m in listed]
        assert got == want, (name, stream.ended, stream.error, sorted(set(want) - set(got)), [(f[0], f[1]) for f in stream.message_frames()])
        stream.close()


def test_a_server_lagging_past_the_retention_tells_its_streams_to_resync(tmp_path):
    """Server B is frozen (SIGSTOP) while A stores more events than the log keeps; once B runs
    again, the events it can no longer read are gone, and instead of skipping them silently
    its stream gets what was still there and one `resync` ("lagged") with the newest id it
    covers. The stream goes on live after it, and a resume from its last id is exact."""
    import signal
    db = databases.database_for(tmp_path, "lagging")
    a = Server(db, ["--event-retention", "5"])
    b = Server(db, ["--event-retention", "5"])
    try:
        sender, watcher = a.user("lag"), a.user("lag")
        url = a.channel([sender, watcher], name="lag")["channel_url"]
        on_b = EventCollector(b, watcher)
        assert on_b.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
        a.send(url, sender, "before")
        assert wait_for_texts(on_b, 1)
        assert not any(f["event"] == "resync" for f in on_b.snapshot()), "a resync without any lag"

        b.proc.send_signal(signal.SIGSTOP)
        try:
            sent = [a.send(url, sender, f"while frozen {n}") for n in range(20)]
        finally:
            b.proc.send_signal(signal.SIGCONT)
        assert on_b.wait_for(lambda fs: any(f["event"] == "resync" for f in fs), 15), on_b.snapshot()[-3:]
        time.sleep(0.5)
        frames = on_b.snapshot()
        resyncs = [f for f in frames if f["event"] == "resync"]
        assert len(resyncs) == 1, resyncs
        resync = resyncs[0]
        assert resync["data"]["reason"] == "lagged"
        assert resync["id"] == resync["data"]["last_event_id"]
        delivered = [f for f in frames if f["event"] == "message_received"]
        # Nothing out of order and nothing twice; what came is a tail of what was sent; the
        # resync's id is the newest id before it and below every id after it.
        ids = [f["id"] for f in delivered]
        assert ids == sorted(set(ids)), [(f["id"], f["event"]) for f in frames]
        position = frames.index(resync)
        assert all(f["id"] <= resync["id"] for f in frames[:position] if f["id"] is not None)
        assert all(f["id"] > resync["id"] for f in frames[position + 1:] if f["id"] is not None)
        texts = [f["data"]["message"]["message"] for f in delivered]
        assert texts[0] == "before" and texts[1:] == [m["message"] for m in sent][len(sent) - (len(texts) - 1):], texts
        assert len(texts) - 1 < len(sent), "every event arrived: B did not lag past the retention"

        last_seen = max(f["id"] for f in frames if f["id"] is not None)
        after = a.send(url, sender, "after the resync")
        assert on_b.wait_for(lambda fs: any(f["event"] == "message_received" and f["data"]["message"]["message"]
                                            == "after the resync" for f in fs), 10)
        resumed = EventCollector(a, watcher, last_event_id=last_seen)
        assert resumed.wait_for(lambda fs: any(f["event"] == "message_received" for f in fs), 10)
        time.sleep(0.3)
        assert [m[1] for m in resumed.message_frames()] == [after["message_id"]]
        lagged = sum(v for (name, _), v in scrape_metrics(b).items() if name == "parley_event_stream_resyncs_total")
        assert lagged == 1, lagged
        for stream in (on_b, resumed):
            stream.close()
    finally:
        for s in (a, b):
            s.stop()
        databases.drop_database(db)


def scrape_metrics(server):
    import re
    samples = {}
    for line in requests.get(server.url("/metrics"), timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, labels, value = re.fullmatch(r'([a-z_]+)(\{.*\})? (\S+)', line).groups()
            samples[(name, labels or "")] = float(value)
    return samples


def test_a_server_frozen_while_holding_a_channel_lock_stalls_the_others_only_until_postgresql_ends_it(two_servers):
    """Server A is frozen (SIGSTOP) while a write of its holds its channel's lock: its
    connection stays open, so only PostgreSQL's idle-session timeout (6 s; the held write has
    not begun its transaction) frees the lock. B's write then goes through; A's write is never stored, and A
    answers again once it runs."""
    import signal
    a, b = two_servers
    sender, watcher = a.user("frozen"), a.user("frozen")
    url = a.channel([sender, watcher], name="frozen")["channel_url"]
    answered = {}

    def held_send():
        try:
            r = a.request("POST", f"/v3/group_channels/{url}/messages", headers={"Parley-Test-Hold-Ms": "5000"},
                          json={"message_type": "MESG", "user_id": sender, "message": "never stored"}, timeout=60)
            answered["status"] = r.status_code
        except Exception as e:
            answered["error"] = repr(e)

    thread = threading.Thread(target=held_send)
    thread.start()
    time.sleep(0.7)
    a.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        r = b.request("POST", f"/v3/group_channels/{url}/messages", timeout=40,
                      json={"message_type": "MESG", "user_id": sender, "message": "after the freeze"})
        waited = time.monotonic() - started
        assert r.status_code == 200, r.text
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert 3 < waited < 12, f"B's writer waited {waited:.1f} s"
    thread.join(30)
    assert answered.get("status") != 200, answered
    listed = b.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
    assert [m["message"] for m in listed["messages"]] == ["after the freeze"]
    # A recovers: its pool replaces the ended session (a request on it may first get a 503).
    deadline = time.monotonic() + 10
    while a.request("POST", f"/v3/group_channels/{url}/messages",
                    json={"message_type": "MESG", "user_id": sender, "message": "A again"}).status_code != 200:
        assert time.monotonic() < deadline, "A did not recover"
        time.sleep(0.2)


def test_writes_that_fail_leave_no_lock_held(two_servers):
    """A writer holds the locks of its channels and its server's busy lock to the end of its
    transaction (Writers/StreamPositions.swift); a write that fails, however, leaves
    none held by a pooled connection. After failures of several kinds on A, no session holds an
    advisory lock and B writes the same channel at once."""
    a, b = two_servers
    sender = a.user("locks")
    url = a.channel([sender, a.user("locks")], name="locks")["channel_url"]
    outsider = a.user("locks")
    failures = [
        ("POST", "/v3/group_channels/no-such-channel/messages", {"message_type": "MESG", "user_id": sender, "message": "x"}),
        ("POST", f"/v3/group_channels/{url}/messages", {"message_type": "MESG", "user_id": "no-such-user", "message": "x"}),
        ("PUT", "/v3/group_channels/no-such-channel", {"name": "x"}),
        ("POST", f"/v3/group_channels/{url}/messages", {"message_type": "MESG", "user_id": outsider, "message": "x"}),
    ]
    for round in range(3):
        for method, path, body in failures:
            r = a.request(method, path, json=body)
            assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
        a.send(url, sender, text=f"between {round}")
    held = databases.psql(b.db_path, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
    assert held.strip() == "0", held
    started = time.monotonic()
    b.send(url, sender, text="on the other server")
    assert time.monotonic() - started < 2
    listed = b.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
    assert [m["message"] for m in listed["messages"]] == [f"between {round}" for round in range(3)] + ["on the other server"]


def test_the_reads_that_follow_another_server_are_planned_once(two_servers):
    """Server B reads the events server A committed with two prepared statements per message
    (the events, then the channels they changed). Once the event log holds thousands of rows,
    PostgreSQL judges that statement's generic plan dearer than one made for the values and
    plans it again at every execution, which costs more than running it. B makes those reads
    on sessions that always use the generic plan: a plan per session, however many reads.
    (On the pool's sessions, as before, this test counted 41 plans for 40 reads.)"""
    a, b = two_servers
    db = a.db_path
    if "pg_stat_statements" not in databases.psql(db, "SHOW shared_preload_libraries"):
        pytest.skip("pg_stat_statements is not loaded in this cluster (scripts/pg-test-cluster.sh loads it)")
    databases.psql(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    members = [a.user("planned") for _ in range(2)]
    url = a.channel(members, name="planned")["channel_url"]
    # A long log, made by hand: ids below any the servers take, so no reader asks for them
    # (the log's size the servers count leaves them out: a prune would take them first, and
    # none comes near here); rows of a real event's size, as the planner's estimates follow
    # the table's pages.
    databases.psql(db, "INSERT INTO events (id, created_at, category, recipients, data, changed_channel) "
                       "SELECT -n, 0, 'message_received', '', repeat('x', 2000), 'elsewhere-' || n % 100 "
                       "FROM generate_series(1, 20000) AS n; "
                       "ANALYZE events")
    stream = EventCollector(b, members[1], session_key=b.session(members[1]))
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    warm_up, count = 4, 40
    for n in range(warm_up + count):
        if n == warm_up:
            databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        a.send(url, members[0], text=f"p{n}")
        # One read per message: the next is sent once B has delivered this one.
        assert wait_for_texts(stream, n + 1), n
    stream.close()
    assert message_texts(stream) == [f"p{n}" for n in range(warm_up + count)]
    # A generic plan per session of B's reads (PostgresDatabase.peerReadConnections), made
    # again only when a table it reads is analyzed.
    for statement in ["SELECT b.pruned, %", "% AS k(url, mark) %"]:
        calls, plans = databases.psql(db, f"SELECT calls, plans FROM pg_stat_statements WHERE dbid = {this_database} "
                                          f"AND query LIKE '{statement}' ORDER BY calls DESC LIMIT 1").strip().split("|")
        assert int(calls) >= count, (statement, calls, plans)
        assert int(plans) * 4 <= int(calls), f"{statement}: {plans} plans for {calls} reads"


def test_the_reads_that_follow_another_server_do_not_grow_with_the_stored_messages(two_servers):
    """Server B loads the channel of each message server A commits with a prepared statement
    whose generic plan is made once per session, here while `messages` holds a handful of
    rows. The last message is looked up by its id whatever that plan guessed: once the table
    holds thousands of rows more (not analyzed since), a load reads about as many pages as
    before. (Looked up by an array of ids, the plan scanned the whole table: every load read
    every page of `messages`.)"""
    a, b = two_servers
    db = a.db_path
    if "pg_stat_statements" not in databases.psql(db, "SHOW shared_preload_libraries"):
        pytest.skip("pg_stat_statements is not loaded in this cluster (scripts/pg-test-cluster.sh loads it)")
    databases.psql(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    # Plans are made again when a table they read is analyzed: not during this test.
    databases.psql(db, "ALTER TABLE messages SET (autovacuum_enabled = false)")
    members = [a.user("pages") for _ in range(2)]
    url = a.channel(members, name="pages")["channel_url"]
    stream = EventCollector(b, members[1], session_key=b.session(members[1]))
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    load = f"FROM pg_stat_statements WHERE dbid = {this_database} AND query LIKE '% AS k(url, mark) %'"

    def pages_per_load(first, count):
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        for n in range(first, first + count):
            a.send(url, members[0], text=f"p{n}")
            assert wait_for_texts(stream, n + 1), n
        calls, pages = databases.psql(db, f"SELECT sum(calls), sum(shared_blks_hit + shared_blks_read) {load}").strip().split("|")
        assert int(calls) >= count, (calls, pages)
        return int(pages) / int(calls)

    try:
        # Past the plans made for the values (five per session), to the generic one.
        before = pages_per_load(0, 12)
        # Other channels' messages with 1,280 characters of data that do not compress, ids below
        # any the servers take: some 2,000 pages.
        databases.psql(db, "INSERT INTO messages SELECT (jsonb_populate_record(m, jsonb_build_object("
                           "'id', -n, 'channel_url', 'elsewhere-' || n % 100, 'req_id', '', "
                           "'data', (SELECT string_agg(md5(n::text || k), '') FROM generate_series(1, 40) AS k)))).* "
                           "FROM messages m, generate_series(1, 10000) AS n WHERE m.id = (SELECT max(id) FROM messages)")
        table = int(databases.psql(db, "SELECT pg_relation_size('messages') / 8192").strip())
        after = pages_per_load(12, 12)
    finally:
        stream.close()
    assert table >= 1500, table
    # A load reads some tens of pages, more as the channel's row and members gather dead
    # versions; the whole table would be thousands.
    assert after <= before + 200, f"{before:.0f} pages per load before, {after:.0f} with {table} pages of messages more"


def channel_streamed_on_the_other_server(a, b, name, count):
    """A channel of `count` new users made on server A, and a stream of its second member on
    server B, connected: (database, members, url, stream). Skips the test when the cluster does
    not load pg_stat_statements, which the callers count statements with."""
    db = a.db_path
    if "pg_stat_statements" not in databases.psql(db, "SHOW shared_preload_libraries"):
        pytest.skip("pg_stat_statements is not loaded in this cluster (scripts/pg-test-cluster.sh loads it)")
    databases.psql(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    members = [a.user(name) for _ in range(count)]
    url = a.channel(members, name=name)["channel_url"]
    stream = EventCollector(b, members[1], session_key=b.session(members[1]))
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    return db, members, url, stream


def test_a_server_checks_the_users_of_another_servers_channel_with_its_load(two_servers):
    """Server B reloads the channel of each message server A commits from its cached copy; the
    versions of the users that copy shows and of the new last message's sender are read by the
    same statement, not by one of their own after it. The same when B's writer reloads the
    channel A wrote under it, and when B renders a typing event of a channel it holds as
    stored: the users are read with the channel's version."""
    a, b = two_servers
    db, members, url, stream = channel_streamed_on_the_other_server(a, b, "checked", 5)
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"

    def calls(pattern):
        return statement_calls(db, pattern)

    try:
        for n in range(3):
            a.send(url, members[0], text=f"c{n}")
            assert wait_for_texts(stream, n + 1), n
        # B's record cache holds every member's user.
        assert len(b.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})["members"]) == 5
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        texts = [f"c{n}" for n in range(3)]
        for n in range(3, 13):
            a.send(url, members[n % 5], text=f"c{n}")
            texts.append(f"c{n}")
            assert wait_for_texts(stream, len(texts)), n
            a.ok("POST", f"/v3/group_channels/{url}/typing", json={"user_ids": [members[n % 5]]})
            assert stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "typing_status") >= n - 2, 10), n
            # B's send right after A's: B's writer finds its copy stale, mostly.
            a.send(url, members[(n + 2) % 5], text=f"a{n}")
            b.send(url, members[0], text=f"b{n}")
            texts += [f"a{n}", f"b{n}"]
            assert wait_for_texts(stream, len(texts)), n
        loads, checks = calls("% AS k(url, mark) %"), calls("SELECT user_id, version FROM users%")
    finally:
        stream.close()
    assert message_texts(stream) == texts
    assert loads >= 10
    # Apart, one check per load and per typing event (18 for 30 loads). B's writer racing its
    # reads of the channel still checks a few now and then (up to 3 seen).
    assert checks <= 5, f"{checks} checks of users for {loads} loads"


def test_a_server_delivers_another_servers_commits_with_the_bound_their_announcement_carries(two_servers):
    """Server A's announcement of a commit carries the sequence's last value and the floors of
    the busy servers, read after its commit (CommitFollowUp.swift): server B takes its bound
    from it and reads only the events, with no read of the bound of its own per announcement.
    Only each server's catch-up every second reads one."""
    a, b = two_servers
    db, members, url, stream = channel_streamed_on_the_other_server(a, b, "told", 3)
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    try:
        for n in range(2):
            a.send(url, members[0], text=f"t{n}")
            assert wait_for_texts(stream, n + 1), n
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        began = time.monotonic()
        sends = 20
        for n in range(2, 2 + sends):
            a.send(url, members[n % 3], text=f"t{n}")
            assert wait_for_texts(stream, n + 1), n
        elapsed = time.monotonic() - began
        bound_reads = statement_calls(db, "%parley_stream_bound%")
        announcements = statement_calls(db, "%parley_follow_up%")
    finally:
        stream.close()
    assert message_texts(stream) == [f"t{n}" for n in range(2 + sends)]
    assert announcements >= sends // 2, announcements
    # One a second on each server; one per announcement heard before (20 or more).
    assert bound_reads <= 2 * (int(elapsed) + 2), f"{bound_reads} reads of the bound in {elapsed:.1f} s"


def test_a_message_reaches_a_user_the_same_from_either_server(two_servers):
    """A user with a stream on each server receives each event of the channel twice: rendered
    by the server that wrote it, from what its request loaded, and by the other one, from what
    it read after (for a message, its channel without members and the users that render names:
    operators, creator, each recipient's inviter, the sender and the mentions). The two frames
    are the same, field by field."""
    a, b = two_servers
    creator = a.user("creator", nickname="Creator", profile_url="https://example.com/creator.png")
    operator = a.user("operator", nickname="Operator")
    inviter = a.user("inviter", nickname="Inviter", metadata={"team": "blue"})
    receiver = a.user("receiver", nickname="Receiver")
    others = [a.user("other", nickname=f"Other {n}") for n in range(3)]
    url = a.channel([creator, operator, inviter] + others, name="twice", operator_ids=[operator],
                    inviter_id=creator)["channel_url"]
    a.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [receiver], "inviter_id": inviter})
    here, there = EventCollector(a, receiver), EventCollector(b, receiver)
    try:
        for stream in (here, there):
            assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
        def channel_events(frames):
            return [f for f in frames if f["event"] in ("message_received", "mention", "read_status")]

        # Each change once both streams have the one before: a server renders another one's
        # event from the channel as it reads it, which a later change would already be in.
        for write, count in [
            (lambda: a.send(url, others[0], text="first", mentioned_user_ids=[inviter, receiver], mention_type="users"), 2),
            (lambda: b.send(url, others[1], text="second"), 3),
            (lambda: a.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": others[2]}), 4),
            (lambda: b.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": operator}), 5),
        ]:
            write()
            for stream in (here, there):
                assert stream.wait_for(lambda fs: len(channel_events(fs)) >= count, 10), stream.snapshot()
        categories = ["message_received", "mention", "message_received", "read_status", "read_status"]
        mine, theirs = channel_events(here.snapshot()), channel_events(there.snapshot())
    finally:
        here.close()
        there.close()
    assert [f["event"] for f in mine] == categories
    for one, other in zip(mine, theirs):
        assert (one["id"], one["event"]) == (other["id"], other["event"])
        assert one["data"] == other["data"], one["event"]
    first = mine[0]["data"]
    assert first["channel"]["created_by"]["nickname"] == "Creator"
    assert [op["nickname"] for op in first["channel"]["operators"]] == ["Operator"]
    assert first["channel"]["inviter"]["metadata"] == {"team": "blue"}
    assert [u["nickname"] for u in first["channel"]["last_message"]["mentioned_users"]] == ["Inviter", "Receiver"]
    assert [m["nickname"] for m in mine[3]["data"]["changed_members"]] == ["Other 2"]


def test_a_server_loads_the_channels_of_another_servers_events_only_for_its_own_streams(two_servers):
    """Server B loads and renders a channel of server A's events only when one of their
    recipients has a stream on B: with no stream open there, B does not read A's events at
    all; with one, ten messages into a channel none of whose members is connected there cost
    B reads and no load; one into the channel streamed there is loaded and delivered."""
    a, b = two_servers
    quiet = [a.user("quiet") for _ in range(2)]
    watched = [a.user("watched") for _ in range(2)]
    quiet_url = a.channel(quiet, name="quiet")["channel_url"]
    watched_url = a.channel(watched, name="watched")["channel_url"]
    reads = metric(b, "parley_event_log_reads_total")
    for n in range(3):
        a.send(quiet_url, quiet[0], text=f"unseen {n}")
    time.sleep(1.5)  # past B's catch-up, every second
    assert metric(b, "parley_event_log_reads_total") == reads
    stream = EventCollector(b, watched[1], session_key=b.session(watched[1]))
    try:
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
        loads = metric(b, "parley_channel_loads_total")
        for n in range(10):
            reads = metric(b, "parley_event_log_reads_total")
            a.send(quiet_url, quiet[n % 2], text=f"quiet {n}")
            assert wait_until(lambda: metric(b, "parley_event_log_reads_total") > reads), n
        assert metric(b, "parley_channel_loads_total") == loads
        a.send(watched_url, watched[0], text="watched")
        assert wait_for_texts(stream, 1)
        assert metric(b, "parley_channel_loads_total") > loads
    finally:
        stream.close()
    assert message_texts(stream) == ["watched"]


SENDS = 'parley_http_requests_total{method="POST",route="/v3/group_channels/:channel_url/messages",status="200"}'


def sends_answered(server):
    try:
        return metric(server, SENDS)
    except AssertionError:  # no send answered yet: the series is not there
        return 0


def test_the_balancer_of_docs_deployment_sends_a_channels_requests_to_one_server(two_servers, tmp_path):
    """HAProxy configured by channel (docs/DEPLOYMENT.md): every send into one channel, with or
    without a query, reaches the same server, and sends into 16 channels reach both; with that
    server stopped, the channel's sends go to the other and are answered."""
    a, b = two_servers
    balancer = Balancer(tmp_path / "haproxy", [a.base.removeprefix("http://"), b.base.removeprefix("http://")],
                        by_channel=True)
    try:
        # The test's helpers, through the balancer (a view of no process of its own).
        entry = object.__new__(Server)
        entry.base = balancer.url
        alice, bob = entry.user("alice"), entry.user("bob")
        hot = entry.channel([alice, bob], channel_url=f"hot-{alice}")["channel_url"]
        spread = [entry.channel([alice, bob], channel_url=f"spread-{n}-{alice}")["channel_url"] for n in range(16)]

        before = [sends_answered(a), sends_answered(b)]
        for n in range(10):
            entry.send(hot, alice if n % 2 else bob, text=f"hot {n}")
        assert entry.request("POST", f"/v3/group_channels/{hot}/messages", params={"x": "1"},
                             json={"message_type": "MESG", "user_id": alice, "message": "hot 10"}).status_code == 200
        after = [sends_answered(a), sends_answered(b)]
        assert sorted(now - then for now, then in zip(after, before)) == [0, 11], (before, after)
        owner, other = (a, b) if after[0] > before[0] else (b, a)

        for url in spread:
            entry.send(url, alice, text="spread")
        spread_counts = [sends_answered(a) - after[0], sends_answered(b) - after[1]]
        assert sum(spread_counts) == 16 and min(spread_counts) > 0, spread_counts

        owner.stop()
        taken_over = sends_answered(other)
        for n in range(3):
            entry.send(hot, alice, text=f"after the stop {n}")
        assert sends_answered(other) - taken_over == 3
        texts = [m["message"] for m in other.ok("GET", f"/v3/group_channels/{hot}/messages",
                                                  params={"message_ts": 0, "prev_limit": 0, "next_limit": 50})["messages"]]
        assert texts == [f"hot {n}" for n in range(11)] + [f"after the stop {n}" for n in range(3)]
    finally:
        balancer.stop()


def statement_calls(db, pattern):
    """Calls of this database's statements whose text is like `pattern`, since pg_stat_statements' last reset."""
    this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    return int(databases.psql(db, f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = {this_database} "
                                  f"AND query LIKE '{pattern}' AND query NOT LIKE '%pg_stat_statements%'").strip())


@contextlib.contextmanager
def counted_statements(tmp_path, name):
    """A PostgreSQL database with pg_stat_statements and a server on it, with a channel of two
    users and a session key of the first: (database, server, channel url, session key). Skips
    the test when the cluster does not load pg_stat_statements."""
    db = databases.database_for(tmp_path, name)
    if "pg_stat_statements" not in databases.psql(db, "SHOW shared_preload_libraries"):
        pytest.skip("pg_stat_statements is not loaded in this cluster (scripts/pg-test-cluster.sh loads it)")
    databases.psql(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    server = Server(db)
    try:
        a, b = server.user(), server.user()
        url = server.channel([a, b])["channel_url"]
        yield db, server, url, server.session(a)
    finally:
        server.stop()
        databases.drop_database(db)


def send_at_once(server, url, senders, rounds):
    """Each sender sends `rounds` messages into `url` ("<sender>-<n>"), one after another, all
    senders starting together: many sends queue behind another of the channel."""
    gate = threading.Barrier(len(senders))
    failures = []

    def send_all(sender):
        gate.wait()
        try:
            for n in range(rounds):
                server.send(url, sender, text=f"{sender}-{n}")
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=send_all, args=(sender,)) for sender in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures


def test_a_batch_member_reads_the_sender_of_the_next_with_its_last_statement(tmp_path, monkeypatch):
    """Writers of one channel queued behind each other share a transaction; each reads, with
    its last statement, what the next one's first would: its numbers and the versions of the
    users it needs. Those include the users the queued sends name in their bodies (admin sends
    from different senders), so no member looks its sender up in a statement of its own."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    with counted_statements(tmp_path, "batch-senders") as (db, server, url, key):
        senders = [server.user("sender") for _ in range(8)]
        server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": senders})
        for n, sender in enumerate(senders):
            server.send(url, sender, text=f"warm{n}")
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        batched_before = metric(server, "parley_writes_batched_total")
        rounds = 8
        send_at_once(server, url, senders, rounds)
        batched = metric(server, "parley_writes_batched_total") - batched_before
        checks = statement_calls(db, "SELECT user_id, version FROM users%")
        listed = server.ok("GET", f"/v3/group_channels/{url}/messages",
                           params={"message_ts": 2 ** 53, "prev_limit": 200, "next_limit": 0})["messages"]
    for sender in senders:
        assert [m["message"] for m in listed if m["user"]["user_id"] == sender][-rounds:] == [f"{sender}-{n}" for n in range(rounds)]
    # Eight senders at once on two cores: many sends queue behind another.
    assert batched >= rounds, f"only {batched} of {len(senders) * rounds} sends joined a batch"
    # Apart, one lookup per member whose sender the member before did not read (40 of 40);
    # a writer that joins the queue as the member before reads may still look one up.
    assert checks * 8 <= batched, f"{checks} lookups of users for {batched} batched sends"


def test_a_begin_a_savepoint_or_a_batchs_commit_takes_no_round_trip_of_its_own(tmp_path, monkeypatch):
    """A transaction's BEGIN and the savepoint of a writer that joins its channel's batch
    (Writers/ChannelBatch.swift) go out with the statement after them, and the batch's COMMIT
    with its last member's write, each in one round trip: read from what the server sends
    PostgreSQL through a relay while sends batch and reads and other writes run, no round trip
    holds only those; every member stored its sends in order."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    db = databases.database_for(tmp_path, "batch-savepoints")
    relay = RoundTripCounter.before(db)
    server = None
    try:
        server = Server(relay.url(db))
        senders = [server.user("sender") for _ in range(8)]
        url = server.channel(senders)["channel_url"]
        for n, sender in enumerate(senders):
            server.send(url, sender, text=f"warm{n}")
        batched_before = metric(server, "parley_writes_batched_total")
        rounds = 8
        relay.recording = True
        send_at_once(server, url, senders, rounds)
        server.ok("PUT", f"/v3/group_channels/{url}", json={"name": "renamed"})
        server.ok("GET", f"/v3/users/{senders[0]}/my_group_channels", params={"limit": 10})
        relay.recording = False
        batched = metric(server, "parley_writes_batched_total") - batched_before
        listed = server.ok("GET", f"/v3/group_channels/{url}/messages",
                           params={"message_ts": 2 ** 53, "prev_limit": 200, "next_limit": 0})["messages"]
    finally:
        if server:
            server.stop()
        relay.close()
        databases.drop_database(db)
    turns = [statements_in(sent) for sent in relay.sent]
    with_savepoint = [t for t in turns if any(s.startswith("SAVEPOINT") for s in t)]
    with_begin = [t for t in turns if any(s.startswith("BEGIN") for s in t)]
    assert batched >= rounds, f"only {batched} of {len(senders) * rounds} sends joined a batch"
    # Each member that joined a batch took a savepoint (one more for each attempt run again);
    # each batch, the rename and the listing's read began a transaction.
    assert len(with_savepoint) >= batched, (len(with_savepoint), batched)
    assert len(with_begin) >= 3, with_begin
    alone = [t for t in turns if t and all(s.startswith(("SAVEPOINT", "BEGIN")) for s in t)]
    assert not alone, f"{len(alone)} round trips held only a BEGIN or a savepoint: {alone[:3]}"
    # A batch's COMMIT goes with its last statement (the one that keeps its locks to the commit),
    # the last member's write: a member that nobody queued behind ends the batch.
    batch_commits, lone, with_last_member = 0, 0, 0
    for connection in relay.sent_by_connection:
        batch = False
        for statements in map(statements_in, connection):
            if any(s.startswith("BEGIN") for s in statements):
                batch = False
            batch = batch or any(s.startswith("SAVEPOINT") for s in statements)
            if "COMMIT" in statements and batch:
                batch_commits += 1
                lone += statements == ["COMMIT"]
                with_last_member += any(s.startswith("SAVEPOINT") for s in statements)
    assert batch_commits >= 1, batch_commits
    assert lone == 0, f"{lone} of {batch_commits} batches sent their COMMIT alone"
    assert with_last_member == batch_commits, f"{batch_commits - with_last_member} of {batch_commits} batches ended in a round trip of their own"
    for sender in senders:
        assert [m["message"] for m in listed if m["user"]["user_id"] == sender][-rounds:] == [f"{sender}-{n}" for n in range(rounds)]


def test_a_writes_statements_go_in_one_round_trip(tmp_path, monkeypatch):
    """What a request writes once its reads are done goes to PostgreSQL in one round trip,
    however many statements it takes (RecordTables.write): a channel made with its operators,
    metadata set, a ban, a member leaving, a user with metadata changed, a channel deleted.
    Read from what the server sends through a relay: exactly one round trip of each request
    changes a table. What each request changed reads back as the request answered."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    db = databases.database_for(tmp_path, "one-write")
    relay = RoundTripCounter.before(db)
    server = None
    changing = ("INSERT", "UPDATE", "DELETE", "WITH")
    try:
        server = Server(relay.url(db))
        a, b, c = server.user(), server.user(), server.user()
        server.channel([a, b])

        def writes_of(request):
            before = len(relay.sent)
            answer = request()
            turns = [statements_in(sent) for sent in relay.sent[before:]]
            return answer, [t for t in turns if any(s.lstrip().upper().startswith(changing) for s in t)]

        relay.recording = True
        made, turns = writes_of(lambda: server.ok("POST", "/v3/group_channels", json={
            "user_ids": [a, b, c], "operator_ids": [a], "name": "one trip"}))
        url = made["channel_url"]
        assert len(turns) == 1, turns
        _, turns = writes_of(lambda: server.ok("POST", f"/v3/group_channels/{url}/metadata",
                                               json={"metadata": {"k1": "v1", "k2": "v2"}}))
        assert len(turns) == 1, turns
        _, turns = writes_of(lambda: server.ok("POST", f"/v3/group_channels/{url}/ban",
                                               json={"user_id": c, "seconds": 600}))
        assert len(turns) == 1, turns
        _, turns = writes_of(lambda: server.ok("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [b]}))
        assert len(turns) == 1, turns
        _, turns = writes_of(lambda: server.ok("PUT", f"/v3/users/{a}", json={
            "nickname": "renamed", "metadata": {"x": "1", "y": "2", "z": "3"}}))
        assert len(turns) == 1, turns
        channel = server.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true", "show_metadata": "true"})
        assert channel["name"] == "one trip" and channel["metadata"] == {"k1": "v1", "k2": "v2"}
        operators = server.ok("GET", f"/v3/group_channels/{url}/operators")["operators"]
        assert [o["user_id"] for o in operators] == [a]
        assert sorted(m["user_id"] for m in channel["members"]) == [a]
        banned = server.ok("GET", f"/v3/group_channels/{url}/ban")["banned_list"]
        assert [x["user"]["user_id"] for x in banned] == [c]
        user = server.ok("GET", f"/v3/users/{a}")
        assert user["nickname"] == "renamed" and user["metadata"] == {"x": "1", "y": "2", "z": "3"}
        _, turns = writes_of(lambda: server.ok("DELETE", f"/v3/group_channels/{url}"))
        assert len(turns) == 1, turns
        assert server.request("GET", f"/v3/group_channels/{url}").status_code == 404
    finally:
        relay.recording = False
        if server:
            server.stop()
        relay.close()
        databases.drop_database(db)


def test_the_statements_of_every_send_are_prepared(tmp_path):
    """A send's lock statement (which reads its session and earlier send too) and its write run
    as prepared statements (Storage/Postgres/HotStatements.swift): PostgreSQL plans each a few
    times per connection, then keeps a generic plan, instead of parsing and planning it at
    every send. The check of the key before the body runs once for the lot (`RecentSessions`)."""
    with counted_statements(tmp_path, "prepared") as (db, server, url, key):
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        sends = 120
        for n in range(sends):
            server.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                      json={"message_type": "MESG", "message": f"m{n}", "req_id": f"prepared-{n}"})
        def calls_and_plans(pattern):
            row = databases.psql(db, f"SELECT sum(calls), sum(plans) FROM pg_stat_statements WHERE dbid = {this_database} "
                                     f"AND query LIKE '{pattern}' AND query NOT LIKE '%pg_stat_statements%'").strip()
            return tuple(int(x or 0) for x in row.split("|"))

        for statement in ("%parley_lock_expecting%", "WITH %parley_hold_to_commit%"):
            calls, plans = calls_and_plans(statement)
            assert calls >= sends, (statement, calls, plans)
            # Unprepared, every call is planned: plans == calls.
            assert plans * 2 <= calls, f"{statement}: {plans} plans for {calls} calls"
        # The sends take well under 10 s here; one check after each 10 s otherwise.
        assert calls_and_plans("%FROM sessions s LEFT JOIN users%")[0] <= 3


def test_no_statement_of_a_send_is_planned_at_every_call(tmp_path):
    """Nested statements too (pg_stat_statements tracks every level here): the statements of the
    writer's lock function, those over `generate_series(1, numbers)` among them, keep a plan
    per connection (migration 26, Writers/StreamPositions.swift `definitionsPlannedOnce`)."""
    with counted_statements(tmp_path, "planned") as (db, server, url, key):
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
        name = databases.psql(db, "SELECT current_database()").strip()
        databases.psql(db, f'ALTER DATABASE "{name}" SET pg_stat_statements.track = \'all\'')
        # The server's connections were opened before: new ones take the setting.
        server.stop()
        server.start()
        for n in range(10):
            server.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                      json={"message_type": "MESG", "message": f"w{n}", "req_id": f"planned-warm-{n}"})
        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        sends = 120
        for n in range(sends):
            server.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                      json={"message_type": "MESG", "message": f"m{n}", "req_id": f"planned-{n}"})
        rows = databases.psql(db, f"SELECT calls, plans, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                                  f"WHERE dbid = {this_database} AND calls >= {sends} AND query NOT LIKE '%pg_stat_statements%'")
        statements = [line.split("|", 2) for line in rows.splitlines() if line]
        assert any("generate_series(1, numbers)" in query for _, _, query in statements), rows
        for calls, plans, query in statements:
            assert int(plans) * 2 <= int(calls), f"{plans} plans for {calls} calls: {query[:160]}"


def test_a_server_alone_delivers_its_commits_with_no_statement_after_them(tmp_path):
    """A writer reads the bound with its numbers (docs/ARCHITECTURE.md "Order across servers",
    *A writer's own bound*): a server alone on its database delivers each send's event once it
    commits, with no follow-up statement (floor, announcement, bound), and counts the log only
    when its own estimate passes the retention. Once a second server runs on the database, the
    first one's commits are followed up again: the second one's streams receive them too."""
    with counted_statements(tmp_path, "own-bound") as (db, server, url, key):
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
        follow_ups = f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = {this_database} " \
                     "AND query LIKE '%parley_follow_up%'"
        counts = f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = {this_database} " \
                 "AND query LIKE 'SELECT count(*) FROM (SELECT%events%'"
        # Every member's stream receives every message of the channel, the sender's own included.
        receiver = server.ok("GET", f"/v3/group_channels/{url}/members")["members"][1]["user_id"]
        here = EventCollector(server, receiver)
        try:
            def send(n):
                server.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                          json={"message_type": "MESG", "message": f"alone-{n}", "req_id": f"alone-{n}"})

            send(0)
            wait_for_texts(here, 1)
            # The first pruning counts the log (nothing is known of it yet); the estimate follows.
            time.sleep(1.5)
            databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
            for n in range(1, 21):
                send(n)
            wait_for_texts(here, 21)
            time.sleep(2.5)
            assert int(databases.psql(db, follow_ups).strip()) == 0
            assert int(databases.psql(db, counts).strip()) == 0

            second = Server(db)
            try:
                there = EventCollector(second, receiver)
                try:
                    # The second server's row is in `stream_writers` once it started: the first
                    # server's next writer sees it.
                    for n in range(21, 41):
                        send(n)
                    wait_for_texts(here, 41)
                    wait_for_texts(there, 20)
                    assert message_texts(there)[-20:] == [f"alone-{n}" for n in range(21, 41)]
                    assert int(databases.psql(db, follow_ups).strip()) > 0
                finally:
                    there.close()
            finally:
                second.stop()
        finally:
            here.close()
        assert message_texts(here) == [f"alone-{n}" for n in range(41)]


def test_a_send_makes_two_statements_and_no_transaction_of_its_own(tmp_path, monkeypatch):
    """A plain send with a session key and a request id, the caches warm, makes two statements
    (docs/ARCHITECTURE.md "Order across servers", *A send's round trips*), sent together: the
    lock statement (locks, numbers, the session and the earlier send, checked against what the
    handler was run on) and its one write. The key, found valid before the body of an earlier send was read, is not read again
    before this one's for a few seconds (`RecentSessions`). No read transaction, no lookup of
    its own for the session inside the write or for the earlier send. The server runs without
    the suites' self-checks, whose reads would count as the send's."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    with counted_statements(tmp_path, "round-trips") as (db, server, url, key):
        def send(n):
            return server.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                             json={"message_type": "MESG", "message": f"r{n}", "req_id": f"round-trip-{n}"})

        for n in range(5):
            send(n)
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"

        def calls(pattern):
            return statement_calls(db, pattern)

        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        sends = 20
        for n in range(5, 5 + sends):
            send(n)
        # Statements run once per send or more (what runs in the background is rarer), less the
        # follow-up after the commit, which runs apart.
        per_send = int(databases.psql(db, f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = {this_database} "
                                          f"AND calls >= {sends} AND query NOT LIKE '%parley_follow_up%' "
                                          "AND query NOT LIKE '%pg_stat_statements%'").strip())
        assert per_send == 2 * sends, per_send
        # The key was found valid before the first of them: not read again for 10 s.
        assert calls("%FROM sessions%") == 0
        assert calls("%parley_lock_expecting%") == sends
        assert calls("%parley_lock_channels%") == 0
        assert calls("%parley_hold_to_commit%") == sends
        assert calls("%coalesce(sender_id%") == 0
        assert calls("SELECT user_id, version FROM users%") == 0
        # A read transaction per send would make 20; the server's own background reads are rarer.
        assert calls("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") < sends // 4
        # A repeated request id still answers with the message stored first.
        first = send(5)
        again = send(5)
        assert again["message_id"] == first["message_id"]


def test_an_admin_send_reads_its_sender_and_mentions_with_its_first_statement(tmp_path, monkeypatch):
    """A send with the admin token names its sender and mentions in its body; the channel's
    members are not read with the lock statement (its events leave them out), so those users
    are, by name: each send is its two statements still, with no lookup of users of its own."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    with counted_statements(tmp_path, "admin-send") as (db, server, url, key):
        members = [m["user_id"] for m in server.ok("GET", f"/v3/group_channels/{url}/members")["members"]]
        more = [server.user("more") for _ in range(4)]
        server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": more})

        def send(n):
            return server.send(url, members[0], text=f"a{n}", mentioned_user_ids=[members[1], more[n % 4]],
                               mention_type="users")

        for n in range(5):
            send(n)
        this_database = "(SELECT oid FROM pg_database WHERE datname = current_database())"

        def calls(pattern):
            return statement_calls(db, pattern)

        databases.psql(db, f"SELECT pg_stat_statements_reset(0, {this_database}, 0)")
        sends = 20
        for n in range(5, 5 + sends):
            sent = send(n)
            assert [u["nickname"] for u in sent["mentioned_users"]] == [members[1], more[n % 4]]
        assert calls("%parley_lock_expecting%") == sends
        assert calls("SELECT user_id, version FROM users%") == 0


def test_a_send_is_one_round_trip_until_a_record_it_was_run_on_changed(tmp_path, monkeypatch):
    """With its channel, users and session known to the server, a send reaches PostgreSQL in one
    round trip (docs/ARCHITECTURE.md, *A send in one round trip*), counted by a relay in front
    of the database; what it answers, stores and delivers carries the numbers the database
    took. A send whose request id was used before, or whose cached channel another server
    changed, is refused by its lock statement and runs the usual way, with the same outcome as
    there; after the latter the channel's sends skip the flight for a while."""
    # The suites' self-check of the counters would add its own reads after each send.
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    db = databases.database_for(tmp_path, "one-flight")
    relay = RoundTripCounter.before(db)
    # Reading the other server's events late, this one keeps its copy of the channel stale.
    server = server_reading_peers_late(relay.url(db), monkeypatch, 5_000)
    other = None
    try:
        a, b = server.user(), server.user()
        url = server.channel([a, b])["channel_url"]
        key = server.session(a)
        stream = EventCollector(server, b)

        def send(n, on=server):
            return on.ok("POST", f"/v3/group_channels/{url}/messages", session=key,
                         json={"message_type": "MESG", "message": f"m{n}", "req_id": f"one-flight-{n}"})

        for n in range(3):
            send(n)
        flights = metric(server, "parley_writes_one_flight_total")
        fallbacks = metric(server, "parley_one_flight_fallbacks_total")
        before = relay.turns
        sends = 20
        sent = [send(n) for n in range(3, 3 + sends)]
        turns = relay.turns - before
        assert metric(server, "parley_writes_one_flight_total") - flights == sends
        assert metric(server, "parley_one_flight_fallbacks_total") == fallbacks
        # Two round trips a send would make 40; the server's own background statements are few.
        assert turns <= sends + 5, turns
        ids = [m["message_id"] for m in sent]
        assert ids == sorted(ids) and len(set(ids)) == sends
        # Each answer is the message as stored, field by field.
        for m in sent:
            assert server.ok("GET", f"/v3/group_channels/{url}/messages/{m['message_id']}") == m
        # Delivered under the numbers taken, in order.
        assert stream.wait_for(lambda frames: sum(f["event"] == "message_received" for f in frames) >= 3 + sends, 10)
        delivered = stream.message_frames()
        assert [f[1] for f in delivered][-sends:] == ids
        assert [f[0] for f in delivered] == sorted(f[0] for f in delivered)

        # User ids holding the separators of the lock statement's comparison, and a letter of two
        # bytes: each side writes every name with its length, so the rows still compare equal.
        odd = server.user(prefix="a|b;c:é")
        odd_url = server.channel([odd, server.user(prefix="|;")])["channel_url"]
        odd_key = server.session(odd)
        for n in range(2):
            server.ok("POST", f"/v3/group_channels/{odd_url}/messages", session=odd_key,
                      json={"message_type": "MESG", "message": f"odd{n}"})
        flights = metric(server, "parley_writes_one_flight_total")
        fallbacks = metric(server, "parley_one_flight_fallbacks_total")
        odd_sent = server.ok("POST", f"/v3/group_channels/{odd_url}/messages", session=odd_key,
                             json={"message_type": "MESG", "message": "odd", "req_id": "odd-flight"})
        assert metric(server, "parley_writes_one_flight_total") == flights + 1
        assert metric(server, "parley_one_flight_fallbacks_total") == fallbacks
        assert server.ok("GET", f"/v3/group_channels/{odd_url}/messages/{odd_sent['message_id']}") == odd_sent

        # A request id used before: the flight is refused, and the send answers with the
        # message stored first, once.
        fallbacks = metric(server, "parley_one_flight_fallbacks_total")
        again = send(3)
        assert again["message_id"] == sent[0]["message_id"]
        assert metric(server, "parley_one_flight_fallbacks_total") == fallbacks + 1
        listed = server.ok("GET", f"/v3/group_channels/{url}/messages",
                           params={"message_ts": 0, "prev_limit": 0, "next_limit": 100})["messages"]
        assert [m["message"] for m in listed].count("m3") == 1

        # Another server changes the channel: this one's copy is stale, its flight is refused,
        # and the send runs the usual way. (Alone until now, this server ran no statement after
        # its commits; with another server it follows each up with one.)
        other = Server(db)
        other.ok("PUT", f"/v3/group_channels/{url}", json={"name": "renamed elsewhere"})
        flights = metric(server, "parley_writes_one_flight_total")
        late = send(100)
        assert metric(server, "parley_one_flight_fallbacks_total") == fallbacks + 2
        assert server.ok("GET", f"/v3/group_channels/{url}/messages/{late['message_id']}") == late
        assert server.ok("GET", f"/v3/group_channels/{url}")["name"] == "renamed elsewhere"
        # For a while the channel's sends do not try (servers may be taking turns on it) ...
        send(101)
        assert metric(server, "parley_one_flight_fallbacks_total") == fallbacks + 2
        assert metric(server, "parley_writes_one_flight_total") == flights
        # ... then fly again, from the copy the usual way kept.
        time.sleep(2.2)
        send(102)
        assert metric(server, "parley_writes_one_flight_total") == flights + 1
        stream.close()
    finally:
        if other:
            other.stop()
        server.stop()
        relay.close()
        databases.drop_database(db)


def test_a_session_revoked_while_its_write_waits_fails_the_write(tmp_path):
    """A session key revoked after the request's authentication but before its write reads it
    fails the write with 401 and stores nothing: whether the write waits for the channel's
    lock held elsewhere (its first statement reads the session after the lock) or queues
    behind a writer of its channel on the same server (it joins that writer's transaction)."""
    db = databases.database_for(tmp_path, "revoked")
    server = Server(db)
    holder = databases.PsqlSession(db)
    try:
        a, b = server.user(), server.user()
        url = server.channel([a, b])["channel_url"]
        channel_lock = f"{0x7063}, hashtext('{url}')"

        def waiting_send(key, req_id, outcome):
            outcome.append(server.request("POST", f"/v3/group_channels/{url}/messages", session=key, timeout=30,
                                          json={"message_type": "MESG", "message": req_id, "req_id": req_id}))

        def wait_for(condition):
            deadline = time.monotonic() + 10
            while not condition():
                assert time.monotonic() < deadline
                time.sleep(0.05)

        # The channel's lock held by another session: the write waits in its first statement.
        key = server.session(a)
        holder.run(f"SELECT pg_advisory_lock({channel_lock})")
        outcome = []
        sender = threading.Thread(target=waiting_send, args=(key, "revoked-1", outcome))
        sender.start()
        wait_for(lambda: databases.psql(db, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'parley-server' "
                                            "AND wait_event_type = 'Lock' AND wait_event = 'advisory'").strip() != "0")
        databases.psql(db, f"DELETE FROM sessions WHERE token = '{key}'")
        holder.run(f"SELECT pg_advisory_unlock({channel_lock})")
        sender.join(30)
        assert outcome and outcome[0].status_code == 401, outcome and outcome[0].text

        # A writer of the channel on this server holds its transaction open: the send queues
        # behind it and continues its transaction.
        key = server.session(a)
        held = threading.Thread(target=lambda: server.request(
            "POST", f"/v3/group_channels/{url}/messages", headers={"Parley-Test-Hold-Ms": "1500"}, timeout=30,
            json={"message_type": "MESG", "user_id": b, "message": "held"}))
        held.start()
        time.sleep(0.3)
        outcome = []
        sender = threading.Thread(target=waiting_send, args=(key, "revoked-2", outcome))
        sender.start()
        time.sleep(0.3)
        databases.psql(db, f"DELETE FROM sessions WHERE token = '{key}'")
        held.join(30)
        sender.join(30)
        assert outcome and outcome[0].status_code == 401, outcome and outcome[0].text

        texts = [m["message"] for m in server.ok("GET", f"/v3/group_channels/{url}/messages",
                                                 params={"message_ts": 2**62, "prev_limit": 20})["messages"]]
        assert "held" in texts and "revoked-1" not in texts and "revoked-2" not in texts, texts
    finally:
        holder.close()
        server.stop()
        databases.drop_database(db)


def test_the_log_says_when_another_server_is_found_and_lost(tmp_path):
    """Each server's heartbeat reads which others run: B logs A found once both run, and A
    lost once A, killed, has sent no heartbeat for the alive window (10 s)."""
    import re
    db = databases.database_for(tmp_path, "found")
    a, b = started_servers(db, 2, extra_args=["--log-level", "notice"])
    try:
        node_a = re.search(r"node_id=([0-9a-f]{16})", a.log_text()).group(1)

        def wait_for_line(message, seconds):
            """Until a line of B's log carries `message` about A."""
            deadline = time.monotonic() + seconds
            while not any(message in line and f"node_id={node_a}" in line for line in b.log_text().splitlines()):
                assert time.monotonic() < deadline, b.log_text()[-2000:]
                time.sleep(0.2)

        wait_for_line("another server found", 10)
        assert "another server lost" not in b.log_text()
        a.kill()
        killed_at = time.monotonic()
        wait_for_line("another server lost: no heartbeat for 10 s", 20)
        assert time.monotonic() - killed_at > 5, "A was taken for dead before its heartbeat was old"
    finally:
        for s in (a, b):
            s.stop()
        databases.drop_database(db)


def test_the_stream_positions_of_servers_gone_are_removed_and_a_live_server_keeps_its_own(two_servers):
    """`stream_writers` keeps one row per server, read by every bound. A row of a server gone
    (no heartbeat row, not updated for a minute, its busy lock free) goes at the next heartbeat
    of a live server; one whose busy lock is held stays. A live server whose row was removed
    (as after being frozen for a minute) publishes it again before its next write takes a
    number, and the write succeeds."""
    a, b = two_servers
    db = a.db_path
    old = int(time.time() * 1000) - 3_600_000
    databases.psql(db, "INSERT INTO stream_writers (node, lock_key, floor, updated_at) VALUES "
                       f"('gone-free', 4242424242, 1, {old}), ('gone-busy', 4343434343, 1, {old}), "
                       f"('fresh', 4444444444, 1, {int(time.time() * 1000) + 600_000})")
    # A session of this test holds the busy lock of one of them, as a frozen server would.
    holder = databases.PsqlSession(db)
    try:
        holder.run("SELECT pg_advisory_lock_shared(4343434343)")
        deadline = time.monotonic() + 10
        rows = ""
        while time.monotonic() < deadline:
            rows = databases.psql(db, "SELECT node FROM stream_writers WHERE node IN ('gone-free', 'gone-busy', 'fresh') ORDER BY node")
            if "gone-free" not in rows:
                break
            time.sleep(0.2)
        assert rows.split() == ["fresh", "gone-busy"], rows
    finally:
        holder.close()
    live = databases.psql(db, "SELECT count(*) FROM stream_writers w JOIN server_nodes n ON n.node_id = w.node").strip()
    assert live == "2", live

    sender = a.user("rows")
    url = a.channel([sender], name="rows")["channel_url"]
    databases.psql(db, "DELETE FROM stream_writers w USING server_nodes n WHERE n.node_id = w.node")
    stream = EventCollector(b, sender)
    try:
        sent = a.send(url, sender, text="after the row went")
        assert b.send(url, sender, text="and on the other server")["message_id"] > sent["message_id"]
        assert wait_for_texts(stream, 2) and message_texts(stream) == ["after the row went", "and on the other server"]
    finally:
        stream.close()
    assert databases.psql(db, "SELECT count(*) FROM stream_writers w JOIN server_nodes n ON n.node_id = w.node").strip() == "2"
