"""Channel members are stored one record each (kind `member`), apart from the channel record.

What a member's state looks like through the API must survive a restart exactly, and a
database of the earlier layout (members embedded in the channel record) must load as before
and be migrated so that later partial saves lose nothing.
"""
import json
import sqlite3

import pytest

from conftest import assert_error

# These tests read and rewrite the server's SQLite file.
pytestmark = pytest.mark.sqlite_only

SEP = "\x01"  # between channel url and user id in a member record's key
VOLATILE = {"is_online", "last_seen_at"}


def scrub(value):
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def snapshot(server, urls, users, tokens=None):
    """Everything the API shows of the channels' members, for the admin and for each user."""
    full = {"show_member": "true", "show_read_receipt": "true", "show_delivery_receipt": "true",
            "show_metadata": "true", "show_metacounter": "true"}
    out = {}

    def get(key, path, params):
        r = server.request("GET", path, params=params)
        body = scrub(r.json())
        if key[0] == "mine":
            body.pop("ts", None)  # the time of the request
        out[key] = (r.status_code, body)

    for url in urls:
        get(("channel", url), f"/v3/group_channels/{url}", full)
        get(("members", url), f"/v3/group_channels/{url}/members", {"limit": 100})
        for u in users:
            get(("channel", url, u), f"/v3/group_channels/{url}", dict(full, user_id=u))
            get(("is_member", url, u), f"/v3/group_channels/{url}/members/{u}", {})
    for u in users:
        get(("mine", u), f"/v3/users/{u}/my_group_channels",
            dict(full, show_empty="true", hidden_mode="all", limit=100))
        get(("changelogs", u), f"/v3/users/{u}/my_group_channels/changelogs", dict(full, change_ts=0))
        if tokens and u in tokens:
            get(("changelogs-since", u), f"/v3/users/{u}/my_group_channels/changelogs", dict(full, token=tokens[u]))
        get(("unread", u), f"/v3/users/{u}/unread_message_count", {})
    return out


def assert_same(before, after):
    assert set(before) == set(after)
    for key in before:
        b_status, b_body = before[key]
        a_status, a_body = after[key]
        assert a_status == b_status, (key, b_status, a_status)
        if isinstance(b_body, dict) and isinstance(a_body, dict):
            assert set(a_body) == set(b_body), (key, set(a_body) ^ set(b_body))
            for field in b_body:
                assert a_body[field] == b_body[field], (key, field, b_body[field], a_body[field])
        else:
            assert a_body == b_body, key


def restart(server):
    server.stop()
    server.start()


def db_rows(db_path, kind):
    with sqlite3.connect(db_path) as db:
        return {k: json.loads(b) for k, b in db.execute("SELECT key, body FROM records WHERE kind = ?", (kind,))}


def changelog_tokens(server, users):
    """Per (still existing) user, a changelog token of now: what changes after it is listed."""
    tokens = {}
    for u in users:
        r = server.request("GET", f"/v3/users/{u}/my_group_channels/changelogs", params={"change_ts": 0})
        if r.status_code == 200:
            tokens[u] = r.json()["next"]
    return tokens


def build_member_history(server):
    """Channels whose members went through every kind of change; returns (urls, users)."""
    op, a, b, c, d, e, gone = (server.user(p) for p in ("op", "a", "b", "c", "d", "e", "gone"))
    server.ok("PUT", f"/v3/users/{d}/channel_invitation_preference", json={"auto_accept": False})
    sa, sb, sc, sd, se = (server.session(u) for u in (a, b, c, d, e))
    url = server.channel([op, a, b, c, gone], operator_ids=[op], name="members")["channel_url"]
    pub = server.channel([op, a, gone], is_public=True, name="public")["channel_url"]
    doomed = server.channel([op, a, b], name="doomed")["channel_url"]
    for i in range(3):
        server.send(url, a, f"a{i}")
        server.send(url, b, f"b{i}", mark_as_read=False)
    server.send(pub, op, "public hello")
    server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", session=sc, json={})
    server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_delivered", json={"user_id": b})
    server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": b})
    server.ok("POST", f"/v3/group_channels/{url}/operators", json={"operator_ids": [c]})
    server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [d, e]})  # d invited, e joined
    server.ok("POST", f"/v3/group_channels/{pub}/invite", json={"user_ids": [d]})
    server.ok("PUT", f"/v3/group_channels/{pub}/join", session=se, json={})
    server.ok("PUT", f"/v3/group_channels/{pub}/decline", session=sd, json={})
    server.ok("PUT", f"/v3/group_channels/{pub}/leave", session=sa, json={})
    server.ok("PUT", f"/v3/group_channels/{url}/hide", session=sa,
              json={"hide_previous_messages": True, "allow_auto_unhide": False})
    server.ok("PUT", f"/v3/group_channels/{pub}/hide", session=se, json={})  # auto-unhide on the next message
    server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sc, json={})
    server.send(url, op, "after the reset")
    server.send(pub, op, "unhides e")
    server.ok("PUT", f"/v3/users/{b}/mark_as_read_all", json={})  # batch: every channel of b
    server.ok("DELETE", f"/v3/users/{gone}")  # batch: leaves url and pub
    server.ok("DELETE", f"/v3/group_channels/{doomed}")
    return [url, pub, doomed], [op, a, b, c, d, e, gone], (sa, sb, sc, sd, se)


def test_member_state_survives_restart(fresh_server):
    server = fresh_server()
    urls, users, _ = build_member_history(server)
    url, pub, doomed = urls
    op, a, b, c, d, e, gone = users
    tokens = changelog_tokens(server, users)
    server.send(url, e, "after the tokens")  # e's read receipt and the channel move
    server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": c})
    before = snapshot(server, urls, users, tokens)
    members = {m["user_id"]: m for m in before[("channel", url)][1]["members"]}
    assert set(members) == {op, a, b, c, d, e}
    assert members[d]["state"] == "invited" and members[c]["role"] == "operator" and members[b]["is_muted"] is True
    assert before[("channel", url, a)][1]["hidden_state"] == "hidden_prevent_auto_unhide"
    assert before[("channel", url, c)][1]["ts_message_offset"] > 0
    assert before[("channel", pub, e)][1]["hidden_state"] == "unhidden"
    assert before[("channel", pub, a)][1]["member_state"] == "none"
    assert before[("channel", doomed)][0] == 404
    restart(server)
    assert_same(before, snapshot(server, urls, users, tokens))
    # Nothing of the deleted channel or of the deleted user is left behind.
    keys = db_rows(server.db_path, "member")
    assert not [k for k in keys if k.startswith(doomed + SEP)]
    assert not [k for k in keys if k.endswith(SEP + gone)]
    assert sorted(k.split(SEP)[1] for k in keys if k.startswith(url + SEP)) == sorted(members)
    # Channel records no longer carry their members.
    assert all(not r["members"] for r in db_rows(server.db_path, "channel").values())


def test_only_changed_members_are_written(fresh_server):
    server = fresh_server()
    ids = [server.user() for _ in range(5)]
    url = server.channel(ids)["channel_url"]
    server.send(url, ids[0], "first")
    restart(server)  # nothing pending: each write below is its own transaction
    rows = db_rows(server.db_path, "member")
    server.send(url, ids[1], "second")  # moves ids[1]'s read receipt only
    after = db_rows(server.db_path, "member")
    changed = {k for k in after if after[k] != rows.get(k)}
    assert changed == {url + SEP + ids[1]}
    # A recreated channel with the same url does not bring back the old members.
    server.ok("DELETE", f"/v3/group_channels/{url}")
    again = server.channel(ids[3:], channel_url=url)["channel_url"]
    assert again == url
    restart(server)
    got = server.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})
    assert sorted(m["user_id"] for m in got["members"]) == sorted(ids[3:])


def embed_members(db_path):
    """Rewrites a database into the earlier layout: members inside the channel record."""
    with sqlite3.connect(db_path) as db:
        channels = {k: json.loads(b) for k, b in db.execute("SELECT key, body FROM records WHERE kind = 'channel'")}
        for key, body in db.execute("SELECT key, body FROM records WHERE kind = 'member'").fetchall():
            url, user = key.split(SEP, 1)
            channels[url]["members"][user] = json.loads(body)
        db.execute("DELETE FROM records WHERE kind = 'member'")
        for url, record in channels.items():
            db.execute("UPDATE records SET body = ? WHERE kind = 'channel' AND key = ?",
                       (json.dumps(record, sort_keys=True, separators=(",", ":")), url))
    return channels


def test_database_with_embedded_members_is_migrated(fresh_server):
    server = fresh_server()
    urls, users, sessions = build_member_history(server)
    url, pub, _ = urls
    tokens = changelog_tokens(server, users)
    before = snapshot(server, urls, users, tokens)
    server.stop()
    old = embed_members(server.db_path)
    assert sum(len(c["members"]) for c in old.values()) == 8
    assert db_rows(server.db_path, "member") == {}
    # A member record of a channel that does not exist is dropped.
    with sqlite3.connect(server.db_path) as db:
        db.execute("INSERT INTO records (kind, key, body) VALUES ('member', ?, ?)",
                   ("no-such-channel" + SEP + users[0], json.dumps(old[url]["members"][users[0]])))

    server.start()
    assert_same(before, snapshot(server, urls, users, tokens))
    # Rewritten at start: channel records without members, one record per member.
    channels = db_rows(server.db_path, "channel")
    members = db_rows(server.db_path, "member")
    assert all(not c["members"] for c in channels.values())
    expected = {u + SEP + uid: m for u, c in old.items() for uid, m in c["members"].items()}
    assert members == expected

    # A partial save after the migration (one member's read receipt) loses no other member.
    server.send(url, users[5], "after the migration")
    server.ok("PUT", f"/v3/group_channels/{pub}/messages/mark_as_read", session=sessions[4], json={})
    after_change = snapshot(server, urls, users, tokens)
    restart(server)
    assert_same(after_change, snapshot(server, urls, users, tokens))
    listed = {m["user_id"] for m in after_change[("channel", url)][1]["members"]}
    assert listed == {uid for uid in old[url]["members"]}
    assert db_rows(server.db_path, "member").keys() == expected.keys()
    assert_error(server.request("GET", "/v3/group_channels/no-such-channel"), 404)
