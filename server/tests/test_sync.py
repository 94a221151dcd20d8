import time

from conftest import assert_error


def drain_message_changelogs(server, url, start, session=None, limit=2):
    updated, deleted, params = [], [], dict(start)
    calls = 0
    while True:
        params["limit"] = limit
        kw = {"session": session} if session else {}
        page = server.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", params=params, **kw)
        assert page["next"] != ""
        updated += page["updated"]
        deleted += page["deleted"]
        calls += 1
        if not page["has_more"]:
            return updated, deleted, page["next"]
        params = {"token": page["next"]}
        assert calls < 50


def test_message_changelogs_updates_and_deletes(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    msgs = [server.send(url, a, f"m{i}") for i in range(6)]
    _, _, token = drain_message_changelogs(server, url, {"change_ts": 0})
    # nothing changed yet: new messages are not "updated"
    u, d, token = drain_message_changelogs(server, url, {"token": token})
    assert u == [] and d == []
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{msgs[1]['message_id']}", json={"message": "e1"})
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{msgs[3]['message_id']}", json={"message": "e3"})
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{msgs[1]['message_id']}", json={"message": "e1b"})
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{msgs[4]['message_id']}")
    server.ok("POST", f"/v3/group_channels/{url}/messages/{msgs[5]['message_id']}/reactions", json={"user_id": b, "reaction": "x"})
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{msgs[3]['message_id']}")
    u, d, token2 = drain_message_changelogs(server, url, {"token": token}, limit=1)
    assert [m["message_id"] for m in u] == [msgs[1]["message_id"], msgs[5]["message_id"]]
    assert [m["message"] for m in u] == ["e1b", "m5"]
    assert [x["message_id"] for x in d] == [msgs[4]["message_id"], msgs[3]["message_id"]]
    assert all(isinstance(x["deleted_at"], int) for x in d)
    u, d, _ = drain_message_changelogs(server, url, {"token": token2})
    assert u == [] and d == []
    # change_ts works as a start too
    t = int(time.time() * 1000)
    time.sleep(0.01)
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{msgs[0]['message_id']}", json={"message": "late"})
    u, d, _ = drain_message_changelogs(server, url, {"change_ts": t})
    assert [m["message"] for m in u] == ["late"] and d == []
    assert_error(server.request("GET", f"/v3/group_channels/{url}/messages/changelogs"), 400, 400111, "token")
    assert_error(server.request("GET", f"/v3/group_channels/{url}/messages/changelogs", params={"token": "abc"}), 400, 400110)


def test_message_changelogs_respect_history_offset(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    old = server.send(url, b, "old")
    sa = server.session(a)
    server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sa, json={})
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{old['message_id']}", json={"message": "old2"})
    u, _, _ = drain_message_changelogs(server, url, {"change_ts": 0}, session=sa)
    assert u == []


def drain_channel_changelogs(server, user, start, limit=2, **extra):
    updated, deleted, params = [], [], dict(start)
    while True:
        params.update(extra)
        params["limit"] = limit
        page = server.ok("GET", f"/v3/users/{user}/my_group_channels/changelogs", params=params)
        updated += page["updated"]
        deleted += page["deleted"]
        if not page["has_more"]:
            return updated, deleted, page["next"]
        params = {"token": page["next"]}


def test_channel_changelogs(server):
    a, b = server.user(), server.user()
    c1 = server.channel([a, b])["channel_url"]
    c2 = server.channel([a, b])["channel_url"]
    c3 = server.channel([a, b])["channel_url"]
    c4 = server.channel([a])["channel_url"]
    u, d, token = drain_channel_changelogs(server, a, {"change_ts": 0})
    assert {c["channel_url"] for c in u} == {c1, c2, c3, c4} and d == []
    assert all("member_state" in c for c in u)
    server.send(c1, b, "new message")                                  # last_message changes
    server.ok("POST", f"/v3/group_channels/{c2}/metadata", json={"metadata": {"k": "v"}})  # metadata changes
    server.ok("PUT", f"/v3/group_channels/{c3}/leave", json={"user_ids": [a]})             # a left
    server.ok("DELETE", f"/v3/group_channels/{c4}")                                        # deleted
    server.ok("PUT", f"/v3/group_channels/{c1}/messages/mark_as_read", json={"user_id": a})  # per-user change
    u, d, token2 = drain_channel_changelogs(server, a, {"token": token}, limit=1, show_metadata="true")
    assert [c["channel_url"] for c in u] == [c2, c1]
    assert [c for c in u if c["channel_url"] == c2][0]["metadata"] == {"k": "v"}
    assert [c for c in u if c["channel_url"] == c1][0]["last_message"]["message"] == "new message"
    assert sorted(d) == sorted([c3, c4])
    # b sees c1/c2/c3 changes but nothing of c4 beyond creation
    u, d, _ = drain_channel_changelogs(server, a, {"token": token2})
    assert u == [] and d == []
    # rejoining after leaving shows as updated, not deleted
    server.ok("POST", f"/v3/group_channels/{c3}/invite", json={"user_ids": [a]})
    u, d, _ = drain_channel_changelogs(server, a, {"token": token2})
    assert [c["channel_url"] for c in u] == [c3] and d == []
    sb = server.session(b)
    assert_error(server.request("GET", f"/v3/users/{a}/my_group_channels/changelogs", session=sb, params={"change_ts": 0}), 403, 400108)


def gap(server, url, **params):
    return server.ok("GET", f"/v3/group_channels/{url}/messages_gap", params=params)


def test_messages_gap_threshold_and_fill(server):
    a = server.user()
    url = server.channel([a])["channel_url"]
    cached = [server.send(url, a, f"c{i}") for i in range(3)]
    missing = [server.send(url, a, f"g{i}") for i in range(12)]
    prev = {"prev_start_ts": cached[0]["created_at"], "prev_end_ts": cached[-1]["created_at"]}
    # messages sent in the same millisecond as the cached end would be ambiguous; the server counts by ts
    in_gap = [m for m in missing if m["created_at"] > cached[-1]["created_at"]]
    n = len(in_gap)
    r = gap(server, url, huge_gap_threshold=n, **prev)
    assert r["is_huge_gap"] is False and r["gap_count"] == n
    assert [m["message"] for m in r["prev_messages"]] == [m["message"] for m in in_gap]
    assert r["prev_has_more"] is False and r["next_messages"] == []
    r = gap(server, url, huge_gap_threshold=n - 1, **prev)
    assert r == {"is_huge_gap": True, "gap_count": n}
    r = gap(server, url, huge_gap_threshold=n + 1, prev_limit=2, **prev)
    assert r["is_huge_gap"] is False and len(r["prev_messages"]) == 2 and r["prev_has_more"] is True
    # a next range: fill from both ends, never overlapping
    nxt = {"next_start_ts": missing[-1]["created_at"], "next_end_ts": missing[-1]["created_at"]}
    r = gap(server, url, prev_limit=2, next_limit=2, **prev, **nxt)
    ids = [m["message_id"] for m in r["prev_messages"] + r["next_messages"]]
    assert len(ids) == len(set(ids))
    # cache count mismatch refills the cached range too
    r = gap(server, url, prev_cache_count=1, huge_gap_threshold=1000, prev_limit=300, **prev)
    assert r["gap_count"] == len(cached) + n
    # filters apply to the count
    server.send(url, a, "typed", custom_type="special")
    r = gap(server, url, custom_types="special", **prev)
    assert r["gap_count"] == 1 and [m["message"] for m in r["prev_messages"]] == ["typed"]


def test_messages_gap_default_threshold_is_300(server):
    a = server.user()
    url = server.channel([a])["channel_url"]
    first = server.send(url, a, "first")
    time.sleep(0.005)
    for i in range(301):
        server.send(url, a, f"x{i}")
    r = gap(server, url, prev_start_ts=first["created_at"], prev_end_ts=first["created_at"])
    assert r == {"is_huge_gap": True, "gap_count": 301}
    r = gap(server, url, prev_start_ts=first["created_at"], prev_end_ts=first["created_at"], huge_gap_threshold=301)
    assert r["is_huge_gap"] is False and len(r["prev_messages"]) == 100 and r["prev_has_more"] is True


def test_messages_gap_bad_params(server):
    a = server.user()
    url = server.channel([a])["channel_url"]
    base = f"/v3/group_channels/{url}/messages_gap"
    assert_error(server.request("GET", base), 400, 400111, "prev_start_ts")
    assert_error(server.request("GET", base, params={"prev_start_ts": 5, "prev_end_ts": 1}), 400, 400100, "prev_end_ts")
    assert_error(server.request("GET", base, params={"prev_start_ts": 1, "prev_end_ts": 2, "next_start_ts": 5}), 400, 400111, "next_end_ts")
    assert_error(server.request("GET", base, params={"prev_start_ts": 1, "prev_end_ts": 2, "huge_gap_threshold": 0}), 400, 400100, "huge_gap_threshold")
