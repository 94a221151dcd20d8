"""Channel members are stored one row each (table `members`), apart from the channel row.

What a member's state looks like through the API must survive a restart exactly, and a
change to one member writes that member's row only. (Files of the earlier record layouts
are covered by test_migration.py.)
"""
import sqlite3

import pytest

# These tests read the server's SQLite file.
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


def member_rows(db_path):
    """The stored member rows, keyed like the old member records: url, U+0001, user id."""
    with sqlite3.connect(db_path) as db:
        db.row_factory = sqlite3.Row
        return {r["channel_url"] + SEP + r["user_id"]: dict(r) for r in db.execute("SELECT * FROM members")}


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
    keys = member_rows(server.db_path)
    assert not [k for k in keys if k.startswith(doomed + SEP)]
    assert not [k for k in keys if k.endswith(SEP + gone)]
    assert sorted(k.split(SEP)[1] for k in keys if k.startswith(url + SEP)) == sorted(members)


def test_only_changed_members_are_written(fresh_server):
    server = fresh_server()
    ids = [server.user() for _ in range(5)]
    url = server.channel(ids)["channel_url"]
    server.send(url, ids[0], "first")
    server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": ids[4]})
    restart(server)  # nothing pending: each write below is its own transaction
    rows = member_rows(server.db_path)
    # Moves ids[1]'s read receipt and the channel's unread totals: the others' unread counts
    # rise with the totals, and only the sender's row is written.
    server.send(url, ids[1], "second")
    after = member_rows(server.db_path)
    changes = {k: {c for c in after[k] if after[k][c] != rows[k][c]} for k in after if after[k] != rows.get(k)}
    assert changes == {url + SEP + ids[1]: {"read_ts", "change_seq", "changed_at", "unread_base"}}
    with sqlite3.connect(server.db_path) as db:
        (total,) = db.execute("SELECT counted_messages FROM channels WHERE url = ?", (url,)).fetchone()
    assert total == 2
    unread = {u: total - after[url + SEP + u]["unread_base"] for u in ids}
    assert unread == {ids[0]: 1, ids[1]: 0, ids[2]: 2, ids[3]: 2, ids[4]: 1}
    # The counts the server shows are the same.
    for u in ids:
        seen = server.ok("GET", f"/v3/users/{u}/my_group_channels", params={"channel_urls": url})["channels"][0]
        assert seen["unread_message_count"] == unread[u]
    # A recreated channel with the same url does not bring back the old members.
    server.ok("DELETE", f"/v3/group_channels/{url}")
    again = server.channel(ids[3:], channel_url=url)["channel_url"]
    assert again == url
    restart(server)
    got = server.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})
    assert sorted(m["user_id"] for m in got["members"]) == sorted(ids[3:])

