"""SQLite's write-ahead log is copied into the database file by a thread of the server's
own (server Storage/SQLite/WALCheckpointer.swift), not inside the commits. The log must stay
small under a steady stream of writes all the same: were nothing copied, 1,500 sends would
leave about 80 MB of log; were the writer's own fallback (past 10,000 pages) all that ran,
about 40 MB."""
import os
import threading
import time

import pytest
import requests

from conftest import API_TOKEN, EventReader, metric, wait_for_a_held_request

pytestmark = pytest.mark.sqlite_only

PAGE_FRAME = 4096 + 24  # a page and its frame header in the log


def test_the_log_stays_small_under_steady_writes(fresh_server):
    s = fresh_server()
    a, b = s.user(), s.user()
    url = s.channel([a, b])["channel_url"]
    http = requests.Session()
    http.headers.update({"Api-Token": API_TOKEN})
    largest = 0
    for i in range(1500):
        r = http.post(s.url(f"/v3/group_channels/{url}/messages"),
                      json={"message_type": "MESG", "user_id": a if i % 2 else b, "message": f"steady {i}"})
        assert r.status_code == 200, r.text
        if i % 100 == 99:
            largest = max(largest, os.path.getsize(s.db_path + "-wal"))
    assert largest <= 3000 * PAGE_FRAME, f"the log reached {largest / PAGE_FRAME:.0f} pages"
    # Everything is still there, in order.
    listed = s.ok("GET", f"/v3/group_channels/{url}/messages",
                  params={"message_ts": 0, "next_limit": 200, "prev_limit": 0, "include": "false"})["messages"]
    assert [m["message"] for m in listed[:3]] == ["steady 0", "steady 1", "steady 2"]


# Commits are synced to the disk outside the write lock (server Storage/SQLite/WALSyncer.swift).
# With each sync slowed down by the test hook, what waits for it shows: nothing is answered,
# read or delivered before the commit that holds it is on the disk.
SYNC_DELAY = 0.5


def _timed(call):
    start = time.monotonic()
    result = call()
    return result, start, time.monotonic()


def test_nothing_is_answered_read_or_delivered_before_its_sync(fresh_server, monkeypatch):
    monkeypatch.setenv("PARLEY_TEST_WAL_SYNC_DELAY_MS", str(int(SYNC_DELAY * 1000)))
    s = fresh_server()
    a, b = s.user(), s.user()
    url = s.channel([a, b])["channel_url"]
    reader = EventReader(s, b)
    path = f"/v3/group_channels/{url}/messages"
    listing = {"message_ts": 0, "next_limit": 10, "prev_limit": 0, "include": "false"}

    # No commit waiting for its sync: a read does not wait.
    listed, started, ended = _timed(lambda: s.ok("GET", path, params=listing)["messages"])
    assert listed == [] and ended - started < SYNC_DELAY / 2

    outcome = {}

    def send():
        outcome["message"], outcome["started"], outcome["answered"] = _timed(lambda: s.send(url, a, "synced first"))

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(SYNC_DELAY / 3)  # the COMMIT is long done; its sync is not
    listed, _, read_ended = _timed(lambda: s.ok("GET", path, params=listing)["messages"])
    sender.join()
    event, _ = reader.until("message_received", timeout=10)
    delivered = time.monotonic()

    # The answer waited for the sync.
    assert outcome["answered"] - outcome["started"] >= SYNC_DELAY
    # The read saw the committed message, and answered only once it was on the disk.
    assert [m["message_id"] for m in listed] == [outcome["message"]["message_id"]]
    assert read_ended >= outcome["started"] + SYNC_DELAY
    assert event["json"]["message"]["message_id"] == outcome["message"]["message_id"]
    assert delivered >= outcome["started"] + SYNC_DELAY

    # Groups that commit while a sync runs are synced after it, and every send is answered
    # once, in order of its message id.
    results = []

    def burst(i):
        results.append(s.send(url, a if i % 2 else b, f"burst {i}", req_id=f"burst-{i}"))

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    stored = s.ok("GET", path, params={**listing, "next_limit": 20})["messages"]
    assert sorted(m["message_id"] for m in stored) == sorted(
        [outcome["message"]["message_id"]] + [m["message_id"] for m in results])


def test_members_of_one_commit_group_take_the_channel_from_the_one_before(fresh_server):
    """SQLite's writers share commits (server Writers/SQLiteWriters.swift): a writer held open makes the
    seven sends behind it one group. Each member writes the channel the member before it
    wrote, which the record cache takes only once the group commits; the group hands it on
    instead, so no member reads the channel from the database again."""
    s = fresh_server()
    a, b = s.user(), s.user()
    url = s.channel([a, b])["channel_url"]
    s.send(url, a, "warm")  # the channel is in the record cache from here on
    loads, commits = metric(s, "parley_channel_loads_total"), metric(
        s, "parley_db_transaction_duration_seconds_count", '{kind="commit"}')
    errors = []

    def send(text, headers=None):
        r = requests.post(s.url(f"/v3/group_channels/{url}/messages"), headers={"Api-Token": API_TOKEN, **(headers or {})},
                          json={"message_type": "MESG", "user_id": b, "message": text}, timeout=30)
        if r.status_code != 200:
            errors.append(r.text)

    held = threading.Thread(target=send, args=("held", {"Parley-Test-Hold-Ms": "600"}))
    held.start()
    wait_for_a_held_request(s, margin=0.1)
    behind = [threading.Thread(target=send, args=(f"behind {n}",)) for n in range(7)]
    for t in behind:
        t.start()
    for t in [held] + behind:
        t.join(30)
    assert not errors, errors
    grouped = metric(s, "parley_db_transaction_duration_seconds_count", '{kind="commit"}') - commits
    assert 1 <= grouped <= 3, f"the eight sends took {grouped:.0f} commits: no group formed"
    assert metric(s, "parley_channel_loads_total") - loads == 0
    listed = s.ok("GET", f"/v3/group_channels/{url}/messages",
                  params={"message_ts": 0, "next_limit": 20, "prev_limit": 0, "include": "false"})["messages"]
    assert sorted(m["message"] for m in listed) == sorted(["warm", "held"] + [f"behind {n}" for n in range(7)])
    assert s.ok("GET", f"/v3/group_channels/{url}", params={"user_id": a})["unread_message_count"] == 8
