"""Webhooks (docs/PROTOCOL.md §6.6, docs/SERVER.md "Webhooks"): the real server posts to a
real HTTP receiver that each test starts on a loopback port."""
import time

import pytest

from conftest import assert_error, metric
from hook_receiver import (DELIVERIES, assert_sends_do_not_wait, assert_start_refused,
                           check_each_call_once_across_a_restart, hook_server, newest_delivery, signature)


def subscribe(server, *endpoints):
    return server.ok("PUT", "/v3/applications/settings/webhook", json={"endpoints": list(endpoints)})


def members_and_channel(server):
    alice, bob = server.user("alice"), server.user("bob")
    return alice, bob, server.channel([alice, bob])["channel_url"]


def test_delivery_carries_the_event_and_a_valid_signature(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers()
    subscribe(server, {"url": receiver.url, "categories": ["*"]})
    alice, bob, url = members_and_channel(server)
    sent = server.send(url, alice, "hello hooks")

    [created] = receiver.wait_for(1, "channel_created")
    assert created["channel_url"] == url
    assert {m["user_id"] for m in created["channel"]["members"]} == {alice, bob}
    [joined] = receiver.wait_for(1, "member_joined")
    assert {u["user_id"] for u in joined["users"]} == {alice, bob}
    [message] = receiver.wait_for(1, "message_sent")
    assert message["channel_url"] == url
    assert message["message"]["message_id"] == sent["message_id"]
    assert message["message"]["message"] == "hello hooks"
    assert message["message"]["user"]["user_id"] == alice
    assert message["channel"]["channel_url"] == url
    assert isinstance(message["ts"], int) and abs(message["ts"] - sent["created_at"]) < 5000

    for call in receiver.calls:
        assert call["headers"]["X-Parley-Signature"] == signature(call["raw"])
        assert call["headers"]["Content-Type"] == "application/json"
        assert call["headers"]["X-Parley-Event"] == call["body"]["category"]
        assert call["headers"]["X-Parley-Attempt"] == "1"
    ids = [call["headers"]["X-Parley-Delivery"] for call in receiver.calls]
    assert len(ids) == len(set(ids))

    # Edit, delete, update and leave reach it too; a category not subscribed does not.
    mid = sent["message_id"]
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{mid}", json={"message_type": "MESG", "message": "edited"})
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{mid}")
    server.ok("PUT", f"/v3/group_channels/{url}", json={"name": "renamed"})
    server.ok("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [bob]})
    assert receiver.wait_for(1, "message_updated")[0]["message"]["message"] == "edited"
    assert receiver.wait_for(1, "message_deleted")[0]["message_id"] == mid
    assert receiver.wait_for(1, "channel_changed")[0]["channel"]["name"] == "renamed"
    assert receiver.wait_for(1, "member_left")[0]["user"]["user_id"] == bob


def test_invitations_reports_polls_and_deletion(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers()
    subscribe(server, {"url": receiver.url,
                       "categories": ["member_invited", "report", "poll_voted", "channel_deleted"]})
    alice, bob, url = members_and_channel(server)
    carol = server.user("carol")
    server.ok("PUT", f"/v3/users/{carol}/channel_invitation_preference", json={"auto_accept": False})
    server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [carol], "inviter_id": alice})
    [invited] = receiver.wait_for(1, "member_invited")
    assert [u["user_id"] for u in invited["invitees"]] == [carol] and invited["channel_url"] == url

    poll = server.ok("POST", f"/v3/group_channels/{url}/polls",
                     json={"user_id": alice, "title": "Lunch?", "options": ["pizza", "sushi"]})
    pizza = poll["options"][0]["id"]
    server.ok("PUT", f"/v3/group_channels/{url}/polls/{poll['id']}/vote", json={"user_id": bob, "option_ids": [pizza]})
    [voted] = receiver.wait_for(1, "poll_voted")
    assert voted["poll"]["id"] == poll["id"] and "voted_option_ids" not in voted["poll"]
    assert {o["id"]: o["vote_count"] for o in voted["poll"]["options"]}[pizza] == 1

    session = server.session(alice)
    server.ok("POST", f"/v3/report/users/{bob}", session=session, json={"report_category": "spam"})
    [report] = receiver.wait_for(1, "report")
    assert report["report"]["offending_user"]["user_id"] == bob and "channel_url" not in report

    server.ok("DELETE", f"/v3/group_channels/{url}")
    [deleted] = receiver.wait_for(1, "channel_deleted")
    assert deleted["channel_url"] == url and deleted["channel"]["channel_url"] == url
    assert {m["user_id"] for m in deleted["channel"]["members"]} == {alice, bob, carol}
    time.sleep(1)
    assert sorted(b["category"] for b in receiver.bodies()) == ["channel_deleted", "member_invited", "poll_voted", "report"]


def test_only_subscribed_categories_are_sent(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers()
    subscribe(server, {"url": receiver.url, "categories": ["message_deleted"]})
    alice, _, url = members_and_channel(server)
    sent = server.send(url, alice)
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{sent['message_id']}")
    receiver.wait_for(1, "message_deleted")
    time.sleep(1.5)
    assert [b["category"] for b in receiver.bodies()] == ["message_deleted"]


def test_a_write_that_rolls_back_queues_nothing(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers()
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"]})
    alice, _, url = members_and_channel(server)
    failed = server.request("POST", f"/v3/group_channels/{url}/messages",
                            json={"message_type": "MESG", "user_id": alice, "message": "lost"},
                            headers={"Parley-Test-Fail-Statement": "1"})
    assert failed.status_code == 500
    server.send(url, alice, "kept")
    receiver.wait_for(1, "message_sent")
    time.sleep(1.5)
    assert [b["message"]["message"] for b in receiver.bodies("message_sent")] == ["kept"]
    assert server.ok("GET", DELIVERIES)["deliveries"][0]["status"] == "delivered"
    assert len(server.ok("GET", DELIVERIES)["deliveries"]) == 1


def test_retried_after_an_error_answer(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers(answers=[500, 503])
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"]})
    alice, _, url = members_and_channel(server)
    server.send(url, alice)
    receiver.wait_for(1, "message_sent", timeout=20)
    assert [c["status"] for c in receiver.calls] == [500, 503, 200]
    assert [c["headers"]["X-Parley-Attempt"] for c in receiver.calls] == ["1", "2", "3"]
    assert len({c["headers"]["X-Parley-Delivery"] for c in receiver.calls}) == 1
    entry = newest_delivery(server, "delivered")
    assert entry["attempts"] == 3 and entry["last_status_code"] == 200


def test_retried_while_the_receiver_is_down_then_delivered(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers(start=False)
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"]})
    alice, _, url = members_and_channel(server)
    server.send(url, alice, "while down")
    entry = newest_delivery(server, attempts=2)
    assert entry["status"] == "pending"
    assert entry["last_error"] == "connection refused"
    assert "last_status_code" not in entry
    receiver.start()
    [body] = receiver.wait_for(1, "message_sent")
    assert body["message"]["message"] == "while down"
    entry = newest_delivery(server, "delivered")
    assert len(server.ok("GET", DELIVERIES)["deliveries"]) == 1 and "last_error" not in entry


def test_order_per_channel(fresh_server, receivers):
    server = hook_server(fresh_server)
    # The first call fails: the channel's later calls wait for its retry, the other channel's go on.
    receiver = receivers(answers=[500], delay=0.02)
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"], "concurrency": 4})
    alice, bob, first = members_and_channel(server)
    second = server.channel([alice, bob])["channel_url"]
    sent = {first: [], second: []}
    for i in range(8):
        for url in (first, second):
            sent[url].append(server.send(url, alice, f"{url} {i}")["message_id"])
    receiver.wait_for(16, "message_sent", timeout=30)
    for url in (first, second):
        got = [b["message"]["message_id"] for b in receiver.bodies("message_sent") if b["channel_url"] == url]
        assert got == sent[url]
    assert receiver.calls[0]["status"] == 500


def test_nothing_delivered_twice_after_a_restart(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers()
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"]})
    alice, _, url = members_and_channel(server)
    check_each_call_once_across_a_restart(server, receiver, "message_sent",
                                          lambda text: server.send(url, alice, text)["message_id"],
                                          lambda body: body["message"]["message_id"], before=3, queued=5)


def test_a_slow_receiver_does_not_slow_sends(fresh_server, receivers):
    server = hook_server(fresh_server)
    receiver = receivers(delay=3)
    subscribe(server, {"url": receiver.url, "categories": ["message_sent"], "concurrency": 1})
    alice, _, url = members_and_channel(server)
    assert_sends_do_not_wait(server, url, alice, 10)
    receiver.wait_for(1, "message_sent", timeout=10)


def test_delivery_log_and_metrics(fresh_server, receivers):
    server = hook_server(fresh_server, "--webhook-max-attempts", "2")
    good = receivers()
    bad = receivers(answers=[500] * 10)
    subscribe(server, {"url": good.url, "categories": ["message_sent"]},
              {"url": bad.url, "categories": ["message_sent"], "timeout_seconds": 2})
    alice, _, url = members_and_channel(server)
    server.send(url, alice)
    good.wait_for(1, "message_sent")
    deadline = time.monotonic() + 10
    while not server.ok("GET", DELIVERIES, params={"status": "failed"})["deliveries"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    [failed] = server.ok("GET", DELIVERIES, params={"status": "failed"})["deliveries"]
    assert failed["endpoint"] == bad.url and failed["category"] == "message_sent" and failed["channel_url"] == url
    assert failed["attempts"] == 2 and failed["last_status_code"] == 500 and failed["last_error"] == "answered 500"
    [delivered] = server.ok("GET", DELIVERIES, params={"status": "delivered"})["deliveries"]
    assert delivered["endpoint"] == good.url and delivered["attempts"] == 1
    page = server.ok("GET", DELIVERIES, params={"limit": 1})
    assert len(page["deliveries"]) == 1 and page["next"]
    rest = server.ok("GET", DELIVERIES, params={"limit": 1, "token": page["next"]})
    assert rest["deliveries"][0]["delivery_id"] < page["deliveries"][0]["delivery_id"]
    assert_error(server.request("GET", DELIVERIES, params={"status": "lost"}), 400, 400100, "status")
    alice_session = server.session(alice)
    assert server.request("GET", DELIVERIES, token=None, session=alice_session).status_code == 403

    assert metric(server, "parley_hook_deliveries_total", f'{{endpoint="{good.url}",outcome="delivered"}}') == 1
    assert metric(server, "parley_hook_deliveries_total", f'{{endpoint="{bad.url}",outcome="retried"}}') == 1
    assert metric(server, "parley_hook_deliveries_total", f'{{endpoint="{bad.url}",outcome="failed"}}') == 1
    assert metric(server, "parley_hook_queue_depth") == 0


def test_settings_through_the_admin_api(fresh_server, receivers):
    server = hook_server(fresh_server)
    assert server.ok("GET", "/v3/applications/settings/webhook")["endpoints"] == []
    receiver = receivers()
    answer = subscribe(server, {"url": receiver.url, "categories": "message_sent,member_joined", "timeout_seconds": 3})
    assert answer["endpoints"] == [{"url": receiver.url, "categories": ["member_joined", "message_sent"],
                                    "timeout_seconds": 3, "concurrency": 4}]
    assert "poll_voted" in answer["categories"]
    assert server.ok("GET", "/v3/applications/settings/webhook")["endpoints"] == answer["endpoints"]
    assert server.ok("DELETE", "/v3/applications/settings/webhook")["endpoints"] == []


@pytest.mark.parametrize("endpoint, mentions", [
    ({"url": "ftp://example.test/x", "categories": ["*"]}, "is not an http:// or https:// URL"),
    ({"url": "not a url", "categories": ["*"]}, "is not an http:// or https:// URL"),
    ({"url": "http:///path", "categories": ["*"]}, "names no host"),
    ({"url": "http://127.0.0.1:9/x", "categories": ["message_snet"]}, "unknown category 'message_snet'"),
    ({"url": "http://127.0.0.1:9/x"}, "categories is required"),
    ({"url": "http://127.0.0.1:9/x", "categories": ["*"], "concurrency": 0}, "concurrency"),
    ({"url": "http://127.0.0.1:9/x", "categories": ["*"], "timeout_seconds": "soon"}, "timeout_seconds"),
    ({"url": "http://127.0.0.1:9/x", "categories": ["*"], "secret": "x"}, "unknown field \"secret\""),
])
def test_bad_settings_are_refused(server, endpoint, mentions):
    r = server.request("PUT", "/v3/applications/settings/webhook", json={"endpoints": [endpoint]})
    assert_error(r, 400, 400100, mentions)
    assert server.ok("GET", "/v3/applications/settings/webhook")["endpoints"] == []


def test_settings_missing_or_not_admin(server):
    assert_error(server.request("PUT", "/v3/applications/settings/webhook", json={}), 400, 400111, "endpoints")
    alice = server.user("alice")
    r = server.request("PUT", "/v3/applications/settings/webhook", token=None, session=server.session(alice),
                       json={"endpoints": []})
    assert r.status_code == 403


@pytest.mark.parametrize("args, mentions", [
    (["--webhook-urls", "ftp://example.test/x"], "--webhook-urls: 'ftp://example.test/x' is not an http:// or https:// URL"),
    (["--webhook-urls", "http://127.0.0.1:9/x", "--webhook-categories", "message_sent,bogus"],
     "--webhook-categories: unknown category 'bogus'"),
    (["--webhook-concurrency", "0"], "--webhook-concurrency: '0' is not a whole number in 1...64"),
])
def test_bad_configuration_stops_the_start(tmp_path, args, mentions):
    assert_start_refused(tmp_path, args, mentions)


def test_endpoints_from_the_configuration(fresh_server, receivers):
    receiver = receivers()
    server = hook_server(fresh_server, "--webhook-urls", receiver.url, "--webhook-categories", "channel_created")
    assert [e["url"] for e in server.ok("GET", "/v3/applications/settings/webhook")["endpoints"]] == [receiver.url]
    alice, _, url = members_and_channel(server)
    [created] = receiver.wait_for(1, "channel_created")
    assert created["channel_url"] == url
    # The admin API's endpoints win; deleting them brings the configuration's back.
    subscribe(server)
    server.channel([alice])
    time.sleep(1.5)
    assert len(receiver.bodies()) == 1
    server.ok("DELETE", "/v3/applications/settings/webhook")
    server.channel([alice])
    receiver.wait_for(2, "channel_created")


@pytest.mark.postgres_only
def test_each_call_is_sent_by_one_of_several_servers(fresh_server, receivers):
    first = hook_server(fresh_server)
    second = hook_server(fresh_server)
    receiver = receivers(delay=0.01)
    subscribe(first, {"url": receiver.url, "categories": ["message_sent"], "concurrency": 8})
    time.sleep(1.5)  # the other server rereads the endpoints every second
    alice, bob, url = members_and_channel(first)
    channels = [url] + [first.channel([alice, bob])["channel_url"] for _ in range(3)]
    sent = {c: [] for c in channels}
    for i in range(10):
        for n, c in enumerate(channels):
            server = (first, second)[(i + n) % 2]
            sent[c].append(server.send(c, alice, f"{i}")["message_id"])
    receiver.wait_for(40, "message_sent", timeout=30)
    time.sleep(2)
    bodies = receiver.bodies("message_sent")
    assert len(bodies) == 40
    for c in channels:
        assert [b["message"]["message_id"] for b in bodies if b["channel_url"] == c] == sent[c]
