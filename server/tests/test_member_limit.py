"""The members one group channel may hold (PROTOCOL.md §6, docs/SERVER.md
`max_members_per_channel` / `max_members_per_super_channel`): creations, invitations and
joins beyond it are refused whole with 403 900030."""
from conftest import assert_error

LIMIT_ARGS = ["--max-members-per-channel", "3", "--max-members-per-super-channel", "5"]


def member_ids(server, url):
    return sorted(m["user_id"] for m in server.ok("GET", f"/v3/group_channels/{url}")["members"])


def test_creation_beyond_the_limit_is_refused(fresh_server):
    s = fresh_server(LIMIT_ARGS)
    users = [s.user() for _ in range(6)]
    assert_error(s.request("POST", "/v3/group_channels", json={"user_ids": users[:4]}), 403, 900030)
    # The creator counts: a session user and three others are four.
    creator = s.session(users[0])
    assert_error(s.request("POST", "/v3/group_channels", session=creator, json={"user_ids": users[1:4]}),
                 403, 900030)
    assert s.ok("GET", "/v3/group_channels")["channels"] == []
    assert s.channel(users[:3])["member_count"] == 3
    # A Supergroup holds more, and still refuses to be distinct.
    assert s.channel(users[:5], is_super=True)["member_count"] == 5
    assert_error(s.request("POST", "/v3/group_channels", json={"user_ids": users[:6], "is_super": True}), 403, 900030)
    assert_error(s.request("POST", "/v3/group_channels", json={"user_ids": users[:2], "is_super": True,
                                                              "is_distinct": True}), 400, 400100, "is_distinct")


def test_invitation_beyond_the_limit_adds_nobody(fresh_server):
    s = fresh_server(LIMIT_ARGS)
    a, b, c, d = (s.user() for _ in range(4))
    s.ok("PUT", f"/v3/users/{d}/channel_invitation_preference", json={"auto_accept": False})
    url = s.channel([a, b])["channel_url"]
    sa = s.session(a)
    assert_error(s.request("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [c, d]}),
                 403, 900030)
    assert member_ids(s, url) == sorted([a, b])
    # An invitation that is pending counts: the channel is then full.
    s.ok("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [d]})
    assert_error(s.request("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [c]}),
                 403, 900030)
    # Inviting a member again changes nothing and is no error; the invitee may still accept.
    s.ok("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [b]})
    s.ok("PUT", f"/v3/group_channels/{url}/accept", session=s.session(d), json={})
    assert member_ids(s, url) == sorted([a, b, d])


def test_join_of_a_full_public_channel_is_refused(fresh_server):
    s = fresh_server(LIMIT_ARGS)
    a, b, c, d = (s.user() for _ in range(4))
    url = s.channel([a, b], is_public=True)["channel_url"]
    s.ok("PUT", f"/v3/group_channels/{url}/join", session=s.session(c), json={})
    sd = s.session(d)
    assert_error(s.request("PUT", f"/v3/group_channels/{url}/join", session=sd, json={}), 403, 900030)
    assert member_ids(s, url) == sorted([a, b, c])
    # A member who leaves makes room.
    s.ok("PUT", f"/v3/group_channels/{url}/leave", session=s.session(b), json={})
    s.ok("PUT", f"/v3/group_channels/{url}/join", session=sd, json={})
    assert member_ids(s, url) == sorted([a, c, d])


def test_bad_member_limits_are_refused(fresh_server, tmp_path):
    import subprocess
    from conftest import server_binary
    for args in (["--max-members-per-channel", "0"], ["--max-members-per-super-channel", "many"]):
        done = subprocess.run([server_binary(), "--port", "0", "--database", str(tmp_path / "x.sqlite")] + args,
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 78, (args, done.stderr)
        assert args[0] in done.stderr, done.stderr
