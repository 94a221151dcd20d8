import time
import uuid

from conftest import API_TOKEN, assert_error


def test_create_get_update_delete_user(server):
    uid = server.user(profile_url="http://x/p.png", metadata={"k": "v"})
    u = server.ok("GET", f"/v3/users/{uid}")
    assert u["user_id"] == uid and u["profile_url"] == "http://x/p.png" and u["metadata"] == {"k": "v"}
    assert u["is_active"] is True and isinstance(u["created_at"], int)
    assert all(v is not None for v in u.values())
    u = server.ok("PUT", f"/v3/users/{uid}", json={"nickname": "New", "metadata": {"a": "b"}})
    assert u["nickname"] == "New" and u["metadata"] == {"a": "b"}
    assert server.ok("GET", f"/v3/users/{uid}")["nickname"] == "New"
    server.ok("DELETE", f"/v3/users/{uid}")
    assert_error(server.request("GET", f"/v3/users/{uid}"), 404, 400201)


def test_duplicate_user_and_bad_fields(server):
    uid = server.user()
    assert_error(server.request("POST", "/v3/users", json={"user_id": uid, "nickname": "x"}), 400, 400202)
    assert_error(server.request("POST", "/v3/users", json={"nickname": "x"}), 400, 400111, "user_id")
    assert_error(server.request("POST", "/v3/users", json={"user_id": 5, "nickname": "x"}), 400, 400100, "user_id")
    assert_error(server.request("POST", "/v3/users", json={"user_id": "", "nickname": "x"}), 400, 400100, "user_id")
    assert_error(server.request("POST", "/v3/users", json={"user_id": "a" * 81}), 400, 400104, "user_id")
    # 80 bytes is the limit, not 80 characters: 27 three-byte characters are 81 bytes.
    assert_error(server.request("POST", "/v3/users", json={"user_id": "\u20ac" * 27}), 400, 400104, "user_id")
    assert server.request("POST", "/v3/users", json={"user_id": "\u20ac" * 26}).status_code == 200
    for dots in (".", ".."):  # no route could reach such an id
        assert_error(server.request("POST", "/v3/users", json={"user_id": dots}), 400, 400100, "user_id")
    assert_error(server.request("POST", "/v3/users", json={"user_id": "m1", "metadata": {"k": 1}}), 400, 400100, "metadata")
    assert_error(server.request("PUT", f"/v3/users/{uid}", json={"nickname": True}), 400, 400100, "nickname")


def test_list_users_pagination_no_skips_or_duplicates(server):
    prefix = "pg"
    ids = sorted(server.user(prefix) for _ in range(7))
    seen = []
    token = None
    while True:
        params = {"limit": 3, "user_ids": ",".join(ids)}
        if token:
            params["token"] = token
        page = server.ok("GET", "/v3/users", params=params)
        seen += [u["user_id"] for u in page["users"]]
        token = page["next"]
        if token == "":
            break
    assert seen == ids
    # repeated list style works too
    page = server.ok("GET", "/v3/users", params=[("user_ids", ids[0]), ("user_ids", ids[1])])
    assert [u["user_id"] for u in page["users"]] == ids[:2]
    assert_error(server.request("GET", "/v3/users", params={"token": "zz"}), 400, 400110)
    assert_error(server.request("GET", "/v3/users", params={"limit": 0}), 400, 400100, "limit")
    assert_error(server.request("GET", "/v3/users", params={"limit": "x"}), 400, 400100, "limit")


def test_auth_rules(server):
    a, b = server.user(), server.user()
    assert_error(server.request("GET", f"/v3/users/{a}", token=None), 401, 400301)
    assert_error(server.request("GET", f"/v3/users/{a}", token="wrong"), 401, 400401)
    assert_error(server.request("GET", f"/v3/users/{a}", token=None, session="nope"), 401, 400301)
    sa = server.session(a)
    assert server.ok("GET", f"/v3/users/{b}", session=sa)["user_id"] == b
    assert server.ok("PUT", f"/v3/users/{a}", session=sa, json={"nickname": "me"})["nickname"] == "me"
    assert_error(server.request("PUT", f"/v3/users/{b}", session=sa, json={"nickname": "x"}), 403, 400108)
    assert_error(server.request("DELETE", f"/v3/users/{b}", session=sa), 403, 400108)
    assert_error(server.request("POST", "/v3/users", session=sa, json={"user_id": "zz"}), 403, 400108)
    assert_error(server.request("POST", f"/v3/users/{b}/token", session=sa), 403, 400108)
    assert server.ok("GET", f"/v3/users/{a}", session=sa)["has_ever_logged_in"] is True


def test_session_expiry(server):
    a = server.user()
    tok = server.ok("POST", f"/v3/users/{a}/token", json={"expires_at": int(time.time() * 1000) + 700})
    assert tok["user_id"] == a and tok["expires_at"] > 0
    assert server.request("GET", f"/v3/users/{a}", session=tok["token"]).status_code == 200
    time.sleep(1.0)
    assert_error(server.request("GET", f"/v3/users/{a}", session=tok["token"]), 401, 400302)
    assert_error(server.request("POST", f"/v3/users/{a}/token", json={"expires_at": 5}), 400, 400100, "expires_at")


def test_deactivated_user_session_rejected(server):
    a = server.user()
    s = server.session(a)
    server.ok("PUT", f"/v3/users/{a}", json={"is_active": False})
    assert_error(server.request("GET", f"/v3/users/{a}", session=s), 401, 400301)
    users = server.ok("GET", "/v3/users", params={"user_ids": a, "active_mode": "deactivated"})["users"]
    assert [u["user_id"] for u in users] == [a]


def test_invitation_preference_and_unread(server):
    a, b = server.user(), server.user()
    assert server.ok("GET", f"/v3/users/{b}/channel_invitation_preference") == {"auto_accept": True}
    assert server.ok("PUT", f"/v3/users/{b}/channel_invitation_preference", json={"auto_accept": False}) == {"auto_accept": False}
    assert_error(server.request("PUT", f"/v3/users/{b}/channel_invitation_preference", json={}), 400, 400111, "auto_accept")
    c = server.channel([a, b])
    assert {m["user_id"]: m["state"] for m in c["members"]} == {a: "joined", b: "invited"}
    c2 = server.channel([a], custom_type="t1")
    server.send(c["channel_url"], a)
    server.send(c2["channel_url"], a)  # a's own message: not unread for a
    c3 = server.channel([a, server.user()])
    other = [m["user_id"] for m in c3["members"] if m["user_id"] != a][0]
    server.send(c3["channel_url"], other)
    server.send(c3["channel_url"], other)
    assert server.ok("GET", f"/v3/users/{a}/unread_message_count") == {"unread_count": 2}
    assert server.ok("GET", f"/v3/users/{a}/unread_channel_count") == {"unread_count": 1}
    u = server.ok("GET", f"/v3/users/{a}", params={"include_unread_count": "True"})
    assert u["unread_message_count"] == 2 and u["unread_channel_count"] == 1
    server.ok("PUT", f"/v3/users/{a}/mark_as_read_all", json={})
    assert server.ok("GET", f"/v3/users/{a}/unread_message_count") == {"unread_count": 0}


def test_unknown_routes_and_methods(server):
    assert_error(server.request("GET", "/v3/nothing"), 404, 400201)
    assert_error(server.request("GET", "/v2/users"), 404, 400201)
    assert_error(server.request("PATCH", "/v3/users"), 405, 400105)
    assert_error(server.request("POST", "/v3/users", data="[1,2]", headers={"Content-Type": "application/json"}), 400, 400102)
    assert_error(server.request("POST", "/v3/users", data="{", headers={"Content-Type": "application/json"}), 400, 400102)


def test_text_filters_compare_as_protocol_says(server):
    """PROTOCOL.md §6.2 "Equality of text in filters": a channel name matches by its NFC key,
    a nickname, user metadata value or custom type byte for byte."""
    composed, decomposed = "\u00e9t\u00e9", "e\u0301te\u0301"
    tag = uuid.uuid4().hex[:8]
    uid = server.user("tf", nickname=composed + tag, metadata={"m": composed + tag})
    url = server.channel([uid], name=decomposed + tag, custom_type=composed + tag)["channel_url"]

    def user_ids(**query):
        return [u["user_id"] for u in server.ok("GET", "/v3/users", params=query)["users"]]

    def channel_urls(**query):
        query = {"show_empty": "true", "limit": 100, **query}
        return [c["channel_url"] for c in server.ok("GET", "/v3/group_channels", params=query)["channels"]]

    assert user_ids(nickname=composed + tag) == [uid]
    assert user_ids(nickname=decomposed + tag) == []
    assert user_ids(metadatakey="m", metadatavalues_in=composed + tag) == [uid]
    assert user_ids(metadatakey="m", metadatavalues_in=decomposed + tag) == []
    assert channel_urls(name=composed + tag) == [url]
    assert channel_urls(name=decomposed + tag) == [url]
    assert channel_urls(custom_types=composed + tag) == [url]
    assert channel_urls(custom_types=decomposed + tag) == []
