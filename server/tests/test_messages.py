import time
import uuid

import requests

from conftest import API_TOKEN, EventReader, Server, assert_error, databases


def texts(page):
    return [m["message"] for m in page["messages"]]


def setup_channel(server, n=0, members=2):
    users = [server.user() for _ in range(members)]
    url = server.channel(users)["channel_url"]
    msgs = [server.send(url, users[i % members], f"m{i}") for i in range(n)]
    return url, users, msgs


def test_send_types_and_fields(server):
    url, (a, b), _ = setup_channel(server)
    m = server.send(url, a, "hi", custom_type="ct", data="d", mentioned_user_ids=[b, "ghost"],
                    sorted_metaarray=[{"key": "k", "value": ["1", "2"]}])
    assert m["type"] == "MESG" and m["user"]["user_id"] == a and m["custom_type"] == "ct" and m["data"] == "d"
    assert [u["user_id"] for u in m["mentioned_users"]] == [b]
    assert m["sorted_metaarray"] == [{"key": "k", "value": ["1", "2"]}]
    assert m["message_id"] > 0 and isinstance(m["created_at"], int) and m["parent_message_id"] == 0
    f = server.ok("POST", f"/v3/group_channels/{url}/messages", json={
        "message_type": "FILE", "user_id": a, "url": "http://files/x.png", "file_name": "x.png", "file_size": 12,
        "file_type": "image/png", "thumbnails": [{"url": "http://t/1", "width": 10, "height": 20}, "http://t/2"]})
    assert f["type"] == "FILE" and f["file"] == {"url": "http://files/x.png", "name": "x.png", "size": 12,
                                                 "type": "image/png", "require_auth": False}
    assert [t["url"] for t in f["thumbnails"]] == ["http://t/1", "http://t/2"] and f["thumbnails"][0]["height"] == 20
    adm = server.ok("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "ADMM", "message": "notice"})
    assert adm["type"] == "ADMM" and "user" not in adm
    sa = server.session(a)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", session=sa,
                                json={"message_type": "ADMM", "message": "x"}), 403, 400108)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "TXT", "user_id": a}), 400, 400100, "message_type")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={"user_id": a, "message": "x"}), 400, 400111, "message_type")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "MESG", "user_id": a}), 400, 400111, "message")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "MESG", "message": "x"}), 400, 400111, "user_id")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "FILE", "user_id": a}), 400, 400111, "url")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages",
                                json={"message_type": "MESG", "user_id": a, "message": "x", "parent_message_id": 999999999}), 400, 400100, "parent_message_id")
    outsider = server.user()
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages",
                                json={"message_type": "MESG", "user_id": outsider, "message": "x"}), 403, 400108)


def test_mentions_named_twice_count_once_in_the_order_first_named(server):
    """Mentioned ids are stored once each (one statement writes a message's mentions), in
    the order first named; the answer, a read of the message and a listing agree."""
    url, (a, b, c, d), _ = setup_channel(server, members=4)
    m = server.send(url, a, "hi", mentioned_user_ids=[c, b, "ghost", c, d, b])
    assert [u["user_id"] for u in m["mentioned_users"]] == [c, b, d]
    got = server.ok("GET", f"/v3/group_channels/{url}/messages/{m['message_id']}")
    assert [u["user_id"] for u in got["mentioned_users"]] == [c, b, d]
    # Named twice, counted once.
    for u in (b, c):
        seen = server.ok("GET", f"/v3/group_channels/{url}", params={"user_id": u})
        assert (seen["unread_message_count"], seen["unread_mention_count"]) == (1, 1)
    edited = server.ok("PUT", f"/v3/group_channels/{url}/messages/{m['message_id']}",
                       json={"message_type": "MESG", "mentioned_user_ids": [d, d, a]})
    assert [u["user_id"] for u in edited["mentioned_users"]] == [d, a]
    page = server.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10})
    assert [[u["user_id"] for u in x["mentioned_users"]] for x in page["messages"]] == [[d, a]]
    # Each mentioned member counts the message once.
    assert server.ok("GET", f"/v3/group_channels/{url}", params={"user_id": d})["unread_mention_count"] == 1


def test_sends_as_written_without_the_counter_check(tmp_path, monkeypatch):
    """The suites run the server with PARLEY_VERIFY_COUNTERS=1, whose count of a channel's
    messages reads the table before the request's last write, so on PostgreSQL the held
    message goes out alone. Here, without it, a send writes the message, its mentions, the
    channel, the member, the event and the counters in one statement, as in production
    (server Storage/RecordTables.swift `write`): everything must read back as sent."""
    monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    s = Server(databases.database_for(tmp_path, "unverified.sqlite"))
    try:
        a, b, c = s.user(), s.user(), s.user()
        url = s.channel([a, b, c])["channel_url"]
        other = s.channel([a, b])["channel_url"]
        reader = EventReader(s, b)
        time.sleep(0.3)
        sent = []
        for i in range(8):
            fields = {"mentioned_user_ids": [b, c, b]} if i % 3 == 0 else {}
            if i == 5:
                fields["req_id"] = "once"
            sent.append(s.send(url, a if i % 2 == 0 else c, f"m{i}", **fields))
            s.send(other, b, f"o{i}")
        again = s.send(url, c, "m5 again", req_id="once")
        assert again["message_id"] == sent[5]["message_id"]
        page = s.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 50})
        assert [(m["message_id"], m["message"], [u["user_id"] for u in m["mentioned_users"]]) for m in page["messages"]] == \
            [(m["message_id"], m["message"], [u["user_id"] for u in m["mentioned_users"]]) for m in sent]
        assert [u["user_id"] for u in sent[0]["mentioned_users"]] == [b, c]
        # b sent nothing here: all 8 unread, 3 of them mentioning b; c read up to its last send
        # (m7) and a to m6.
        seen = {u: s.ok("GET", f"/v3/group_channels/{url}", params={"user_id": u}) for u in (a, b, c)}
        assert (seen[b]["unread_message_count"], seen[b]["unread_mention_count"]) == (8, 3)
        assert (seen[c]["unread_message_count"], seen[a]["unread_message_count"]) == (0, 1)
        assert seen[b]["last_message"]["message_id"] == sent[-1]["message_id"]
        received = []
        deadline = time.time() + 5
        while len(received) < 8 and time.time() < deadline:
            e, _ = reader.until("message_received", timeout=max(0.1, deadline - time.time()))
            if e["json"]["channel_url"] == url:
                received.append(e["json"]["message"]["message_id"])
        assert received == [m["message_id"] for m in sent]
        reader.close()
    finally:
        s.stop()
        databases.drop_database(s.db_path)


def test_req_id_idempotent(server):
    url, (a, b), _ = setup_channel(server)
    m1 = server.send(url, a, "once", req_id="r-1")
    m2 = server.send(url, a, "once again", req_id="r-1")
    assert m1 == m2
    m3 = server.send(url, b, "other sender", req_id="r-1")
    assert m3["message_id"] != m1["message_id"]
    page = server.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 50})
    assert texts(page) == ["once", "other sender"]


def test_a_send_repeated_after_its_message_was_deleted_is_not_stored_again(server):
    url, (a, b), _ = setup_channel(server)
    first = server.send(url, a, "regretted", req_id="r-gone")
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{first['message_id']}")
    again = server.request("POST", f"/v3/group_channels/{url}/messages",
                           json={"message_type": "MESG", "user_id": a, "message": "regretted", "req_id": "r-gone"})
    assert_error(again, 410, 400203, mentions=str(first["message_id"]))
    # Only that sender's request in that channel: another sender's same req_id is a new send.
    other = server.send(url, b, "b's own", req_id="r-gone")
    page = server.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 50})
    assert [m["message_id"] for m in page["messages"]] == [other["message_id"]]


def test_list_around_anchor_and_flags(server):
    url, (a, b), msgs = setup_channel(server, n=10)
    base = f"/v3/group_channels/{url}/messages"
    latest = server.ok("GET", base)
    assert texts(latest) == [f"m{i}" for i in range(10)] and latest["has_prev"] is False and latest["has_next"] is False
    mid = msgs[5]
    page = server.ok("GET", base, params={"message_id": mid["message_id"], "prev_limit": 2, "next_limit": 2})
    assert texts(page) == ["m3", "m4", "m5", "m6", "m7"] and page["has_prev"] is True and page["has_next"] is True
    page = server.ok("GET", base, params={"message_id": mid["message_id"], "prev_limit": 2, "next_limit": 2, "include": "false"})
    assert texts(page) == ["m3", "m4", "m6", "m7"]
    page = server.ok("GET", base, params={"message_id": mid["message_id"], "prev_limit": 10, "next_limit": 0, "reverse": "True"})
    assert texts(page) == ["m5", "m4", "m3", "m2", "m1", "m0"] and page["has_prev"] is False and page["has_next"] is True
    page = server.ok("GET", base, params={"message_ts": mid["created_at"], "prev_limit": 1, "next_limit": 100, "include": "false"})
    # messages created in the same millisecond as m5 are excluded on both sides only with include=false
    assert "m5" not in texts(page) and texts(page)[-1] == "m9" and page["has_next"] is False
    page = server.ok("GET", base, params={"message_ts": 0, "next_limit": 3})
    assert texts(page) == ["m0", "m1", "m2"] and page["has_next"] is True and page["has_prev"] is False
    # keyset by (message_ts, message_id) with a message that need not exist
    page = server.ok("GET", base, params={"message_ts": msgs[2]["created_at"], "message_id": msgs[2]["message_id"],
                                          "prev_limit": 0, "next_limit": 2, "include": "false"})
    assert texts(page) == ["m3", "m4"]
    assert_error(server.request("GET", base, params={"message_id": 987654321}), 404, 400201)
    assert_error(server.request("GET", base, params={"prev_limit": 201}), 400, 400100, "prev_limit")
    assert_error(server.request("GET", base, params={"message_ts": "yesterday"}), 400, 400100, "message_ts")


def test_a_timestamp_anchor_counts_the_messages_before_it(server):
    """PROTOCOL.md §7.2: `prev_limit` counts the messages before `message_ts`; those created at
    exactly it come besides with `include` (guide 004's inclusive `previousResultSize`), for
    channel lists and thread lists alike."""
    url, (a, b), _ = setup_channel(server, n=0)
    base = f"/v3/group_channels/{url}/messages"
    older = [server.send(url, a, f"older {i}") for i in range(4)]
    first_at = server.send(url, b, "at 0")
    point = first_at["created_at"]
    for i in (1, 2):
        server.send(url, a, f"at {i}", created_at=point)
    for i in range(3):
        server.send(url, b, f"newer {i}")
    page = server.ok("GET", base, params={"message_ts": point, "prev_limit": 2, "next_limit": 2})
    assert texts(page) == ["older 2", "older 3", "at 0", "at 1", "at 2", "newer 0", "newer 1"]
    assert page["has_prev"] is True and page["has_next"] is True
    page = server.ok("GET", base, params={"message_ts": point, "prev_limit": 4, "next_limit": 3, "reverse": "true"})
    assert texts(page) == ["newer 2", "newer 1", "newer 0", "at 2", "at 1", "at 0", "older 3", "older 2", "older 1", "older 0"]
    assert page["has_prev"] is False and page["has_next"] is False
    page = server.ok("GET", base, params={"message_ts": point, "prev_limit": 2, "next_limit": 0, "include": "false"})
    assert texts(page) == ["older 2", "older 3"]
    # prev_limit 0 with include: the anchor's messages alone.
    page = server.ok("GET", base, params={"message_ts": point, "prev_limit": 0, "next_limit": 0})
    assert texts(page) == ["at 0", "at 1", "at 2"]
    # A thread listed from a timestamp counts the same way.
    parent = older[0]["message_id"]
    replies = [server.send(url, a, f"reply {i}", parent_message_id=parent) for i in range(2)]
    server.send(url, b, "reply at", parent_message_id=parent, created_at=replies[1]["created_at"])
    server.send(url, a, "reply 2", parent_message_id=parent)
    page = server.ok("GET", base, params={"message_ts": replies[1]["created_at"], "prev_limit": 1, "next_limit": 0,
                                          "parent_message_id": parent})
    assert texts(page) == ["reply 0", "reply 1", "reply at"]


def test_equal_timestamps_page_by_id(server):
    url, (a, b), msgs = setup_channel(server, n=30)
    base = f"/v3/group_channels/{url}/messages"
    seen, anchor = [], None
    while True:
        params = {"prev_limit": 0, "next_limit": 4, "include": "false"}
        if anchor is None:
            params["message_ts"] = 0
        else:
            params["message_id"] = anchor
        page = server.ok("GET", base, params=params)
        seen += [m["message_id"] for m in page["messages"]]
        if not page["has_next"]:
            break
        anchor = page["messages"][-1]["message_id"]
    assert seen == [m["message_id"] for m in msgs]


def test_filters(server):
    url, (a, b), _ = setup_channel(server)
    server.send(url, a, "a1", custom_type="x")
    server.send(url, b, "b1", custom_type="y")
    server.ok("POST", f"/v3/group_channels/{url}/messages", json={"message_type": "ADMM", "message": "adm"})
    p = server.send(url, a, "parent")
    server.send(url, b, "reply", parent_message_id=p["message_id"])
    server.send(url, b, "reply-ch", parent_message_id=p["message_id"], is_reply_to_channel=True)
    base = f"/v3/group_channels/{url}/messages"
    q = {"message_ts": 0, "next_limit": 50}
    assert texts(server.ok("GET", base, params=q)) == ["a1", "b1", "adm", "parent"]
    assert texts(server.ok("GET", base, params={**q, "include_reply_type": "all"})) == ["a1", "b1", "adm", "parent", "reply", "reply-ch"]
    assert texts(server.ok("GET", base, params={**q, "include_reply_type": "ONLY_REPLY_TO_CHANNEL"})) == ["a1", "b1", "adm", "parent", "reply-ch"]
    assert texts(server.ok("GET", base, params={**q, "message_type": "ADMM"})) == ["adm"]
    assert texts(server.ok("GET", base, params={**q, "custom_types": "x,y"})) == ["a1", "b1"]
    assert texts(server.ok("GET", base, params={**q, "sender_ids": b, "include_reply_type": "ALL"})) == ["b1", "reply", "reply-ch"]
    assert texts(server.ok("GET", base, params={**q, "parent_message_id": p["message_id"]})) == ["reply", "reply-ch"]
    page = server.ok("GET", base, params={**q, "include_thread_info": "true", "include_reply_type": "all",
                                          "include_parent_message_info": "true", "include_reactions": "true",
                                          "with_sorted_meta_array": "true"})
    parent = [m for m in page["messages"] if m["message"] == "parent"][0]
    assert parent["thread_info"]["reply_count"] == 2 and parent["thread_info"]["most_replies"][0]["user_id"] == b
    reply = [m for m in page["messages"] if m["message"] == "reply"][0]
    assert reply["parent_message_info"]["message"] == "parent" and reply["parent_message_info"]["user"]["user_id"] == a
    assert "reactions" in reply and "sorted_metaarray" in reply
    plain = server.ok("GET", base, params=q)["messages"][0]
    assert "reactions" not in plain and "thread_info" not in plain
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages",
                                json={"message_type": "MESG", "user_id": a, "message": "x",
                                      "parent_message_id": [m for m in page["messages"] if m["message"] == "reply"][0]["message_id"]}),
                 400, 400100, "parent_message_id")


def test_get_update_delete_permissions(server):
    op, a, b = server.user(), server.user(), server.user()
    url = server.channel([op, a, b], operator_ids=[op])["channel_url"]
    sa, sb, so = server.session(a), server.session(b), server.session(op)
    m = server.ok("POST", f"/v3/group_channels/{url}/messages", session=sa, json={"message_type": "MESG", "message": "orig"})
    mid = m["message_id"]
    path = f"/v3/group_channels/{url}/messages/{mid}"
    assert server.ok("GET", path, session=sb)["message"] == "orig"
    assert_error(server.request("PUT", path, session=sb, json={"message": "hack"}), 403, 400108)
    assert_error(server.request("DELETE", path, session=sb), 403, 400108)
    u = server.ok("PUT", path, session=sa, json={"message": "edited", "message_type": "MESG"})
    assert u["message"] == "edited" and u["updated_at"] > 0
    assert server.ok("PUT", path, session=so, json={"data": "by-op"})["data"] == "by-op"
    assert_error(server.request("PUT", path, json={"message_type": "FILE"}), 400, 400100, "message_type")
    assert_error(server.request("PUT", path, json={"message": 5}), 400, 400100, "message")
    m2 = server.ok("POST", f"/v3/group_channels/{url}/messages", session=sb, json={"message_type": "MESG", "message": "b"})
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{m2['message_id']}", session=so)
    server.ok("DELETE", path, session=sa)
    assert_error(server.request("GET", path), 404, 400201)
    assert_error(server.request("GET", f"/v3/group_channels/{url}/messages/abc"), 400, 400100, "message_id")
    assert server.ok("GET", f"/v3/group_channels/{url}/messages/total_count") == {"total": 0}
    assert "last_message" not in server.ok("GET", f"/v3/group_channels/{url}")


def test_reactions_pin_copy_metaarray(server):
    url, (a, b), msgs = setup_channel(server, n=1)
    mid = msgs[0]["message_id"]
    sa = server.session(a)
    base = f"/v3/group_channels/{url}/messages/{mid}"
    r = server.ok("POST", f"{base}/reactions", session=sa, json={"reaction": "👍"})
    assert r["operation"] == "ADD" and r["success"] is True and r["user_id"] == a
    server.ok("POST", f"{base}/reactions", json={"user_id": b, "reaction": "👍"})
    assert server.ok("GET", f"{base}/reactions")["reactions"][0]["user_ids"] == [a, b]
    server.ok("DELETE", f"{base}/reactions", session=sa, params={"reaction": "👍"})
    assert server.ok("GET", base)["reactions"][0]["user_ids"] == [b]
    assert_error(server.request("POST", f"{base}/reactions", session=sa, json={}), 400, 400111, "reaction")
    server.ok("POST", f"{base}/pin", session=sa)
    assert server.ok("GET", f"/v3/group_channels/{url}")["pinned_message_ids"] == [mid]
    assert server.ok("GET", base)["is_pinned"] is True
    server.ok("DELETE", f"{base}/pin", session=sa)
    assert server.ok("GET", f"/v3/group_channels/{url}")["pinned_message_ids"] == []
    dest = server.channel([a])["channel_url"]
    c = server.ok("POST", f"{base}/copy", session=sa, json={"dest_channel_url": dest})
    assert c["channel_url"] == dest and c["message"] == "m0" and c["message_id"] != mid and c["user"]["user_id"] == a
    assert_error(server.request("POST", f"{base}/copy", session=server.session(b), json={"dest_channel_url": dest}), 403, 400108)
    m = server.ok("POST", f"{base}/sorted_metaarray", json={"sorted_metaarray": [{"key": "k", "value": ["a"]}]})
    assert m["sorted_metaarray"] == [{"key": "k", "value": ["a"]}]
    m = server.ok("PUT", f"{base}/sorted_metaarray", json={"sorted_metaarray": [{"key": "k", "value": ["b"]}], "mode": "add"})
    assert m["sorted_metaarray"] == [{"key": "k", "value": ["a", "b"]}]
    m = server.ok("PUT", f"{base}/sorted_metaarray", json={"sorted_metaarray": [{"key": "k", "value": ["a"]}], "mode": "remove"})
    assert m["sorted_metaarray"] == [{"key": "k", "value": ["b"]}]


def test_read_requires_membership(server):
    url, (a, b), _ = setup_channel(server, n=2)
    so = server.session(server.user())
    assert_error(server.request("GET", f"/v3/group_channels/{url}/messages", session=so), 403, 400108)
    assert_error(server.request("GET", f"/v3/group_channels/{url}/messages/changelogs", session=so, params={"change_ts": 0}), 403, 400108)


def test_ephemeral_channel_not_stored(server):
    a = server.user()
    url = server.channel([a], is_ephemeral=True)["channel_url"]
    m = server.send(url, a, "gone")
    assert m["message"] == "gone"
    assert server.ok("GET", f"/v3/group_channels/{url}/messages")["messages"] == []
    assert "last_message" not in server.ok("GET", f"/v3/group_channels/{url}")


def test_file_upload_and_download(fresh_server):
    server = fresh_server(["--upload-limit-bytes", "1000"])
    url, (a, b), _ = setup_channel(server)
    sa = server.session(a)
    payload = bytes(range(256)) * 3
    r = requests.post(server.url(f"/v3/group_channels/{url}/messages"), headers={"Session-Key": sa},
                      data={"message_type": "FILE", "req_id": "up1", "custom_type": "doc",
                            "thumbnails": '[{"url":"http://t","width":1,"height":2}]'},
                      files={"file": ("data.bin", payload, "application/x-test")}, timeout=10)
    assert r.status_code == 200, r.text
    m = r.json()
    assert m["file"]["name"] == "data.bin" and m["file"]["size"] == len(payload) and m["file"]["type"] == "application/x-test"
    assert m["file"]["require_auth"] is True and m["file"]["url"].startswith(server.base + "/v3/files/")
    assert m["custom_type"] == "doc" and m["thumbnails"][0]["height"] == 2
    got = requests.get(m["file"]["url"], headers={"Session-Key": server.session(b)}, timeout=10)
    assert got.status_code == 200 and got.content == payload and got.headers["content-type"] == "application/x-test"
    outsider = server.session(server.user())
    assert requests.get(m["file"]["url"], headers={"Session-Key": outsider}, timeout=10).status_code == 403
    assert requests.get(m["file"]["url"], timeout=10).status_code == 401
    big = requests.post(server.url(f"/v3/group_channels/{url}/messages"), headers={"Session-Key": sa},
                        data={"message_type": "FILE"}, files={"file": ("big.bin", b"x" * 1001)}, timeout=10)
    assert_error(big, 413, 400113)
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{m['message_id']}")
    assert requests.get(m["file"]["url"], headers={"Session-Key": sa}, timeout=10).status_code == 404
    bad = requests.post(server.url(f"/v3/group_channels/{url}/messages"), headers={"Session-Key": sa,
                        "Content-Type": "multipart/form-data; boundary=zzz"}, data=b"garbage", timeout=10)
    assert_error(bad, 400, 400102)


def test_reports(server):
    url, (a, b), msgs = setup_channel(server, n=1)
    sa = server.session(a)
    r = server.ok("POST", f"/v3/report/group_channels/{url}/messages/{msgs[0]['message_id']}", session=sa,
                  json={"report_category": "spam", "report_description": "ads"})
    assert r["report_type"] == "message" and r["reporting_user"]["user_id"] == a and r["offending_user"]["user_id"] == a
    r = server.ok("POST", f"/v3/report/users/{b}", session=sa, json={"report_category": "harassing"})
    assert r["report_type"] == "user" and r["offending_user"]["user_id"] == b
    r = server.ok("POST", f"/v3/report/group_channels/{url}", session=sa, json={"report_category": "inappropriate"})
    assert r["report_type"] == "channel" and r["channel_url"] == url
    assert_error(server.request("POST", f"/v3/report/group_channels/{url}", session=sa, json={"report_category": "meh"}), 400, 400100)
    assert_error(server.request("POST", f"/v3/report/group_channels/{url}", session=server.session(server.user()),
                                json={"report_category": "spam"}), 403, 400108)
    assert_error(server.request("GET", "/v3/report", session=sa), 403, 400108)
    reports = server.ok("GET", "/v3/report", params={"limit": 100})["reports"]
    assert {"message", "user", "channel"} <= {x["report_type"] for x in reports}
