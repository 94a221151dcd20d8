"""Routing: which handler a method and path reach, and what every other request gets.

Raw requests go through http.client so that the path reaches the server byte for byte
(no client-side normalization of slashes or escapes).
"""
import http.client
import json
import urllib.parse

import pytest

from conftest import API_TOKEN

NOT_ALLOWED = {"error": True, "code": 400105, "message": "Method not allowed on this path."}
NO_ROUTE = {"error": True, "code": 400201, "message": "Route not found."}


class Raw:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


def raw(server, method, path, headers=None, body=None, admin=True):
    """One request on its own connection; `path` is sent exactly as given."""
    parsed = urllib.parse.urlsplit(server.base)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    h = {"Api-Token": API_TOKEN} if admin else {}
    h.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        h.setdefault("Content-Type", "application/json")
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in h.items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        return Raw(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def world(server):
    """A channel with two members and a message."""
    a = server.user("rt")
    b = server.user("rt")
    url = server.channel([a, b])["channel_url"]
    msg = server.send(url, a, "routing")
    return {"a": a, "b": b, "url": url, "msg": msg["message_id"], "session": server.session(a)}


# --- 405 -------------------------------------------------------------------------------

@pytest.mark.parametrize("method,template", [
    ("DELETE", "/v3/users"),
    ("PATCH", "/v3/users"),
    ("OPTIONS", "/v3/users"),
    ("PATCH", "/v3/users/{a}"),
    ("POST", "/v3/users/{a}"),
    ("GET", "/v3/users/{a}/token"),
    ("DELETE", "/v3/users/{a}/events"),
    ("POST", "/v3/users/{a}/my_group_channels/changelogs"),
    ("PUT", "/v3/group_channels"),
    ("POST", "/v3/group_channels/{url}"),
    ("GET", "/v3/group_channels/{url}/invite"),
    ("PATCH", "/v3/group_channels/{url}/messages"),
    ("TRACE", "/v3/group_channels/{url}/messages"),
    ("GET", "/v3/group_channels/{url}/messages/mark_as_read"),
    ("POST", "/v3/group_channels/{url}/messages/total_count"),
    ("DELETE", "/v3/group_channels/{url}/messages/changelogs"),
    ("POST", "/v3/group_channels/{url}/messages/{msg}"),
    ("GET", "/v3/group_channels/{url}/messages/{msg}/copy"),
    ("POST", "/v3/group_channels/{url}/metacounter/k"),
    ("POST", "/v3/files/f"),
    ("DELETE", "/v3/report"),
    ("GET", "/v3/report/users/{a}"),
])
def test_known_path_wrong_method_is_405(server, world, method, template):
    path = template.format(**world)
    r = raw(server, method, path)
    assert r.status == 405, (method, path, r.status, r.body)
    assert r.json() == NOT_ALLOWED
    assert r.headers["content-type"] == "application/json; charset=utf-8"


def test_405_comes_before_credentials_and_lookups(server, world):
    # The route is resolved first: no credentials, wrong credentials, or a missing resource
    # do not change the answer for a method the path does not have.
    for headers, admin in [({}, False), ({"Api-Token": "wrong"}, False), ({"Session-Key": "bogus"}, False)]:
        r = raw(server, "PATCH", f"/v3/group_channels/{world['url']}", headers=headers, admin=admin)
        assert r.status == 405 and r.json() == NOT_ALLOWED
    r = raw(server, "PATCH", "/v3/group_channels/no-such-channel/messages/123", admin=False)
    assert r.status == 405 and r.json() == NOT_ALLOWED
    r = raw(server, "GET", "/v3/group_channels/x/messages/not-a-number/pin", admin=False)
    assert r.status == 405 and r.json() == NOT_ALLOWED


def test_head_without_get_is_405(server, world):
    r = raw(server, "HEAD", f"/v3/users/{world['a']}/token")
    assert r.status == 405 and r.body == b""


# --- HEAD ------------------------------------------------------------------------------

@pytest.mark.parametrize("template", [
    "/v3/users/{a}",
    "/v3/group_channels/{url}",
    "/v3/group_channels/{url}/messages/total_count",
    "/v3/group_channels/{url}/messages/{msg}",
])
def test_head_answers_like_get_without_a_body(server, world, template):
    path = template.format(**world)
    get = raw(server, "GET", path)
    head = raw(server, "HEAD", path)
    assert get.status == head.status == 200
    assert head.body == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.body))


def test_head_then_get_on_one_connection(server, world):
    # No body bytes follow a HEAD answer: the next answer on the connection is intact.
    parsed = urllib.parse.urlsplit(server.base)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    try:
        for _ in range(2):
            conn.request("HEAD", f"/v3/users/{world['a']}", headers={"Api-Token": API_TOKEN})
            r = conn.getresponse()
            assert r.status == 200 and r.read() == b""
            conn.request("GET", f"/v3/users/{world['a']}", headers={"Api-Token": API_TOKEN})
            r = conn.getresponse()
            assert r.status == 200 and json.loads(r.read())["user_id"] == world["a"]
    finally:
        conn.close()


def test_head_on_the_event_stream_opens_it(server, world):
    # As GET: the answer is the stream's head, and the stream stays open.
    parsed = urllib.parse.urlsplit(server.base)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    try:
        conn.request("HEAD", f"/v3/users/{world['a']}/events", headers={"Api-Token": API_TOKEN})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("content-type") == "text/event-stream"
    finally:
        conn.close()
    r = raw(server, "HEAD", "/v3/users/no-such-user-here/events")
    assert r.status == 404


def test_head_keeps_get_errors(server, world):
    r = raw(server, "HEAD", "/v3/users/no-such-user-here")
    assert r.status == 404 and r.body == b""
    r = raw(server, "HEAD", f"/v3/users/{world['a']}", admin=False)
    assert r.status == 401 and r.body == b""
    r = raw(server, "HEAD", "/v3/nowhere")
    assert r.status == 404 and r.body == b""


# --- unknown paths -------------------------------------------------------------------------

UNKNOWN = [
    "/", "/v3", "/v3/", "/v2/users", "/v3/nothing", "/v3/users/x/nothing",
    "/v3/group_channels/x/messages/1/nothing", "/v3/group_channels/x/messages/1/pin/more",
    "/v3/report/users", "/v3/report/group_channels/x/messages", "/v3/files/a/b/c",
    "/users", "/V3/users", "/v3/Users", "/v3/users.json",
]


@pytest.mark.parametrize("path", UNKNOWN)
@pytest.mark.parametrize("credentials", ["admin", "none", "wrong"])
def test_unknown_path_is_404_with_or_without_credentials(server, path, credentials):
    headers = {"Api-Token": "wrong"} if credentials == "wrong" else {}
    for method in ("GET", "POST", "PATCH"):
        r = raw(server, method, path, headers=headers, admin=credentials == "admin")
        assert r.status == 404, (method, path, r.status, r.body)
        assert r.json() == NO_ROUTE
        assert r.headers["content-type"] == "application/json; charset=utf-8"


def test_unknown_path_is_404_before_the_body(server):
    # A large declared body on an unknown path costs only its head.
    r = raw(server, "POST", "/v3/nothing", headers={"Content-Length": str(50_000_000)}, admin=False)
    assert r.status == 404 and r.json() == NO_ROUTE


# --- literal segments win over parameters -------------------------------------------------

def test_literal_segments_beat_parameters(server, world):
    url, a = world["url"], world["a"]
    base = f"/v3/group_channels/{url}/messages"
    r = raw(server, "GET", f"{base}/changelogs?change_ts=0", headers={"Session-Key": world["session"]}, admin=False)
    assert r.status == 200 and "updated" in r.json() and "deleted" in r.json()
    r = raw(server, "GET", f"{base}/total_count")
    assert r.status == 200 and r.json() == {"total": 1}
    r = raw(server, "PUT", f"{base}/mark_as_read", body={"user_id": a})
    assert r.status == 200, r.body
    r = raw(server, "PUT", f"{base}/mark_as_delivered", body={"user_id": a})
    assert r.status == 200, r.body
    r = raw(server, "GET", f"{base}/{world['msg']}")
    assert r.status == 200 and r.json()["message_id"] == world["msg"]
    # Methods only the parameter route has are still 405 on a literal (no fallback to {id}).
    for method, literal in [("GET", "mark_as_read"), ("DELETE", "total_count"), ("PUT", "changelogs")]:
        r = raw(server, method, f"{base}/{literal}")
        assert r.status == 405 and r.json() == NOT_ALLOWED, (method, literal)
    # Deeper segments the literal lacks fall back to the parameter route ("changelogs" as an id).
    r = raw(server, "POST", f"{base}/changelogs/pin")
    assert r.status == 400 and r.json()["code"] == 400100 and '"message_id"' in r.json()["message"]
    # A channel and a user named like a literal are reachable.
    r = raw(server, "GET", "/v3/users/token")
    assert r.status == 404 and r.json()["message"] == 'User "token" not found.'
    r = raw(server, "GET", "/v3/group_channels/messages/messages")
    assert r.status == 404 and r.json()["message"] == 'Channel "messages" not found.'


def test_messages_gap_is_not_a_message_id(server, world):
    r = raw(server, "GET", f"/v3/group_channels/{world['url']}/messages_gap?prev_start_ts=0&prev_end_ts=1&next_start_ts=2&next_end_ts=3")
    assert r.status != 405 and "message_id" not in r.body.decode()


def test_metadata_and_metacounter_are_separate(server, world):
    base = f"/v3/group_channels/{world['url']}"
    assert raw(server, "POST", f"{base}/metadata", body={"metadata": {"rk": "text"}}).status == 200
    assert raw(server, "POST", f"{base}/metacounter", body={"metacounter": {"rk": 7}}).status == 200
    assert raw(server, "GET", f"{base}/metadata/rk").json() == {"rk": "text"}
    assert raw(server, "GET", f"{base}/metacounter/rk").json() == {"rk": 7}
    assert raw(server, "GET", f"{base}/metadata").json() == {"rk": "text"}
    assert raw(server, "GET", f"{base}/metacounter").json() == {"rk": 7}


def test_missing_message_is_named_by_its_number(server, world):
    # Changed with the typed message_id parameter: the server used to repeat the path's
    # spelling ("Message 0099999999 not found.").
    for spelling in ("0099999999", "+99999999"):
        r = raw(server, "GET", f"/v3/group_channels/{world['url']}/messages/{spelling}")
        assert r.status == 404 and r.json() == {"error": True, "code": 400201, "message": "Message 99999999 not found."}


def test_message_id_must_be_a_positive_integer(server, world):
    base = f"/v3/group_channels/{world['url']}/messages"
    for bad in ("abc", "0", "-1", "1.5", "99999999999999999999"):
        r = raw(server, "GET", f"{base}/{bad}")
        assert r.status == 400, (bad, r.body)
        assert r.json() == {"error": True, "code": 400100, "message": '"message_id" must be a positive integer.'}
    r = raw(server, "GET", f"{base}/999999999")
    assert r.status == 404 and r.json()["message"] == "Message 999999999 not found."
    # Any decimal spelling of the number names the message.
    for spelling in (f"00{world['msg']}", f"+{world['msg']}"):
        r = raw(server, "GET", f"{base}/{spelling}")
        assert r.status == 200 and r.json()["message_id"] == world["msg"], spelling
    # The channel is looked up before the message id is read.
    r = raw(server, "GET", "/v3/group_channels/no-such-channel/messages/abc")
    assert r.status == 404 and r.json()["message"] == 'Channel "no-such-channel" not found.'
    r = raw(server, "POST", f"/v3/report/group_channels/{world['url']}/messages/abc", body={"report_category": "spam"})
    assert r.status == 400 and '"message_id"' in r.json()["message"]


# --- percent-encoded parameters ------------------------------------------------------------

@pytest.mark.parametrize("suffix", ["a@b", "a b", "a/b", "a%2Fb", "a+b", "é?#", "a%zz", "100%"])
def test_percent_encoded_user_ids_are_decoded_once(server, suffix):
    uid = f"pe-{len(suffix)}-{suffix}"
    server.ok("POST", "/v3/users", json={"user_id": uid, "nickname": "n"})
    quoted = urllib.parse.quote(uid, safe="")
    r = raw(server, "GET", f"/v3/users/{quoted}")
    assert r.status == 200 and r.json()["user_id"] == uid, (quoted, r.body)
    # Through a deeper route, with a session of that user, and in a body-carrying request.
    r = raw(server, "POST", f"/v3/users/{quoted}/token", body={})
    assert r.status == 200, r.body
    session = r.json()["token"]
    r = raw(server, "GET", f"/v3/users/{quoted}/unread_message_count", headers={"Session-Key": session}, admin=False)
    assert r.status == 200, r.body
    r = raw(server, "PUT", f"/v3/users/{quoted}", body={"nickname": "renamed"})
    assert r.status == 200 and r.json()["nickname"] == "renamed"
    # Decoded exactly once: the id quoted twice names another (missing) user.
    twice = urllib.parse.quote(quoted, safe="")
    r = raw(server, "GET", f"/v3/users/{twice}")
    assert r.status == 404 and r.json()["message"] == f'User "{quoted}" not found.'


def test_percent_encoded_event_stream_user(server):
    uid = "pe-events@host name"
    server.ok("POST", "/v3/users", json={"user_id": uid, "nickname": "n"})
    quoted = urllib.parse.quote(uid, safe="")
    parsed = urllib.parse.urlsplit(server.base)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    try:
        conn.request("GET", f"/v3/users/{quoted}/events", headers={"Api-Token": API_TOKEN})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("content-type") == "text/event-stream"
        first = b""
        while b"\n\n" not in first:
            first += r.read1(4096)
        assert json.loads(first.split(b"data: ", 1)[1].split(b"\n", 1)[0])["user_id"] == uid
    finally:
        conn.close()


def test_percent_encoded_channel_urls(server, world):
    url = world["url"]
    # Channel URLs are [A-Za-z0-9_.-]: escapes of those characters decode to the same channel.
    encoded = "".join(f"%{ord(c):02X}" for c in url)
    r = raw(server, "GET", f"/v3/group_channels/{encoded}")
    assert r.status == 200 and r.json()["channel_url"] == url
    r = raw(server, "GET", f"/v3/group_channels/{encoded}/messages/{world['msg']}")
    assert r.status == 200 and r.json()["message_id"] == world["msg"]
    r = raw(server, "GET", f"/v3/group_channels/{url}%2Fmessages")
    assert r.status == 404 and r.json()["message"] == f'Channel "{url}/messages" not found.'
    r = raw(server, "GET", f"/v3/group_channels/{url}%20x")
    assert r.status == 404 and r.json()["message"] == f'Channel "{url} x" not found.'


def test_percent_encoded_literals_and_message_ids(server, world):
    # Segments are decoded before they are matched, literals included (as before).
    r = raw(server, "GET", f"/v3/%75sers/{world['a']}")
    assert r.status == 200 and r.json()["user_id"] == world["a"]
    r = raw(server, "GET", f"/v3/group_channels/{world['url']}/messages/%74otal_count")
    assert r.status == 200 and r.json() == {"total": 1}
    digits = "".join(f"%{ord(c):02X}" for c in str(world["msg"]))
    r = raw(server, "GET", f"/v3/group_channels/{world['url']}/messages/{digits}")
    assert r.status == 200 and r.json()["message_id"] == world["msg"]
    # An escaped slash is part of a segment, never a separator.
    r = raw(server, "GET", "/v3%2Fusers")
    assert r.status == 404 and r.json() == NO_ROUTE


# --- slashes and long paths ----------------------------------------------------------------

@pytest.mark.parametrize("template", [
    "/v3/users/{a}/", "//v3/users/{a}", "/v3//users/{a}", "/v3/users//{a}", "/v3/users/{a}//",
    "///v3///users///{a}///",
])
def test_empty_segments_are_ignored(server, world, template):
    path = template.format(**world)
    r = raw(server, "GET", path)
    assert r.status == 200 and r.json()["user_id"] == world["a"], (path, r.status, r.body)


def test_trailing_slash_on_collections_and_queries(server, world):
    r = raw(server, "GET", "/v3/users/?limit=1")
    assert r.status == 200 and len(r.json()["users"]) == 1
    r = raw(server, "GET", f"/v3/group_channels/{world['url']}/messages/total_count/")
    assert r.status == 200 and r.json() == {"total": 1}
    r = raw(server, "PATCH", "/v3/users/")
    assert r.status == 405 and r.json() == NOT_ALLOWED


def test_long_paths(server):
    # A long parameter is looked up like any other; a head past the parser's limit is
    # refused before routing.
    long_id = "x" * 20_000
    r = raw(server, "GET", f"/v3/users/{long_id}")
    assert r.status == 404 and r.json()["message"] == f'User "{long_id}" not found.'
    r = raw(server, "GET", "/v3" + "/users" * 5_000)
    assert r.status == 404 and r.json() == NO_ROUTE
    r = raw(server, "GET", f"/v3/users/{'y' * 200_000}")
    assert r.status in (400, 431)
    assert server.alive()
