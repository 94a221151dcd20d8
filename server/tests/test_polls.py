"""Polls of group channels (docs/PROTOCOL.md §7.6): every route, the permission rules,
closed polls, votes replaced and retracted, counts after concurrent votes, the events with
each recipient's own `voted_option_ids`, poll changelogs, messages carrying their polls, bad
input, and a poll surviving a restart. Runs on every backend the fixtures start."""
import threading
import time

import requests

from conftest import API_TOKEN, EventReader, assert_error


def polls_path(url, *rest):
    return "/".join([f"/v3/group_channels/{url}/polls"] + [str(r) for r in rest])


def create_poll(server, url, user_id, title="Lunch?", options=("pizza", "sushi", "tacos"), **fields):
    body = {"user_id": user_id, "title": title, "options": list(options)}
    body.update(fields)
    return server.ok("POST", polls_path(url), json=body)


def vote(server, url, poll_id, user_id, option_ids, **kw):
    return server.request("PUT", polls_path(url, poll_id, "vote"), json={"user_id": user_id, "option_ids": option_ids}, **kw)


def counts(poll):
    return {o["id"]: o["vote_count"] for o in poll["options"]}


def test_create_get_and_fields(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    before = int(time.time() * 1000)
    p = create_poll(server, url, a, allow_user_suggestion=True, close_at=before + 3_600_000)
    assert isinstance(p["id"], int) and p["id"] > 0
    assert p["title"] == "Lunch?"
    assert p["channel_url"] == url
    assert p["message_id"] == 0
    assert p["allow_user_suggestion"] is True
    assert p["allow_multiple_votes"] is False
    assert p["close_at"] == before + 3_600_000
    assert p["status"] == "open"
    assert p["created_by"] == a
    assert before - 5000 <= p["created_at"] <= before + 60_000
    assert p["updated_at"] == p["created_at"]
    assert p["voter_count"] == 0
    assert p["voted_option_ids"] == []
    assert [(o["id"], o["text"], o["vote_count"], o["created_by"], o["poll_id"]) for o in p["options"]] == [
        (1, "pizza", 0, a, p["id"]), (2, "sushi", 0, a, p["id"]), (3, "tacos", 0, a, p["id"])]
    assert all(o["created_at"] == p["created_at"] == o["updated_at"] for o in p["options"])
    # Defaults: no close time.
    q = create_poll(server, url, b, title="Q", options=["x"])
    assert q["close_at"] == -1 and q["id"] > p["id"] and q["allow_user_suggestion"] is False
    # Get: as the session user, with their votes; as the admin, without a viewer.
    got = server.ok("GET", polls_path(url, p["id"]), session=server.session(b))
    assert got == dict(p, voted_option_ids=[])
    admin_view = server.ok("GET", polls_path(url, p["id"]))
    assert "voted_option_ids" not in admin_view
    assert admin_view == {k: v for k, v in p.items() if k != "voted_option_ids"}
    # The admin may create a poll of nobody.
    anonymous = server.ok("POST", polls_path(url), json={"title": "t", "options": ["o"]})
    assert "created_by" not in anonymous and "created_by" not in anonymous["options"][0]


def test_messages_carry_their_polls(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    rb = EventReader(server, b, session=server.session(b))
    try:
        rb.next()
        m = server.send(url, a, "vote please", poll_id=p["id"])
        assert m["poll"]["id"] == p["id"] and m["poll"]["message_id"] == m["message_id"]
        assert "voted_option_ids" not in m["poll"]  # a message event's copy is everyone's
        e, _ = rb.until("message_received")
        assert e["json"]["message"]["poll"] == m["poll"]
    finally:
        rb.close()
    assert vote(server, url, p["id"], b, [2]).status_code == 200
    sb = server.session(b)
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages", session=sb, params={"message_ts": 0, "next_limit": 10})
    carried = [x for x in listed["messages"] if x["message_id"] == m["message_id"]][0]
    assert carried["poll"]["voted_option_ids"] == [2]
    assert counts(carried["poll"]) == {1: 0, 2: 1, 3: 0}
    assert carried["poll"]["voter_count"] == 1
    # With include_poll_details too (accepted; messages always carry their poll).
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages", session=sb,
                       params={"message_ts": 0, "next_limit": 10, "include_poll_details": "true"})
    assert [x["poll"]["id"] for x in listed["messages"] if "poll" in x] == [p["id"]]
    got = server.ok("GET", f"/v3/group_channels/{url}/messages/{m['message_id']}", session=server.session(a))
    assert got["poll"]["voted_option_ids"] == [] and got["poll"]["voter_count"] == 1
    # A message without a poll has no `poll`.
    plain = server.send(url, a, "no poll")
    assert "poll" not in plain
    # The poll has its message now: the poll says so, and it cannot be sent again.
    assert server.ok("GET", polls_path(url, p["id"]))["message_id"] == m["message_id"]
    r = server.request("POST", f"/v3/group_channels/{url}/messages",
                       json={"message_type": "MESG", "user_id": a, "message": "again", "poll_id": p["id"]})
    assert_error(r, 400, 400100, "poll_id")
    # A copy does not carry the poll.
    other = server.channel([a, b])["channel_url"]
    copy = server.ok("POST", f"/v3/group_channels/{url}/messages/{m['message_id']}/copy", json={"dest_channel_url": other})
    assert "poll" not in copy


def test_send_with_poll_rules(server):
    a, b, op = server.user(), server.user(), server.user()
    url = server.channel([a, b, op], operator_ids=[op])["channel_url"]
    other = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    send = lambda who, pid, channel=url: server.request(  # noqa: E731
        "POST", f"/v3/group_channels/{channel}/messages", session=server.session(who),
        json={"message_type": "MESG", "message": "m", "poll_id": pid})
    assert_error(send(b, p["id"]), 403, 400108)  # not the creator
    assert_error(send(a, p["id"], other), 400, 400100, "poll_id")  # another channel's poll
    assert_error(send(a, 999999), 400, 400100, "poll_id")
    assert_error(send(a, "x"), 400, 400100, "poll_id")
    assert_error(send(a, 0), 400, 400100, "poll_id")
    assert send(op, p["id"]).status_code == 200  # an operator may send it


def test_vote_replace_retract_and_multiple(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    single = create_poll(server, url, a)
    sa = server.session(a)
    r = vote(server, url, single["id"], a, [1], token=None, session=sa)
    assert r.status_code == 200, r.text
    assert r.json()["voted_option_ids"] == [1] and counts(r.json()) == {1: 1, 2: 0, 3: 0}
    assert r.json()["voter_count"] == 1
    # A new vote replaces the old one.
    r = vote(server, url, single["id"], a, [3], session=sa)
    assert r.json()["voted_option_ids"] == [3] and counts(r.json()) == {1: 0, 2: 0, 3: 1}
    assert vote(server, url, single["id"], b, [3]).json()["voter_count"] == 2
    # An empty list retracts.
    r = vote(server, url, single["id"], a, [], session=sa)
    assert r.json()["voted_option_ids"] == [] and counts(r.json()) == {1: 0, 2: 0, 3: 1} and r.json()["voter_count"] == 1
    # One option only without allow_multiple_votes.
    assert_error(vote(server, url, single["id"], a, [1, 2], session=sa), 400, 400100, "option_ids")
    multi = create_poll(server, url, a, allow_multiple_votes=True)
    r = vote(server, url, multi["id"], a, [3, 1], session=sa)
    assert r.json()["voted_option_ids"] == [1, 3] and counts(r.json()) == {1: 1, 2: 0, 3: 1}
    assert r.json()["voter_count"] == 1
    r = vote(server, url, multi["id"], a, [2], session=sa)
    assert r.json()["voted_option_ids"] == [2] and counts(r.json()) == {1: 0, 2: 1, 3: 0}
    # Turning multiple votes off while someone holds several is refused; with one each it goes.
    vote(server, url, multi["id"], b, [1, 3])
    r = server.request("PUT", polls_path(url, multi["id"]), json={"allow_multiple_votes": False})
    assert_error(r, 400, 400100, "allow_multiple_votes")
    vote(server, url, multi["id"], b, [1])
    assert server.ok("PUT", polls_path(url, multi["id"]), json={"allow_multiple_votes": False})["allow_multiple_votes"] is False


def test_closed_polls_refuse_votes(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    vote(server, url, p["id"], b, [1])
    closed = server.ok("PUT", polls_path(url, p["id"], "close"), session=server.session(a))
    assert closed["status"] == "closed" and counts(closed) == {1: 1, 2: 0, 3: 0}
    assert_error(vote(server, url, p["id"], b, [2]), 403, 400108, "closed")
    assert_error(vote(server, url, p["id"], b, []), 403, 400108, "closed")
    assert_error(server.request("POST", polls_path(url, p["id"], "options"), json={"text": "late"}), 403, 400108)
    assert server.ok("GET", polls_path(url, p["id"]))["options"][0]["vote_count"] == 1
    # A poll whose close_at has passed counts as closed.
    soon = create_poll(server, url, a, close_at=int(time.time() * 1000) + 1500)
    assert soon["status"] == "open"
    assert vote(server, url, soon["id"], b, [1]).status_code == 200
    time.sleep(1.7)
    assert server.ok("GET", polls_path(url, soon["id"]))["status"] == "closed"
    assert_error(vote(server, url, soon["id"], b, [2]), 403, 400108, "closed")


def test_permissions(server):
    creator, member, op, outsider, invitee = (server.user() for _ in range(5))
    server.ok("PUT", f"/v3/users/{invitee}/channel_invitation_preference", json={"auto_accept": False})
    url = server.channel([creator, member, op, invitee], operator_ids=[op])["channel_url"]
    s_creator, s_member, s_op, s_out, s_inv = (server.session(u) for u in (creator, member, op, outsider, invitee))
    # Creating needs a joined member.
    for s in (s_out, s_inv):
        r = server.request("POST", polls_path(url), session=s, json={"title": "t", "options": ["a"]})
        assert_error(r, 403, 400108)
    r = server.request("POST", polls_path(url), session=s_member, json={"title": "t", "options": ["a"], "user_id": creator})
    assert_error(r, 403, 400108)  # a session user acts as themselves only
    p = server.ok("POST", polls_path(url), session=s_creator, json={"title": "t", "options": ["a", "b"]})
    pid = p["id"]
    # Reading needs a joined member too.
    assert_error(server.request("GET", polls_path(url, pid), session=s_out), 403, 400108)
    assert_error(server.request("GET", polls_path(url), session=s_inv), 403, 400108)
    # Only the creator, an operator or the admin changes the poll.
    changes = [
        ("PUT", polls_path(url, pid), {"title": "new"}),
        ("PUT", polls_path(url, pid, "close"), {}),
        ("PUT", polls_path(url, pid, "options", 1), {"text": "A"}),
        ("DELETE", polls_path(url, pid, "options", 2), None),
        ("DELETE", polls_path(url, pid), None),
    ]
    for method, path, body in changes:
        assert_error(server.request(method, path, session=s_member, json=body), 403, 400108)
        assert_error(server.request(method, path, session=s_out, json=body), 403, 400108)
    assert server.ok("PUT", polls_path(url, pid), session=s_creator, json={"title": "by creator"})["title"] == "by creator"
    assert server.ok("PUT", polls_path(url, pid), session=s_op, json={"title": "by op"})["title"] == "by op"
    assert server.ok("PUT", polls_path(url, pid), json={"title": "by admin"})["title"] == "by admin"
    # Suggesting an option needs allow_user_suggestion, unless creator or operator.
    assert_error(server.request("POST", polls_path(url, pid, "options"), session=s_member, json={"text": "c"}), 403, 400108)
    assert server.ok("POST", polls_path(url, pid, "options"), session=s_op, json={"text": "c"})["options"][-1]["created_by"] == op
    server.ok("PUT", polls_path(url, pid), session=s_creator, json={"allow_user_suggestion": True})
    added = server.ok("POST", polls_path(url, pid, "options"), session=s_member, json={"text": "d"})
    assert [(o["id"], o["text"], o["created_by"]) for o in added["options"]] == [
        (1, "a", creator), (2, "b", creator), (3, "c", op), (4, "d", member)]
    # Votes only by joined members.
    assert_error(vote(server, url, pid, outsider, [1], session=s_out), 403, 400108)
    assert_error(vote(server, url, pid, invitee, [1], session=s_inv), 403, 400108)
    assert_error(vote(server, url, pid, member, [1], session=s_out), 403, 400108)  # as someone else
    assert_error(server.request("PUT", polls_path(url, pid, "vote"), json={"option_ids": [1]}), 400, 400111, "user_id")
    # Mute, ban and freeze follow the send rules.
    server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": member})
    assert_error(vote(server, url, pid, member, [1], session=s_member), 403, 900050)
    assert_error(server.request("POST", polls_path(url), session=s_member, json={"title": "t", "options": ["a"]}), 403, 900050)
    assert_error(server.request("POST", polls_path(url, pid, "options"), session=s_member, json={"text": "e"}), 403, 900050)
    server.ok("DELETE", f"/v3/group_channels/{url}/mute/{member}")
    server.ok("PUT", f"/v3/group_channels/{url}/freeze", json={"freeze": True})
    assert_error(vote(server, url, pid, member, [1], session=s_member), 403, 900060)
    assert_error(server.request("POST", polls_path(url), session=s_member, json={"title": "t", "options": ["a"]}), 403, 900060)
    assert vote(server, url, pid, op, [1], session=s_op).status_code == 200  # operators may, as they may send
    server.ok("PUT", f"/v3/group_channels/{url}/freeze", json={"freeze": False})
    assert vote(server, url, pid, member, [2], session=s_member).status_code == 200
    server.ok("POST", f"/v3/group_channels/{url}/ban", json={"user_id": member})
    assert_error(vote(server, url, pid, member, [1], session=s_member), 403, 900041)
    # The creator deletes; the poll is gone.
    server.ok("DELETE", polls_path(url, pid), session=s_creator)
    assert_error(server.request("GET", polls_path(url, pid)), 404, 400201)


def test_update_and_options(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    time.sleep(0.01)
    later = int(time.time() * 1000) + 600_000
    u = server.ok("PUT", polls_path(url, p["id"]), json={
        "title": "Dinner?", "allow_user_suggestion": True, "allow_multiple_votes": True, "close_at": later})
    assert (u["title"], u["allow_user_suggestion"], u["allow_multiple_votes"], u["close_at"]) == ("Dinner?", True, True, later)
    assert u["updated_at"] > p["updated_at"] and u["created_at"] == p["created_at"]
    assert server.ok("PUT", polls_path(url, p["id"]), json={"close_at": -1})["close_at"] == -1
    vote(server, url, p["id"], b, [2, 3])
    edited = server.ok("PUT", polls_path(url, p["id"], "options", 2), json={"text": "ramen"})
    assert [(o["id"], o["text"], o["vote_count"]) for o in edited["options"]] == [(1, "pizza", 0), (2, "ramen", 1), (3, "tacos", 1)]
    assert edited["options"][1]["updated_at"] >= edited["options"][1]["created_at"]
    # Deleting an option removes its votes; ids are never reused.
    gone = server.ok("DELETE", polls_path(url, p["id"], "options", 3))
    assert [(o["id"], o["vote_count"]) for o in gone["options"]] == [(1, 0), (2, 1)]
    got = server.ok("GET", polls_path(url, p["id"]), session=server.session(b))
    assert got["voted_option_ids"] == [2] and got["voter_count"] == 1
    added = server.ok("POST", polls_path(url, p["id"], "options"), json={"text": "curry"})
    assert [o["id"] for o in added["options"]] == [1, 2, 4]
    assert_error(server.request("PUT", polls_path(url, p["id"], "options", 3), json={"text": "x"}), 404, 400201)
    assert_error(server.request("DELETE", polls_path(url, p["id"], "options", 3)), 404, 400201)
    assert_error(vote(server, url, p["id"], b, [3]), 400, 400100, "option_ids")
    # The last option cannot go.
    one = create_poll(server, url, a, options=["only"])
    assert_error(server.request("DELETE", polls_path(url, one["id"], "options", 1)), 400, 400100, "option_id")
    # Up to 20 options.
    full = create_poll(server, url, a, options=[f"o{i}" for i in range(20)])
    assert_error(server.request("POST", polls_path(url, full["id"], "options"), json={"text": "21st"}), 400, 400100)
    assert len(server.ok("GET", polls_path(url, full["id"]))["options"]) == 20


def test_bad_input(server):
    a = server.user()
    url = server.channel([a])["channel_url"]
    post = lambda body: server.request("POST", polls_path(url), json=dict({"user_id": a}, **body))  # noqa: E731
    assert_error(post({"options": ["a"]}), 400, 400111, "title")
    assert_error(post({"title": "t"}), 400, 400111, "options")
    assert_error(post({"title": "", "options": ["a"]}), 400, 400100, "title")
    assert_error(post({"title": 5, "options": ["a"]}), 400, 400100, "title")
    assert_error(post({"title": "x" * 2001, "options": ["a"]}), 400, 400104, "title")
    assert post({"title": "é" * 1000, "options": ["a"]}).status_code == 200  # 2000 bytes
    assert_error(post({"title": "t", "options": []}), 400, 400100, "options")
    assert_error(post({"title": "t", "options": "a,b"}), 400, 400100, "options")
    assert_error(post({"title": "t", "options": [1, 2]}), 400, 400100, "options")
    assert_error(post({"title": "t", "options": [""]}), 400, 400100, "options")
    assert_error(post({"title": "t", "options": ["y" * 2001]}), 400, 400104, "options")
    assert_error(post({"title": "t", "options": [str(i) for i in range(21)]}), 400, 400100, "options")
    assert_error(post({"title": "t", "options": ["a"], "allow_multiple_votes": "maybe"}), 400, 400100, "allow_multiple_votes")
    assert_error(post({"title": "t", "options": ["a"], "close_at": 1000}), 400, 400100, "close_at")
    assert_error(post({"title": "t", "options": ["a"], "close_at": -5}), 400, 400100, "close_at")
    assert_error(post({"title": "t", "options": ["a"], "close_at": "soon"}), 400, 400100, "close_at")
    p = create_poll(server, url, a)
    assert_error(vote(server, url, p["id"], a, 1), 400, 400100, "option_ids")
    assert_error(vote(server, url, p["id"], a, ["1"]), 400, 400100, "option_ids")
    assert_error(vote(server, url, p["id"], a, [1, 1]), 400, 400100, "option_ids")
    assert_error(vote(server, url, p["id"], a, [99]), 400, 400100, "option_ids")
    assert_error(server.request("PUT", polls_path(url, p["id"], "vote"), json={"user_id": a}), 400, 400111, "option_ids")
    assert_error(server.request("PUT", polls_path(url, p["id"]), json={"title": ""}), 400, 400100, "title")
    assert_error(server.request("PUT", polls_path(url, p["id"], "options", 1), json={}), 400, 400111, "text")
    assert_error(server.request("PUT", polls_path(url, p["id"], "options", 1), json={"text": ["x"]}), 400, 400100, "text")
    assert_error(server.request("POST", polls_path(url, p["id"], "options"), json={"text": "z" * 2001}), 400, 400104, "text")
    # Unknown polls, options, channels; ids that are no ids.
    assert_error(server.request("GET", polls_path(url, 999999)), 404, 400201)
    assert_error(server.request("GET", polls_path(url, "abc")), 400, 400100, "poll_id")
    assert_error(server.request("GET", polls_path(url, -1)), 400, 400100, "poll_id")
    assert_error(server.request("GET", polls_path(url, p["id"], "options", "x", "voters")), 400, 400100, "option_id")
    assert_error(server.request("GET", polls_path(url, p["id"], "options", 77, "voters")), 404, 400201)
    assert_error(server.request("GET", polls_path("no-such-channel", p["id"])), 404, 400201)
    other = server.channel([a])["channel_url"]
    assert_error(server.request("GET", polls_path(other, p["id"])), 404, 400201)  # another channel's poll
    assert_error(server.request("GET", polls_path(url), params={"token": "zz"}), 400, 400110)
    assert_error(server.request("GET", polls_path(url), params={"limit": 0}), 400, 400100, "limit")
    assert_error(server.request("GET", polls_path(url, "changelogs")), 400, 400111, "token")
    assert_error(server.request("GET", polls_path(url, "changelogs"), params={"token": "nothex"}), 400, 400110)
    assert_error(server.request("PATCH", polls_path(url, p["id"])), 405, 400105)
    # Not a JSON object.
    r = requests.put(server.url(polls_path(url, p["id"], "vote")), data="[1]",
                     headers={"Api-Token": API_TOKEN, "Content-Type": "application/json"}, timeout=10)
    assert_error(r, 400, 400102)
    # Ephemeral channels keep no polls.
    eph = server.channel([a], is_ephemeral=True)["channel_url"]
    assert_error(server.request("POST", polls_path(eph), json={"title": "t", "options": ["a"], "user_id": a}), 400, 400100)
    assert server.ok("GET", polls_path(url, p["id"]))["voter_count"] == 0


def test_list_polls_paged(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    made = [create_poll(server, url, a, title=f"p{i}")["id"] for i in range(5)]
    vote(server, url, made[2], b, [1])
    sb = server.session(b)
    seen, token = [], None
    while True:
        params = {"limit": 2}
        if token:
            params["token"] = token
        page = server.ok("GET", polls_path(url), session=sb, params=params)
        assert len(page["polls"]) <= 2
        seen += page["polls"]
        token = page["next"]
        if not token:
            break
    assert [p["id"] for p in seen] == list(reversed(made))  # newest first
    assert [p["title"] for p in seen] == [f"p{i}" for i in reversed(range(5))]
    assert [p["voted_option_ids"] for p in seen] == [[], [], [1], [], []]
    assert server.ok("GET", polls_path(url), params={"limit": 100})["next"] == ""
    # Deleted polls are not listed.
    server.ok("DELETE", polls_path(url, made[0]))
    assert [p["id"] for p in server.ok("GET", polls_path(url), params={"limit": 100})["polls"]] == list(reversed(made[1:]))


def test_voters_paged(server):
    users = [server.user() for _ in range(5)]
    url = server.channel(users)["channel_url"]
    p = create_poll(server, url, users[0], allow_multiple_votes=True)
    for u in users:
        vote(server, url, p["id"], u, [1, 2] if u != users[0] else [2])
    voters, token = [], None
    while True:
        params = {"limit": 2}
        if token:
            params["token"] = token
        page = server.ok("GET", polls_path(url, p["id"], "options", 1, "voters"), session=server.session(users[1]), params=params)
        assert page["vote_count"] == 4
        voters += page["voters"]
        token = page["next"]
        if not token:
            break
    assert [v["user_id"] for v in voters] == sorted(users[1:])
    assert all(v["nickname"] == v["user_id"] for v in voters)
    all_of_2 = server.ok("GET", polls_path(url, p["id"], "options", 2, "voters"), params={"limit": 100})
    assert all_of_2["vote_count"] == 5 and [v["user_id"] for v in all_of_2["voters"]] == sorted(users)
    assert server.ok("GET", polls_path(url, p["id"], "options", 3, "voters")) == {"vote_count": 0, "voters": [], "next": ""}


def test_concurrent_votes_count_exactly(server):
    users = [server.user() for _ in range(8)]
    url = server.channel(users)["channel_url"]
    p = create_poll(server, url, users[0], allow_multiple_votes=True)
    sessions = {u: server.session(u) for u in users}
    errors = []
    barrier = threading.Barrier(len(users))

    def voter(index, user):
        try:
            barrier.wait()
            # Each user votes several times; the last vote stands.
            for choice in ([1], [1, 2], [3], [index % 3 + 1]):
                r = vote(server, url, p["id"], user, choice, session=sessions[user])
                if r.status_code != 200:
                    errors.append(r.text)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=voter, args=(i, u)) for i, u in enumerate(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = {1: 0, 2: 0, 3: 0}
    for i in range(len(users)):
        expected[i % 3 + 1] += 1
    final = server.ok("GET", polls_path(url, p["id"]))
    assert counts(final) == expected
    assert final["voter_count"] == len(users)
    for i, u in enumerate(users):
        assert server.ok("GET", polls_path(url, p["id"]), session=sessions[u])["voted_option_ids"] == [i % 3 + 1]


def test_events_carry_each_recipients_votes(server):
    a, b, c, invitee = (server.user() for _ in range(4))
    server.ok("PUT", f"/v3/users/{invitee}/channel_invitation_preference", json={"auto_accept": False})
    url = server.channel([a, b, c, invitee])["channel_url"]
    p = create_poll(server, url, a, allow_multiple_votes=True)
    server.send(url, a, "poll", poll_id=p["id"])
    readers = {u: EventReader(server, u, session=server.session(u)) for u in (a, b, c, invitee)}
    try:
        for r in readers.values():
            assert r.next()["event"] == "connected"
        vote(server, url, p["id"], a, [1, 3])
        for u, expected in ((a, [1, 3]), (b, []), (c, [])):
            e, _ = readers[u].until("poll_voted")
            poll = e["json"]["poll"]
            assert poll["voted_option_ids"] == expected, (u, poll)
            assert counts(poll) == {1: 1, 2: 0, 3: 1} and poll["voter_count"] == 1
            assert e["json"]["channel_url"] == url and e["json"]["channel"]["channel_url"] == url
            assert e["json"]["channel"]["member_state"] == "joined"
        vote(server, url, p["id"], b, [2])
        for u, expected in ((a, [1, 3]), (b, [2]), (c, [])):
            e, _ = readers[u].until("poll_voted")
            assert e["json"]["poll"]["voted_option_ids"] == expected
            assert counts(e["json"]["poll"]) == {1: 1, 2: 1, 3: 1} and e["json"]["poll"]["voter_count"] == 2
        server.ok("POST", polls_path(url, p["id"], "options"), json={"text": "more"})
        for u, expected in ((a, [1, 3]), (b, [2]), (c, [])):
            e, _ = readers[u].until("poll_updated")
            assert [o["text"] for o in e["json"]["poll"]["options"]][-1] == "more"
            assert e["json"]["poll"]["voted_option_ids"] == expected
        server.ok("PUT", polls_path(url, p["id"], "close"))
        for u in (a, b, c):
            e, _ = readers[u].until("poll_updated")
            assert e["json"]["poll"]["status"] == "closed"
        server.ok("DELETE", polls_path(url, p["id"]))
        for u in (a, b, c):
            e, _ = readers[u].until("poll_deleted")
            assert e["json"]["poll_id"] == p["id"]
            # The message stays, without its poll.
            e, _ = readers[u].until("message_updated")
            assert "poll" not in e["json"]["message"]
        # Invitees cannot read messages: no poll events for them.
        assert [e["event"] for e in readers[invitee].drain(0.5) if e["event"].startswith("poll_")] == []
    finally:
        for r in readers.values():
            r.close()


def test_history_offset_hides_polls(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    server.send(url, a, "poll", poll_id=p["id"])
    time.sleep(0.01)
    server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", json={"user_id": b})
    sb = server.session(b)
    assert_error(server.request("GET", polls_path(url, p["id"]), session=sb), 404, 400201)
    assert server.ok("GET", polls_path(url), session=sb)["polls"] == []
    assert_error(vote(server, url, p["id"], b, [1], session=sb), 404, 400201)
    rb = EventReader(server, b, session=sb)
    try:
        rb.next()
        vote(server, url, p["id"], a, [1])
        assert [e["event"] for e in rb.drain(0.5) if e["event"].startswith("poll_")] == []
    finally:
        rb.close()
    assert [x["id"] for x in server.ok("GET", polls_path(url), session=server.session(a))["polls"]] == [p["id"]]


def test_poll_changelogs(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    sb = server.session(b)
    start = server.ok("GET", polls_path(url, "changelogs"), session=sb, params={"change_ts": int(time.time() * 1000)})
    assert start["updated"] == [] and start["deleted"] == [] and start["has_more"] is False and start["next"]
    p1 = create_poll(server, url, a, title="one")
    p2 = create_poll(server, url, a, title="two")
    p3 = create_poll(server, url, a, title="three")
    log = server.ok("GET", polls_path(url, "changelogs"), session=sb, params={"token": start["next"]})
    assert [p["id"] for p in log["updated"]] == [p1["id"], p2["id"], p3["id"]] and log["deleted"] == []
    assert all(p["voted_option_ids"] == [] for p in log["updated"])
    # From there: a vote, an edit and a deletion, each once, in change order.
    vote(server, url, p1["id"], b, [2])
    server.ok("PUT", polls_path(url, p2["id"]), json={"title": "TWO"})
    server.ok("DELETE", polls_path(url, p3["id"]))
    later = server.ok("GET", polls_path(url, "changelogs"), session=sb, params={"token": log["next"]})
    assert [(p["id"], p["title"]) for p in later["updated"]] == [(p1["id"], "one"), (p2["id"], "TWO")]
    assert later["updated"][0]["voted_option_ids"] == [2] and counts(later["updated"][0])[2] == 1
    assert [d["poll_id"] for d in later["deleted"]] == [p3["id"]]
    assert isinstance(later["deleted"][0]["deleted_at"], int) and later["has_more"] is False
    # Paged with limit=1: the same changes, one a page.
    pages, token = [], log["next"]
    while True:
        page = server.ok("GET", polls_path(url, "changelogs"), session=sb, params={"token": token, "limit": 1})
        pages.append([("u", p["id"]) for p in page["updated"]] + [("d", d["poll_id"]) for d in page["deleted"]])
        token = page["next"]
        if not page["has_more"]:
            break
    assert pages == [[("u", p1["id"])], [("u", p2["id"])], [("d", p3["id"])]]
    # Nothing new: nothing listed, the token stays usable.
    again = server.ok("GET", polls_path(url, "changelogs"), session=sb, params={"token": later["next"]})
    assert again["updated"] == [] and again["deleted"] == []
    # Members only.
    outsider = server.user()
    assert_error(server.request("GET", polls_path(url, "changelogs"), session=server.session(outsider),
                                params={"token": later["next"]}), 403, 400108)


def test_message_and_channel_deletion_take_their_polls(server):
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a)
    m = server.send(url, a, "poll", poll_id=p["id"])
    vote(server, url, p["id"], b, [1])
    token = server.ok("GET", polls_path(url, "changelogs"), params={"change_ts": 0})["next"]
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{m['message_id']}")
    assert_error(server.request("GET", polls_path(url, p["id"])), 404, 400201)
    log = server.ok("GET", polls_path(url, "changelogs"), params={"token": token})
    assert [d["poll_id"] for d in log["deleted"]] == [p["id"]] and log["updated"] == []
    # The channel's deletion takes its polls; a new channel of the same URL has none.
    q = create_poll(server, url, a)
    server.ok("DELETE", f"/v3/group_channels/{url}")
    server.channel([a], channel_url=url)
    assert server.ok("GET", polls_path(url))["polls"] == []
    assert_error(server.request("GET", polls_path(url, q["id"])), 404, 400201)
    assert server.ok("GET", polls_path(url, "changelogs"), params={"change_ts": 0})["deleted"] == []


def test_poll_survives_restart(fresh_server):
    server = fresh_server()
    a, b = server.user(), server.user()
    url = server.channel([a, b])["channel_url"]
    p = create_poll(server, url, a, allow_multiple_votes=True)
    m = server.send(url, a, "poll", poll_id=p["id"])
    vote(server, url, p["id"], a, [1, 2])
    vote(server, url, p["id"], b, [2])
    server.ok("POST", polls_path(url, p["id"], "options"), json={"text": "late"})
    before = server.ok("GET", polls_path(url, p["id"]), session=server.session(a))
    server.stop()
    server.start()
    after = server.ok("GET", polls_path(url, p["id"]), session=server.session(a))
    assert after == before
    assert counts(after) == {1: 1, 2: 2, 3: 0, 4: 0} and after["voted_option_ids"] == [1, 2]
    got = server.ok("GET", f"/v3/group_channels/{url}/messages/{m['message_id']}", session=server.session(b))
    assert got["poll"]["voted_option_ids"] == [2] and got["poll"]["id"] == p["id"]
    # Ids go on from where they were.
    assert create_poll(server, url, a)["id"] > p["id"]
