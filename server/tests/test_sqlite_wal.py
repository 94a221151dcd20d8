"""SQLite's write-ahead log is copied into the database file by a thread of the server's
own (server Storage/SQLite/WALCheckpointer.swift), not inside the commits. The log must stay
small under a steady stream of writes all the same: were nothing copied, 1,500 sends would
leave about 80 MB of log; were the writer's own fallback (past 10,000 pages) all that ran,
about 40 MB."""
import os

import pytest
import requests

from conftest import API_TOKEN

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
