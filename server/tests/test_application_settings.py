"""The application's settings (PROTOCOL.md §6.5): the chat history setting and the limit of
joined group channels per user, from the command line and from the admin API."""
import subprocess
import threading

from conftest import assert_error

SETTINGS = "/v3/applications/settings"


def texts(server, url, session, **params):
    listing = server.ok("GET", f"/v3/group_channels/{url}/messages", session=session,
                        params=dict({"prev_limit": 50}, **params))
    return [m["message"] for m in listing["messages"]]


def member_state(server, url, user_id):
    members = server.ok("GET", f"/v3/group_channels/{url}")["members"]
    return {m["user_id"]: m["state"] for m in members}.get(user_id)


def public_channel(server, owner):
    return server.channel([owner], is_public=True)["channel_url"]


def test_settings_api_defaults_validation_persistence_and_reset(fresh_server):
    s = fresh_server()
    assert s.ok("GET", SETTINGS) == {"chat_history": True, "max_channels_per_user": 2000}
    user_session = s.session(s.user())
    assert_error(s.request("GET", SETTINGS, session=user_session), 403, 400108)
    assert_error(s.request("PUT", SETTINGS, session=user_session, json={"chat_history": False}), 403, 400108)
    assert_error(s.request("PUT", SETTINGS, json={"chat_history": "maybe"}), 400, 400100, "chat_history")
    assert_error(s.request("PUT", SETTINGS, json={"max_channels_per_user": 0}), 400, 400100, "max_channels_per_user")
    assert_error(s.request("PUT", SETTINGS, json={"max_channels_per_user": "many"}), 400, 400100, "max_channels_per_user")
    assert_error(s.request("PUT", SETTINGS, json={}), 400, 400111)
    assert s.ok("PUT", SETTINGS, json={"chat_history": False}) == {"chat_history": False, "max_channels_per_user": 2000}
    assert s.ok("PUT", SETTINGS, json={"max_channels_per_user": 7}) == {"chat_history": False, "max_channels_per_user": 7}
    s.stop()
    # The stored values outlive a restart and win over the command line's defaults ...
    s2 = fresh_server(["--chat-history", "on", "--max-channels-per-user", "3"])
    assert s2.ok("GET", SETTINGS) == {"chat_history": False, "max_channels_per_user": 7}
    # ... until they are reset: then the command line's are in force.
    assert s2.ok("DELETE", SETTINGS) == {"chat_history": True, "max_channels_per_user": 3}
    assert s2.ok("GET", SETTINGS) == {"chat_history": True, "max_channels_per_user": 3}


def test_bad_command_line_values_are_refused(fresh_server, tmp_path):
    from conftest import server_binary
    for args in (["--chat-history", "sometimes"], ["--max-channels-per-user", "0"]):
        done = subprocess.run([server_binary(), "--port", "0", "--database", str(tmp_path / "x.sqlite")] + args,
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 78, (args, done.stderr)
        assert args[0] in done.stderr, done.stderr


def test_chat_history_on_shows_earlier_messages(server):
    a, joiner = server.user(), server.user()
    url = public_channel(server, a)
    server.send(url, a, "one")
    server.send(url, a, "two")
    sj = server.session(joiner)
    server.ok("PUT", f"/v3/group_channels/{url}/join", session=sj, json={})
    assert texts(server, url, sj) == ["one", "two"]


def test_chat_history_off_starts_each_new_member_at_their_join(fresh_server):
    s = fresh_server(["--chat-history", "off"])
    a, joiner, invitee, late = s.user(), s.user(), s.user(), s.user()
    s.ok("PUT", f"/v3/users/{invitee}/channel_invitation_preference", json={"auto_accept": False})
    url = public_channel(s, a)
    s.send(url, a, "before everyone")
    sa, sj, si = s.session(a), s.session(joiner), s.session(invitee)

    # A public join: nothing before the join is visible, what follows is.
    s.ok("PUT", f"/v3/group_channels/{url}/join", session=sj, json={})
    assert texts(s, url, sj) == []
    s.send(url, a, "after the join")
    assert texts(s, url, sj) == ["after the join"]
    assert texts(s, url, sa) == ["before everyone", "after the join"]  # the creator joined first
    mine = s.ok("GET", f"/v3/users/{joiner}/my_group_channels", session=sj, params={"show_empty": "true"})["channels"]
    channel = next(c for c in mine if c["channel_url"] == url)
    assert channel["unread_message_count"] == 1
    assert channel["last_message"]["message"] == "after the join"
    changelog = s.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", session=sj, params={"change_ts": 0})
    assert changelog["updated"] == []  # new messages are not changes; an edit of an older one is hidden too
    first = s.ok("GET", f"/v3/group_channels/{url}/messages", session=sa, params={"prev_limit": 50})["messages"][0]
    s.ok("PUT", f"/v3/group_channels/{url}/messages/{first['message_id']}",
         json={"message_type": "MESG", "message": "before everyone, edited"})
    changelog = s.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", session=sj, params={"change_ts": 0})
    assert changelog["updated"] == []
    changelog_of_a = s.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", session=sa, params={"change_ts": 0})
    assert [m["message"] for m in changelog_of_a["updated"]] == ["before everyone, edited"]

    # An invitation accepted later: the history starts at the invitation (guide 004: new users
    # see the messages sent after they were invited), whenever it is accepted.
    s.ok("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [invitee]})
    assert member_state(s, url, invitee) == "invited"
    s.send(url, a, "between the invitation and the acceptance")
    s.ok("PUT", f"/v3/group_channels/{url}/accept", session=si, json={})
    assert texts(s, url, si) == ["between the invitation and the acceptance"]
    s.send(url, a, "after the acceptance")
    assert texts(s, url, si) == ["between the invitation and the acceptance", "after the acceptance"]
    assert texts(s, url, sj) == ["after the join", "between the invitation and the acceptance", "after the acceptance"]

    # Leaving and joining again starts over.
    s.ok("PUT", f"/v3/group_channels/{url}/leave", session=sj, json={})
    s.send(url, a, "while away")
    s.ok("PUT", f"/v3/group_channels/{url}/join", session=sj, json={})
    assert texts(s, url, sj) == []

    # The admin API turns it back on for members who join from now on.
    s.ok("PUT", SETTINGS, json={"chat_history": True})
    sl = s.session(late)
    s.ok("PUT", f"/v3/group_channels/{url}/join", session=sl, json={})
    assert texts(s, url, sl) == ["before everyone, edited", "after the join", "between the invitation and the acceptance",
                                 "after the acceptance", "while away"]


def test_chat_history_off_through_the_admin_api_applies_to_invited_members(fresh_server):
    s = fresh_server()
    a, b = s.user(), s.user()
    url = s.channel([a])["channel_url"]
    s.send(url, a, "old")
    s.ok("PUT", SETTINGS, json={"chat_history": False})
    s.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [b], "inviter_id": a})
    assert member_state(s, url, b) == "joined"  # auto-accept: joined at the invitation
    sb = s.session(b)
    assert texts(s, url, sb) == []
    unread = s.ok("GET", f"/v3/users/{b}/unread_message_count", session=sb)
    assert unread["unread_count"] == 0
    s.send(url, a, "new")
    assert texts(s, url, sb) == ["new"]
    assert s.ok("GET", f"/v3/users/{b}/unread_message_count", session=sb)["unread_count"] == 1


def test_channel_limit_refuses_joins_and_leaves_out_invitees(fresh_server):
    s = fresh_server(["--max-channels-per-user", "2"])
    u = s.user()
    su = s.session(u)
    first = s.channel([s.user(), u])["channel_url"]
    s.channel([s.user(), u])
    owner = s.user()
    public = public_channel(s, owner)

    # A join beyond the limit is refused; nothing changes.
    assert_error(s.request("PUT", f"/v3/group_channels/{public}/join", session=su, json={}), 403, 900070, u)
    assert member_state(s, public, u) is None
    # A channel the user creates would be one more: refused, and no channel is left behind.
    before = s.ok("GET", f"/v3/users/{u}/my_group_channels", session=su)["channels"]
    assert_error(s.request("POST", "/v3/group_channels", session=su, json={"user_ids": [owner]}), 403, 900070)
    assert s.ok("GET", f"/v3/users/{u}/my_group_channels", session=su)["channels"] == before
    # An invitation is cancelled: the others are added, the user is left out.
    other = s.user()
    invited = s.ok("POST", f"/v3/group_channels/{public}/invite", json={"user_ids": [u, other], "inviter_id": owner})
    assert {m["user_id"] for m in invited["members"]} == {owner, other}
    creator = s.user()
    created = s.channel([creator, u])
    assert {m["user_id"] for m in created["members"]} == {creator}

    # Room again after leaving one channel.
    s.ok("PUT", f"/v3/group_channels/{first}/leave", session=su, json={})
    s.ok("PUT", f"/v3/group_channels/{public}/join", session=su, json={})
    assert member_state(s, public, u) == "joined"

    # An invitation made while there was room: accepting at the limit is refused and the
    # invitation stays, to be accepted once there is room.
    s.ok("PUT", f"/v3/users/{u}/channel_invitation_preference", json={"auto_accept": False})
    s.ok("PUT", f"/v3/group_channels/{public}/leave", session=su, json={})
    host = s.user()
    pending = s.channel([host])["channel_url"]
    s.ok("POST", f"/v3/group_channels/{pending}/invite", json={"user_ids": [u], "inviter_id": host})
    assert member_state(s, pending, u) == "invited"
    s.ok("PUT", f"/v3/group_channels/{public}/join", session=su, json={})
    assert_error(s.request("PUT", f"/v3/group_channels/{pending}/accept", session=su, json={}), 403, 900070)
    assert member_state(s, pending, u) == "invited"
    # The admin API raises the limit for everyone at once.
    assert s.ok("PUT", SETTINGS, json={"max_channels_per_user": 3})["max_channels_per_user"] == 3
    s.ok("PUT", f"/v3/group_channels/{pending}/accept", session=su, json={})
    assert member_state(s, pending, u) == "joined"
    joined = s.ok("GET", f"/v3/users/{u}/my_group_channels", session=su, params={"member_state_filter": "joined_only",
                                                                                  "show_empty": "true"})["channels"]
    assert len(joined) == 3


def test_channel_limit_holds_for_joins_at_once(fresh_server):
    s = fresh_server(["--max-channels-per-user", "3"])
    u = s.user()
    su = s.session(u)
    urls = [public_channel(s, s.user()) for _ in range(8)]
    answers = [None] * len(urls)

    def join(i):
        answers[i] = s.request("PUT", f"/v3/group_channels/{urls[i]}/join", session=su, json={})

    threads = [threading.Thread(target=join, args=(i,)) for i in range(len(urls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    accepted = [i for i, r in enumerate(answers) if r.status_code == 200]
    refused = [i for i, r in enumerate(answers) if r.status_code != 200]
    assert len(accepted) == 3, [(r.status_code, r.text) for r in answers]
    for i in refused:
        assert_error(answers[i], 403, 900070)
    joined = {urls[i] for i in accepted}
    states = {url: member_state(s, url, u) for url in urls}
    assert {url for url, state in states.items() if state == "joined"} == joined
    assert all(states[url] is None for url in urls if url not in joined)


def test_the_refusal_names_the_limit(fresh_server):
    s = fresh_server(["--max-channels-per-user", "1"])
    u = s.user()
    su = s.session(u)
    s.ok("POST", "/v3/group_channels", session=su, json={"user_ids": []})
    body = assert_error(s.request("POST", "/v3/group_channels", session=su, json={"user_ids": []}), 403, 900070)
    assert "(1)" in body["message"], body  # the message names the limit
