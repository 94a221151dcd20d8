import uuid

from conftest import UNDO_SCHEMA_22, assert_error


def member_states(channel):
    return {m["user_id"]: m["state"] for m in channel["members"]}


def test_create_variants(server):
    a, b = server.user(), server.user()
    url = "custom-" + uuid.uuid4().hex[:6]
    c = server.channel([a, b], channel_url=url, name="N", cover_url="http://c", data="d", custom_type="ct",
                       operator_ids=[a], is_public=True)
    assert c["channel_url"] == url and c["name"] == "N" and c["cover_url"] == "http://c" and c["data"] == "d"
    assert c["custom_type"] == "ct" and c["is_public"] is True and c["member_count"] == 2
    assert [o["user_id"] for o in c["operators"]] == [a]
    assert c["is_created"] is True
    assert_error(server.request("POST", "/v3/group_channels", json={"channel_url": url}), 400, 400202)
    assert_error(server.request("POST", "/v3/group_channels", json={"channel_url": "bad url!"}), 400, 400100, "channel_url")
    for dots in (".", ".."):  # URL normalization would drop the segment: no route could reach it
        assert_error(server.request("POST", "/v3/group_channels", json={"channel_url": dots}), 400, 400100, "channel_url")
    assert_error(server.request("POST", "/v3/group_channels", json={"is_super": True, "is_distinct": True}), 400, 400100, "is_distinct")
    assert_error(server.request("POST", "/v3/group_channels", json={"user_ids": "x", "strict": True}), 404, 400201)
    assert_error(server.request("POST", "/v3/group_channels", json={"is_public": "maybe"}), 400, 400100, "is_public")
    # users: [{user_id}] (the platform SDK's form) works too
    c2 = server.ok("POST", "/v3/group_channels", json={"users": [{"user_id": a}], "user_ids": [b]})
    assert set(member_states(c2)) == {a, b}


def test_distinct_returns_existing(server):
    a, b = server.user(), server.user()
    c1 = server.channel([a, b], is_distinct=True, custom_type="dm")
    c2 = server.channel([b, a], is_distinct=True, custom_type="dm")
    assert c1["channel_url"] == c2["channel_url"] and c2["is_created"] is False
    c3 = server.channel([a, b], is_distinct=True, custom_type="other")
    assert c3["channel_url"] != c1["channel_url"]
    c4 = server.channel([a, b], is_distinct=False, custom_type="dm")
    assert c4["channel_url"] != c1["channel_url"]


def test_session_create_and_get_permissions(server):
    a, b, outsider = server.user(), server.user(), server.user()
    sa, so = server.session(a), server.session(outsider)
    c = server.ok("POST", "/v3/group_channels", session=sa, json={"user_ids": [b]})
    assert member_states(c) == {a: "joined", b: "joined"}
    assert c["created_by"]["user_id"] == a and c["member_state"] == "joined"
    url = c["channel_url"]
    assert_error(server.request("GET", f"/v3/group_channels/{url}", session=so), 403, 400108)
    assert_error(server.request("PUT", f"/v3/group_channels/{url}", session=sa, json={"name": "x"}), 403, 400108)
    assert_error(server.request("DELETE", f"/v3/group_channels/{url}", session=sa), 403, 400108)
    assert_error(server.request("GET", "/v3/group_channels/nope-" + uuid.uuid4().hex), 404, 400201)
    server.ok("POST", f"/v3/group_channels/{url}/operators", json={"operator_ids": [a]})
    assert server.ok("PUT", f"/v3/group_channels/{url}", session=sa, json={"name": "renamed"})["name"] == "renamed"
    assert server.ok("GET", f"/v3/group_channels/{url}", session=sa)["my_role"] == "operator"
    server.ok("DELETE", f"/v3/group_channels/{url}", session=sa)
    assert_error(server.request("GET", f"/v3/group_channels/{url}"), 404, 400201)


def test_invite_accept_decline_join_leave(server):
    a, b, c_, d = server.user(), server.user(), server.user(), server.user()
    for u in (b, c_):
        server.ok("PUT", f"/v3/users/{u}/channel_invitation_preference", json={"auto_accept": False})
    sa, sb, sc, sd = (server.session(u) for u in (a, b, c_, d))
    ch = server.ok("POST", "/v3/group_channels", session=sa, json={"user_ids": []})
    url = ch["channel_url"]
    assert_error(server.request("POST", f"/v3/group_channels/{url}/invite", session=sd, json={"user_ids": [b]}), 403, 400108)
    ch = server.ok("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [b, c_, d]})
    assert member_states(ch) == {a: "joined", b: "invited", c_: "invited", d: "joined"}
    # an invitee cannot accept for someone else, nor send
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/accept", session=sb, json={"user_id": c_}), 403, 400108)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", session=sb,
                                json={"message_type": "MESG", "message": "x"}), 403, 400108)
    ch = server.ok("PUT", f"/v3/group_channels/{url}/accept", session=sb, json={})
    assert ch["member_state"] == "joined"
    server.ok("PUT", f"/v3/group_channels/{url}/decline", session=sc, json={})
    assert c_ not in member_states(server.ok("GET", f"/v3/group_channels/{url}"))
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/decline", session=sc, json={}), 400, 400100)
    # join: private channel refused, public allowed
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/join", session=sc, json={}), 403, 400109)
    pub = server.channel([a], is_public=True)["channel_url"]
    assert server.ok("PUT", f"/v3/group_channels/{pub}/join", session=sc, json={})["member_state"] == "joined"
    # leave: only yourself
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/leave", session=sb, json={"user_ids": [a]}), 403, 400108)
    server.ok("PUT", f"/v3/group_channels/{url}/leave", session=sb, json={})
    assert b not in member_states(server.ok("GET", f"/v3/group_channels/{url}"))
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [b]}), 400, 400100, "user_ids")
    members = server.ok("GET", f"/v3/group_channels/{url}/members/{d}")
    assert members == {"is_member": True, "state": "joined"}


def test_list_filters_and_orders(server):
    a, b = server.user(), server.user()
    tag = uuid.uuid4().hex[:6]
    c1 = server.channel([a, b], name=f"alpha {tag}", custom_type=tag + "x")["channel_url"]
    c2 = server.channel([a], name=f"beta {tag}", custom_type=tag + "y", is_public=True)["channel_url"]
    c3 = server.channel([a, b], name=f"gamma {tag}", custom_type=tag + "x", is_distinct=True)["channel_url"]
    server.send(c1, a)
    server.send(c3, a)
    server.send(c1, b)

    def urls(path, **params):
        return [c["channel_url"] for c in server.ok("GET", path, params=params)["channels"]]

    mine = f"/v3/users/{a}/my_group_channels"
    assert urls(mine, custom_types=f"{tag}x,{tag}y", show_empty="true") == [c3, c2, c1]  # chronological
    assert urls(mine, custom_types=f"{tag}x,{tag}y") == [c3, c1]  # show_empty false by default
    assert urls(mine, custom_types=f"{tag}x,{tag}y", order="latest_last_message", show_empty="True") == [c1, c3, c2]
    assert urls(mine, name_contains=tag.upper(), order="channel_name_alphabetical", show_empty="true") == [c1, c2, c3]
    assert urls(mine, custom_type_startswith=tag, public_mode="public", show_empty="true") == [c2]
    assert urls(mine, custom_type_startswith=tag, distinct_mode="distinct", show_empty="true") == [c3]
    assert urls(mine, custom_type_startswith=tag, members_exactly_in=b, show_empty="true") == [c3, c1]
    assert urls(mine, custom_type_startswith=tag, members_include_in=f"{a},{b}", query_type="AND", show_empty="true") == [c3, c1]
    assert urls(mine, custom_type_startswith=tag, unread_filter="unread_message", show_empty="true") == [c1]
    assert urls("/v3/group_channels", custom_types=f"{tag}y") == [c2]
    server.ok("POST", f"/v3/group_channels/{c2}/metadata", json={"metadata": {"rank": "b"}})
    server.ok("POST", f"/v3/group_channels/{c1}/metadata", json={"metadata": {"rank": "a"}})
    assert urls(mine, custom_type_startswith=tag, order="metadata_value_alphabetical", metadata_order_key="rank",
                show_empty="true") == [c1, c2, c3]
    assert urls(mine, custom_type_startswith=tag, metadata_key="rank", metadata_values="b", show_empty="true") == [c2]
    assert_error(server.request("GET", mine, params={"order": "random"}), 400, 400100, "order")
    assert_error(server.request("GET", mine, params={"order": "metadata_value_alphabetical"}), 400, 400111, "metadata_order_key")
    assert_error(server.request("GET", mine, params={"show_empty": "perhaps"}), 400, 400100, "show_empty")
    assert_error(server.request("GET", mine, params={"token": "00"}), 400, 400110)


def test_public_listing_membership_filter(server):
    # The public channel list of the reference: public_mode=public with public_membership_filter
    # all (every public channel) or joined (those the caller has joined).
    a, b, outsider = server.user(), server.user(), server.user()
    tag = uuid.uuid4().hex[:6]
    joined = server.channel([a, b], custom_type=tag, is_public=True)["channel_url"]
    other = server.channel([b], custom_type=tag, is_public=True)["channel_url"]
    server.channel([a, b], custom_type=tag)  # private: never in the public list
    server.send(joined, b)
    server.send(other, b)
    server.ok("PUT", f"/v3/group_channels/{other}/join", json={"user_id": outsider})

    def urls(user, **params):
        answer = server.ok("GET", "/v3/group_channels", session=server.session(user),
                           params={"public_mode": "public", "custom_types": tag, **params})
        return sorted(c["channel_url"] for c in answer["channels"])

    assert urls(a) == urls(a, public_membership_filter="all") == sorted([joined, other])
    assert urls(a, public_membership_filter="joined") == [joined]
    assert urls(outsider, public_membership_filter="joined") == [other]
    assert urls(b, public_membership_filter="JOINED") == sorted([joined, other])
    # An invitation is not a membership.
    server.ok("PUT", f"/v3/users/{outsider}/channel_invitation_preference", json={"auto_accept": False})
    server.ok("POST", f"/v3/group_channels/{joined}/invite", json={"user_ids": [outsider], "inviter_id": b})
    assert urls(outsider, public_membership_filter="joined") == [other]
    assert_error(server.request("GET", "/v3/group_channels", session=server.session(a),
                                params={"public_membership_filter": "mine"}), 400, 400100, "public_membership_filter")
    # Without a user there is no membership to filter by.
    assert_error(server.request("GET", "/v3/group_channels", params={"public_membership_filter": "joined"}),
                 400, 400100, "public_membership_filter")


def test_list_pagination_no_skip_no_duplicate_with_concurrent_inserts(server):
    a = server.user()
    tag = uuid.uuid4().hex[:6]
    created = [server.channel([a], custom_type=tag)["channel_url"] for _ in range(9)]
    seen, token, inserted = [], None, []
    for round_ in range(10):
        params = {"limit": 2, "custom_types": tag, "show_empty": "true"}
        if token:
            params["token"] = token
        page = server.ok("GET", f"/v3/users/{a}/my_group_channels", params=params)
        assert page["next"] is not None and isinstance(page["ts"], int)
        seen += [c["channel_url"] for c in page["channels"]]
        if round_ == 1:
            inserted.append(server.channel([a], custom_type=tag)["channel_url"])  # newer: sorts before the cursor
        token = page["next"]
        if not token:
            break
    assert len(seen) == len(set(seen))
    assert seen == list(reversed(created))


def test_latest_last_message_order_pagination(server):
    a = server.user()
    tag = uuid.uuid4().hex[:6]
    chans = [server.channel([a], custom_type=tag)["channel_url"] for _ in range(5)]
    for url in [chans[2], chans[0], chans[4]]:
        server.send(url, a)
    expect = [chans[4], chans[0], chans[2], chans[3], chans[1]]
    seen, token = [], None
    while True:
        params = {"limit": 2, "custom_types": tag, "show_empty": "true", "order": "latest_last_message"}
        if token:
            params["token"] = token
        page = server.ok("GET", f"/v3/users/{a}/my_group_channels", params=params)
        seen += [c["channel_url"] for c in page["channels"]]
        token = page["next"]
        if not token:
            break
    assert seen == expect


def test_hide_unhide_and_auto_unhide(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    server.send(url, b, "old")
    sa = server.session(a)
    server.ok("PUT", f"/v3/group_channels/{url}/hide", session=sa, json={"hide_previous_messages": True, "allow_auto_unhide": True})
    ch = server.ok("GET", f"/v3/group_channels/{url}", session=sa)
    assert ch["is_hidden"] is True and ch["hidden_state"] == "hidden_allow_auto_unhide" and ch["ts_message_offset"] > 0
    assert server.ok("GET", f"/v3/group_channels/{url}/messages", session=sa)["messages"] == []
    listed = server.ok("GET", f"/v3/users/{a}/my_group_channels", params={"show_empty": "true", "channel_urls": url})["channels"]
    assert listed == []
    hidden = server.ok("GET", f"/v3/users/{a}/my_group_channels", params={"show_empty": "true", "channel_urls": url, "hidden_mode": "hidden_only"})["channels"]
    assert [c["channel_url"] for c in hidden] == [url]
    server.send(url, b, "new")
    ch = server.ok("GET", f"/v3/group_channels/{url}", session=sa)
    assert ch["hidden_state"] == "unhidden"
    assert [m["message"] for m in server.ok("GET", f"/v3/group_channels/{url}/messages", session=sa)["messages"]] == ["new"]
    server.ok("PUT", f"/v3/group_channels/{url}/hide", session=sa, json={"allow_auto_unhide": False})
    server.send(url, b, "newer")
    assert server.ok("GET", f"/v3/group_channels/{url}", session=sa)["hidden_state"] == "hidden_prevent_auto_unhide"
    server.ok("DELETE", f"/v3/group_channels/{url}/hide", session=sa)
    assert server.ok("GET", f"/v3/group_channels/{url}", session=sa)["hidden_state"] == "unhidden"


def test_reset_history(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    server.send(url, b, "before")
    sa = server.session(a)
    r = server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sa, json={})
    assert r["ts_message_offset"] > 0
    server.send(url, b, "after")
    assert [m["message"] for m in server.ok("GET", f"/v3/group_channels/{url}/messages", session=sa)["messages"]] == ["after"]
    sb = server.session(b)
    assert len(server.ok("GET", f"/v3/group_channels/{url}/messages", session=sb)["messages"]) == 2
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sa, json={"user_id": b}), 403)


def test_members_list_filters_and_order(server):
    ids = [server.user(nickname=n) for n in ["zed", "amy", "bob", "cat"]]
    url = server.channel(ids, operator_ids=[ids[0]])["channel_url"]
    server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": ids[2]})
    def nicks(**params):
        return [m["nickname"] for m in server.ok("GET", f"/v3/group_channels/{url}/members", params=params)["members"]]
    assert nicks() == ["amy", "bob", "cat", "zed"]
    assert nicks(order="operator_then_member_alphabetical") == ["zed", "amy", "bob", "cat"]
    assert nicks(operator_filter="operator") == ["zed"]
    assert nicks(operator_filter="nonoperator") == ["amy", "bob", "cat"]
    assert nicks(muted_member_filter="muted") == ["bob"]
    assert nicks(nickname_startswith="c") == ["cat"]
    page1 = server.ok("GET", f"/v3/group_channels/{url}/members", params={"limit": 3})
    page2 = server.ok("GET", f"/v3/group_channels/{url}/members", params={"limit": 3, "token": page1["next"]})
    assert [m["nickname"] for m in page1["members"] + page2["members"]] == ["amy", "bob", "cat", "zed"] and page2["next"] == ""
    outsider = server.session(server.user())
    assert_error(server.request("GET", f"/v3/group_channels/{url}/members", session=outsider), 403, 400108)


def test_operators_ban_mute_freeze(server):
    op, m1, m2 = server.user(), server.user(), server.user()
    url = server.channel([op, m1, m2], operator_ids=[op])["channel_url"]
    so, s1 = server.session(op), server.session(m1)
    # members cannot moderate
    for method, path, body in [("POST", "operators", {"operator_ids": [m2]}), ("POST", "ban", {"user_id": m2}),
                               ("POST", "mute", {"user_id": m2}), ("PUT", "freeze", {"freeze": True})]:
        assert_error(server.request(method, f"/v3/group_channels/{url}/{path}", session=s1, json=body), 403, 400108)
    server.ok("POST", f"/v3/group_channels/{url}/operators", session=so, json={"operator_ids": [m1]})
    ops = server.ok("GET", f"/v3/group_channels/{url}/operators")["operators"]
    assert sorted(o["user_id"] for o in ops) == sorted([op, m1])
    server.ok("DELETE", f"/v3/group_channels/{url}/operators", session=so, params={"operator_ids": m1})
    assert [o["user_id"] for o in server.ok("GET", f"/v3/group_channels/{url}/operators")["operators"]] == [op]
    assert_error(server.request("POST", f"/v3/group_channels/{url}/operators", json={"operator_ids": [server.user()]}), 400, 400100)
    # mute: cannot send until unmuted
    server.ok("POST", f"/v3/group_channels/{url}/mute", session=so, json={"user_id": m1, "seconds": 60, "description": "calm"})
    assert server.ok("GET", f"/v3/group_channels/{url}/mute/{m1}")["is_muted"] is True
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", session=s1,
                                json={"message_type": "MESG", "message": "x"}), 403, 900050)
    assert [x["user"]["user_id"] for x in server.ok("GET", f"/v3/group_channels/{url}/mute")["muted_list"]] == [m1]
    server.ok("DELETE", f"/v3/group_channels/{url}/mute/{m1}", session=so)
    server.ok("POST", f"/v3/group_channels/{url}/messages", session=s1, json={"message_type": "MESG", "message": "free"})
    # timed mute expires
    server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": m1, "seconds": 1})
    import time
    time.sleep(1.2)
    server.ok("POST", f"/v3/group_channels/{url}/messages", session=s1, json={"message_type": "MESG", "message": "again"})
    # freeze: only operators send
    server.ok("PUT", f"/v3/group_channels/{url}/freeze", session=so, json={"freeze": True})
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", session=s1,
                                json={"message_type": "MESG", "message": "x"}), 403, 900060)
    server.ok("POST", f"/v3/group_channels/{url}/messages", session=so, json={"message_type": "MESG", "message": "op"})
    assert server.ok("PUT", f"/v3/group_channels/{url}/freeze", session=so, json={"freeze": False})["freeze"] is False
    # ban: removed, cannot rejoin or be invited
    server.ok("POST", f"/v3/group_channels/{url}/ban", session=so, json={"user_id": m2, "seconds": -1})
    ch = server.ok("GET", f"/v3/group_channels/{url}")
    assert m2 not in member_states(ch)
    assert server.ok("GET", f"/v3/group_channels/{url}/ban/{m2}")["is_banned"] is True
    assert [x["user"]["user_id"] for x in server.ok("GET", f"/v3/group_channels/{url}/ban")["banned_list"]] == [m2]
    assert_error(server.request("POST", f"/v3/group_channels/{url}/invite", session=so, json={"user_ids": [m2]}), 403, 900041)
    server.ok("PUT", f"/v3/group_channels/{url}", json={"is_public": True})
    assert_error(server.request("PUT", f"/v3/group_channels/{url}/join", json={"user_id": m2}), 403, 900041)
    server.ok("DELETE", f"/v3/group_channels/{url}/ban/{m2}", session=so)
    server.ok("PUT", f"/v3/group_channels/{url}/join", json={"user_id": m2})
    assert_error(server.request("DELETE", f"/v3/group_channels/{url}/ban/{m2}"), 404, 400201)


def test_metadata_and_metacounters(server):
    a, b = server.user(), server.user()
    url = server.channel([a])["channel_url"]
    sa, sb = server.session(a), server.session(b)
    base = f"/v3/group_channels/{url}"
    assert server.ok("POST", f"{base}/metadata", session=sa, json={"metadata": {"k1": "v1", "k2": "v2"}}) == {"k1": "v1", "k2": "v2"}
    assert_error(server.request("POST", f"{base}/metadata", json={"metadata": {"k1": "x"}}), 400, 400202)
    assert_error(server.request("GET", f"{base}/metadata", session=sb), 403, 400108)
    assert server.ok("PUT", f"{base}/metadata", json={"metadata": {"k1": "new"}}) == {"k1": "new"}
    assert_error(server.request("PUT", f"{base}/metadata", json={"metadata": {"k9": "x"}}), 404, 400201)
    assert server.ok("PUT", f"{base}/metadata", json={"metadata": {"k9": "x"}, "upsert": True}) == {"k9": "x"}
    assert server.ok("PUT", f"{base}/metadata/k2", json={"value": "vv"}) == {"k2": "vv"}
    assert server.ok("GET", f"{base}/metadata/k2") == {"k2": "vv"}
    assert server.ok("GET", f"{base}/metadata", params={"keys": "k1,k9"}) == {"k1": "new", "k9": "x"}
    server.ok("DELETE", f"{base}/metadata/k1")
    assert_error(server.request("GET", f"{base}/metadata/k1"), 404, 400201)
    server.ok("DELETE", f"{base}/metadata")
    assert server.ok("GET", f"{base}/metadata") == {}
    assert_error(server.request("POST", f"{base}/metadata", json={"metadata": "x"}), 400, 400100, "metadata")
    assert server.ok("POST", f"{base}/metacounter", json={"metacounter": {"c": 5}}) == {"c": 5}
    assert server.ok("PUT", f"{base}/metacounter", json={"metacounter": {"c": 2}, "mode": "increase"}) == {"c": 7}
    assert server.ok("PUT", f"{base}/metacounter/c", json={"value": 3, "mode": "decrease"}) == {"c": 4}
    assert server.ok("PUT", f"{base}/metacounter", json={"metacounter": {"c": 10}}) == {"c": 10}
    assert_error(server.request("PUT", f"{base}/metacounter", json={"metacounter": {"c": "x"}}), 400, 400100)
    server.ok("DELETE", f"{base}/metacounter/c")
    assert server.ok("GET", f"{base}/metacounter") == {}
    ch = server.ok("GET", base, params={"show_metadata": "true"})
    assert ch["metadata"] == {}


def test_typing_read_delivered(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    sa = server.session(a)
    server.ok("POST", f"/v3/group_channels/{url}/typing", session=sa, json={})
    server.ok("DELETE", f"/v3/group_channels/{url}/typing", session=sa)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/typing", session=sa, json={"user_ids": [b]}), 403)
    server.send(url, b)
    assert server.ok("GET", f"/v3/group_channels/{url}", session=sa)["unread_message_count"] == 1
    ts = server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", session=sa, json={})["ts"]
    ch = server.ok("GET", f"/v3/group_channels/{url}", session=sa, params={"show_read_receipt": "true", "show_delivery_receipt": "true"})
    assert ch["unread_message_count"] == 0 and ch["read_receipt"][a] == ts and ch["user_last_read"] == ts
    d = server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_delivered", json={"user_id": b})["ts"]
    ch = server.ok("GET", f"/v3/group_channels/{url}", params={"show_delivery_receipt": "true"})
    assert ch["delivery_receipt"][b] == d


def test_mentions_count(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    server.send(url, b, "hey", mentioned_user_ids=[a])
    server.send(url, b, "all", mention_type="channel")
    server.send(url, b, "plain")
    ch = server.ok("GET", f"/v3/group_channels/{url}", params={"user_id": a})
    assert ch["unread_message_count"] == 3 and ch["unread_mention_count"] == 2


def test_names_and_nicknames_order_case_insensitively(server):
    """PROTOCOL.md "Sort orders of text": channel names and nicknames compare case-folded after
    NFC, then by their exact NFC bytes, then by URL (user id)."""
    owner = server.user()
    tag = uuid.uuid4().hex[:6]
    names = ["beta", "Alpha", "alpha", "\u00c9clair", "e\u0301clair", "Zeta", "apple", "BETA"]
    created = {server.channel([owner], name=f"{tag} {n}")["channel_url"]: n for n in names}
    listed = server.ok("GET", f"/v3/users/{owner}/my_group_channels", session=server.session(owner),
                       params={"order": "channel_name_alphabetical", "show_empty": "true", "limit": 3,
                               "name_contains": tag})
    walked = [c["name"][len(tag) + 1:] for c in listed["channels"]]
    token = listed["next"]
    while token:
        page = server.ok("GET", f"/v3/users/{owner}/my_group_channels", session=server.session(owner),
                         params={"order": "channel_name_alphabetical", "show_empty": "true", "limit": 3,
                                 "name_contains": tag, "token": token})
        walked += [c["name"][len(tag) + 1:] for c in page["channels"]]
        token = page["next"]
    # By bytes after folding: "zeta" (0x7A) comes before "\u00e9clair" (0xC3 0xA9).
    assert walked == ["Alpha", "alpha", "apple", "BETA", "beta", "Zeta", "\u00c9clair", "e\u0301clair"]
    assert len(created) == len(names)
    # Nicknames: the member order of a channel and of the member list.
    users = [server.user(nickname=n) for n in ["bob", "Alice", "alice", "Bob", "carol"]]
    url = server.channel(users)["channel_url"]
    expected = ["Alice", "alice", "Bob", "bob", "carol"]
    members = server.ok("GET", f"/v3/group_channels/{url}/members", params={"limit": 10})["members"]
    assert [m["nickname"] for m in members] == expected
    assert [m["nickname"] for m in server.ok("GET", f"/v3/group_channels/{url}")["members"]] == expected


def test_name_keys_of_an_older_database_are_computed_again(fresh_server):
    """Migration 21: a database whose name keys are the NFC texts (case-sensitive) gets the
    case-insensitive keys; its listing by name follows them."""
    import sqlite3
    from tests_support import databases
    s = fresh_server()
    owner = s.user()
    for name in ["b", "A", "a", "B"]:
        s.channel([owner], name=name)
    s.stop()
    undo = UNDO_SCHEMA_22 + "UPDATE channels SET name_key = name; DELETE FROM schema_migrations WHERE version = 21;"
    if databases.backend() == "sqlite":
        db = sqlite3.connect(s.db_path)
        db.executescript(undo)
        db.commit()
        db.close()
    else:
        databases.psql(s.db_path, undo)
    s2 = fresh_server()
    listed = s2.ok("GET", f"/v3/users/{owner}/my_group_channels",
                   params={"order": "channel_name_alphabetical", "show_empty": "true"})["channels"]
    assert [c["name"] for c in listed] == ["A", "a", "B", "b"]
