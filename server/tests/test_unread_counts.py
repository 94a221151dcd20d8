"""Unread counts: a channel keeps totals and each member a base (server UnreadCounters.swift),
so a message writes the channel's row, not every member's. Databases of the layout before
(the counts in the member rows, up to migration 10) keep their counts. Both backends."""
import sqlite3

from conftest import UNDO_TO_SCHEMA_10
from tests_support import databases


def unread_seen(server, users, url):
    """Each user's unread message and mention counts of the channel, and unread totals."""
    seen = {}
    for u in users:
        c = server.ok("GET", f"/v3/users/{u}/my_group_channels", params={"channel_urls": url})["channels"][0]
        totals = server.ok("GET", f"/v3/users/{u}", params={"include_unread_count": "true"})
        seen[u] = (c["unread_message_count"], c["unread_mention_count"], totals["unread_message_count"],
                   totals["unread_channel_count"])
    return seen


def test_a_database_of_migration_10_keeps_its_unread_counts(fresh_server):
    """Up to migration 10 every member row held its unread counts; from 11 the channel holds
    totals and each member a base. A database written with counts keeps them, and later
    messages count on from there."""
    s = fresh_server()
    a, b, c, d = (s.user() for _ in range(4))
    url = s.channel([a, b, c])["channel_url"]
    s.send(url, a, "one")
    s.ok("POST", f"/v3/group_channels/{url}/messages",
         json={"message_type": "MESG", "user_id": a, "message": "two", "mentioned_user_ids": [b]})
    s.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": c})
    s.ok("POST", f"/v3/group_channels/{url}/messages",
         json={"message_type": "MESG", "user_id": a, "message": "three", "mention_type": "channel"})
    s.ok("POST", f"/v3/group_channels/{url}/messages",
         json={"message_type": "MESG", "user_id": a, "message": "quiet", "is_silent": True})
    s.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [d]})
    before = unread_seen(s, [a, b, c, d], url)
    # d joined at the invitation (auto-accept) and sees the history: all three as unread.
    assert before[b][:2] == (3, 2) and before[c][:2] == (1, 1) and before[a][:2] == (0, 0) and before[d][:2] == (3, 1)
    s.stop()
    # The layout of migration 10: the counts themselves in the member rows.
    if databases.backend() == "sqlite":
        db = sqlite3.connect(s.db_path)
        db.executescript(UNDO_TO_SCHEMA_10)
        db.commit()
        rows = {r[0]: r[1:] for r in db.execute("SELECT user_id, unread_count, unread_mention_count FROM members")}
        db.close()
        assert rows[b] == (3, 2) and rows[c] == (1, 1)
    else:
        databases.psql(s.db_path, UNDO_TO_SCHEMA_10)
    s2 = fresh_server()
    assert unread_seen(s2, [a, b, c, d], url) == before
    s2.ok("POST", f"/v3/group_channels/{url}/messages",
          json={"message_type": "MESG", "user_id": b, "message": "four", "mentioned_user_ids": [c, a]})
    s2.send(url, c, "five")
    after = unread_seen(s2, [a, b, c, d], url)
    assert {u: v[:2] for u, v in after.items()} == {a: (2, 1), b: (1, 0), c: (0, 0), d: (5, 1)}
