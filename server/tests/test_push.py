"""Push notifications (docs/PROTOCOL.md §5.1, docs/SERVER.md "Push notifications"): device
tokens and preferences through the API, and the push requests the real server queues for a
real HTTP push gateway that each test starts on a loopback port."""
import time

import pytest

from conftest import EventReader, assert_error, metric
from hook_receiver import (DELIVERIES, assert_sends_do_not_wait, assert_start_refused,
                           check_each_call_once_across_a_restart, hook_server, newest_delivery, signature)


def push_server(fresh_server, gateway, *extra):
    return hook_server(fresh_server, "--push-gateway-url", gateway.url, *extra)


def register(server, user, token, kind="apns"):
    field = {"apns": "apns_device_token", "gcm": "gcm_reg_token", "huawei": "huawei_device_token"}[kind]
    return server.ok("POST", f"/v3/users/{user}/push/{kind}", json={field: token})


def recipients(bodies):
    return sorted(r["user_id"] for b in bodies for r in b["recipients"])


def wait_online(server, user, online):
    deadline = time.monotonic() + 10
    while server.ok("GET", f"/v3/users/{user}")["is_online"] != online:
        assert time.monotonic() < deadline, f"{user} is_online never became {online}"
        time.sleep(0.05)


def quiet(receiver, seconds=1.5):
    """The calls that arrive within `seconds` (to show that one did not come)."""
    time.sleep(seconds)
    return receiver.bodies("push")


def test_an_offline_member_is_notified_an_online_one_is_not(fresh_server, receivers):
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice, bob, carol = server.user("alice", nickname="Alice"), server.user("bob"), server.user("carol")
    url = server.channel([alice, bob, carol], name="Trip")["channel_url"]
    register(server, bob, "bob-phone")
    register(server, bob, "bob-tablet", "gcm")
    register(server, carol, "carol-phone")
    register(server, alice, "alice-phone")
    online = EventReader(server, carol)
    try:
        wait_online(server, carol, True)
        server.send(url, alice, "first")
        sent = server.send(url, alice, "see you at 8")
        bodies = gateway.wait_for(2, "push")
    finally:
        online.close()
    assert [recipients([b]) for b in bodies] == [[bob], [bob]]
    call = bodies[1]
    assert call["channel_url"] == url and call["message_id"] == sent["message_id"] and call["message_type"] == "MESG"
    assert call["channel"] == {"channel_url": url, "name": "Trip", "custom_type": ""}
    assert call["sender"] == {"user_id": alice, "nickname": "Alice"}
    assert call["push_notification_delivery_option"] == "default" and "apple_critical_alert_options" not in call
    [recipient] = call["recipients"]
    assert recipient["tokens"] == [{"type": "APNS", "token": "bob-phone"}, {"type": "GCM", "token": "bob-tablet"}]
    assert recipient["title"] == "Trip" and recipient["body"] == "Alice: see you at 8"
    assert recipient["badge"] == 2 and recipient["mentioned"] is False
    raw = gateway.calls[-1]
    assert raw["headers"]["X-Parley-Signature"] == signature(raw["raw"])
    assert raw["headers"]["X-Parley-Event"] == "push"
    # Once carol's stream is closed she is offline too.
    wait_online(server, carol, False)
    server.send(url, alice, "later")
    assert recipients(gateway.wait_for(3, "push")[2:]) == [bob, carol]
    log = server.ok("GET", DELIVERIES)["deliveries"]
    assert {e["category"] for e in log} == {"push"} and {e["endpoint"] for e in log} == {gateway.url}


def test_badge_counts_unread_messages_in_every_channel(fresh_server, receivers):
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice, bob = server.user("alice"), server.user("bob")
    first = server.channel([alice, bob])["channel_url"]
    second = server.channel([alice, bob])["channel_url"]
    for _ in range(3):
        server.send(first, alice)
    register(server, bob, "bob-phone")
    server.send(second, alice, "in the second")
    [call] = gateway.wait_for(1, "push")
    assert call["recipients"][0]["badge"] == 4
    server.ok("PUT", f"/v3/group_channels/{first}/messages/mark_as_read", json={"user_id": bob})
    server.send(second, alice, "again")
    assert gateway.wait_for(2, "push")[1]["recipients"][0]["badge"] == 2


def test_trigger_options_and_mentions(fresh_server, receivers):
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice = server.user("alice")
    mention_only, off_here, off_but_all_here = server.user("m"), server.user("o"), server.user("a")
    others = [server.user(f"x{i}") for i in range(10)]
    url = server.channel([alice, mention_only, off_here, off_but_all_here, *others])["channel_url"]
    for user in [mention_only, off_here, off_but_all_here, *others]:
        register(server, user, f"{user}-phone")
    assert server.ok("PUT", f"/v3/users/{mention_only}/push_preference",
                     json={"push_trigger_option": "mention_only"})["push_trigger_option"] == "mention_only"
    server.ok("PUT", f"/v3/users/{off_here}/push_preference/{url}", json={"push_trigger_option": "off"})
    server.ok("PUT", f"/v3/users/{off_but_all_here}/push_preference", json={"push_trigger_option": "off"})
    server.ok("PUT", f"/v3/users/{off_but_all_here}/push_preference/{url}", json={"push_trigger_option": "all"})
    for user in others:
        server.ok("PUT", f"/v3/users/{user}/push_preference", json={"push_trigger_option": "mention_only"})

    server.send(url, alice, "plain")
    [plain] = gateway.wait_for(1, "push")
    assert recipients([plain]) == [off_but_all_here]

    # Eleven mentioned: the first ten are notified as mentioned.
    mentioned = others + [mention_only]
    server.send(url, alice, "all of you", mentioned_user_ids=mentioned)
    [call] = gateway.wait_for(2, "push")[1:]
    assert recipients([call]) == sorted(others + [off_but_all_here])
    assert all(r["mentioned"] for r in call["recipients"] if r["user_id"] in others)

    server.send(url, alice, "you", mentioned_user_ids=[mention_only, off_here])
    [call] = gateway.wait_for(3, "push")[2:]
    assert recipients([call]) == sorted([mention_only, off_but_all_here])
    assert {r["user_id"]: r["mentioned"] for r in call["recipients"]} == {mention_only: True, off_but_all_here: False}

    # Back to the default: the user's own option (mention only) applies in the channel.
    server.ok("PUT", f"/v3/users/{off_but_all_here}/push_preference/{url}", json={"push_trigger_option": "default"})
    server.send(url, alice, "nobody")
    assert len(quiet(gateway)) == 3


def test_do_not_disturb_snooze_suppress_and_critical_alerts(fresh_server, receivers):
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice, resting, snoozing, awake = server.user("alice"), server.user("dnd"), server.user("snooze"), server.user("awake")
    url = server.channel([alice, resting, snoozing, awake])["channel_url"]
    for user in (resting, snoozing, awake):
        register(server, user, f"{user}-iphone")
        register(server, user, f"{user}-android", "gcm")
    # Do not disturb for the hour around now, in Tokyo time.
    tokyo_hour = (time.gmtime().tm_hour + 9) % 24
    server.ok("PUT", f"/v3/users/{resting}/push_preference", json={
        "do_not_disturb": True, "start_hour": (tokyo_hour - 1) % 24, "start_min": 0, "end_hour": (tokyo_hour + 1) % 24,
        "end_min": 0, "timezone": "Asia/Tokyo"})
    now = int(time.time() * 1000)
    server.ok("PUT", f"/v3/users/{snoozing}/push_preference", json={
        "snooze_enabled": True, "snooze_start_ts": now - 60_000, "snooze_end_ts": now + 600_000})

    server.send(url, alice, "quiet please")
    [call] = gateway.wait_for(1, "push")
    assert recipients([call]) == [awake]

    server.send(url, alice, "fire", apple_critical_alert_options={"name": "alarm.caf", "volume": 0.7})
    [critical] = gateway.wait_for(2, "push")[1:]
    assert critical["apple_critical_alert_options"] == {"name": "alarm.caf", "volume": 0.7}
    tokens = {r["user_id"]: [t["token"] for t in r["tokens"]] for r in critical["recipients"]}
    assert tokens == {resting: [f"{resting}-iphone"], snoozing: [f"{snoozing}-iphone"],
                      awake: [f"{awake}-iphone", f"{awake}-android"]}

    server.send(url, alice, "hush", push_notification_delivery_option="suppress")
    server.send(url, alice, "hush too", send_push=False)
    server.send(url, alice, "silent", is_silent=True)
    assert len(quiet(gateway)) == 2

    # A do-not-disturb window that does not cover now, and a snooze that ended: notified again.
    server.ok("PUT", f"/v3/users/{resting}/push_preference", json={
        "start_hour": (tokyo_hour + 2) % 24, "end_hour": (tokyo_hour + 3) % 24})
    server.ok("PUT", f"/v3/users/{snoozing}/push_preference", json={"snooze_start_ts": now - 600_000, "snooze_end_ts": now - 1})
    server.send(url, alice, "awake now")
    assert recipients(gateway.wait_for(3, "push")[2:]) == sorted([resting, snoozing, awake])


@pytest.mark.parametrize("body, mentions", [
    ({"push_notification_delivery_option": "sometimes"}, "push_notification_delivery_option"),
    ({"apple_critical_alert_options": {"name": "x", "volume": 2}}, "apple_critical_alert_options.volume"),
    ({"apple_critical_alert_options": {"sound": "x"}}, "unknown field \"sound\""),
])
def test_bad_send_options_are_refused(server, body, mentions):
    alice = server.user("alice")
    url = server.channel([alice])["channel_url"]
    r = server.request("POST", f"/v3/group_channels/{url}/messages",
                       json={"message_type": "MESG", "user_id": alice, "message": "x", **body})
    assert_error(r, 400, 400100, mentions)


def test_retried_after_an_error_answer_and_while_down(fresh_server, receivers):
    gateway = receivers(answers=[500])
    server = push_server(fresh_server, gateway)
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    sent = server.send(url, alice, "one")
    [call] = gateway.wait_for(1, "push", timeout=20)
    assert call["message_id"] == sent["message_id"]
    assert [c["status"] for c in gateway.calls] == [500, 200]
    assert [c["headers"]["X-Parley-Attempt"] for c in gateway.calls] == ["1", "2"]

    gateway.stop()
    server.send(url, alice, "while down")
    entry = newest_delivery(server, attempts=2)
    assert entry["status"] == "pending" and entry["last_error"] == "connection refused"
    gateway.start()
    bodies = gateway.wait_for(2, "push")
    assert bodies[1]["message_id"] != sent["message_id"]
    newest_delivery(server, "delivered")
    assert metric(server, "parley_hook_deliveries_total", f'{{endpoint="{gateway.url}",outcome="retried"}}') >= 2


def test_nothing_delivered_twice_after_a_restart(fresh_server, receivers):
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    check_each_call_once_across_a_restart(server, gateway, "push",
                                          lambda text: server.send(url, alice, text)["message_id"],
                                          lambda body: body["message_id"], before=2, queued=4)


def test_a_slow_gateway_does_not_slow_sends(fresh_server, receivers):
    gateway = receivers(delay=3)
    server = push_server(fresh_server, gateway, "--push-gateway-concurrency", "1")
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    assert_sends_do_not_wait(server, url, alice, 8)
    gateway.wait_for(1, "push", timeout=10)


def test_no_gateway_sends_nothing_but_keeps_tokens(fresh_server, receivers):
    server = fresh_server(["--webhook-retry-max-seconds", "1"])
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    server.send(url, alice)
    time.sleep(1)
    assert server.ok("GET", DELIVERIES)["deliveries"] == []
    assert server.ok("GET", f"/v3/users/{bob}/push/apns")["tokens"] == ["bob-phone"]


def test_device_tokens(server):
    bob, carol = server.user("bob"), server.user("carol")
    answer = register(server, bob, "tok-1")
    assert answer["token"] == "tok-1" and answer["type"] == "APNS" and answer["user"]["user_id"] == bob
    register(server, bob, "tok-2")
    register(server, bob, "fcm-1", "gcm")
    assert server.ok("POST", f"/v3/users/{bob}/push/fcm", json={"token": "fcm-2"})["type"] == "GCM"
    register(server, bob, "hms-1", "huawei")
    listed = server.ok("GET", f"/v3/users/{bob}/push/apns")
    assert listed["tokens"] == ["tok-1", "tok-2"] and listed["type"] == "APNS" and listed["next"] == ""
    assert server.ok("GET", f"/v3/users/{bob}/push/gcm")["tokens"] == ["fcm-1", "fcm-2"]
    assert server.ok("GET", f"/v3/users/{bob}/push/hms")["tokens"] == ["hms-1"]
    # Registered again, once; a device that changes hands moves to its new user.
    register(server, bob, "tok-1")
    assert server.ok("GET", f"/v3/users/{bob}/push/apns")["tokens"] == ["tok-2", "tok-1"]
    register(server, carol, "tok-2")
    assert server.ok("GET", f"/v3/users/{bob}/push/apns")["tokens"] == ["tok-1"]
    assert server.ok("GET", f"/v3/users/{carol}/push/apns")["tokens"] == ["tok-2"]

    assert server.ok("DELETE", f"/v3/users/{bob}/push/apns/tok-1")["token"] == ["tok-1"]
    assert server.ok("DELETE", f"/v3/users/{bob}/push/apns/tok-1")["token"] == []
    assert server.ok("DELETE", f"/v3/users/{bob}/push/gcm")["token"] == ["fcm-1", "fcm-2"]
    assert server.ok("DELETE", f"/v3/users/{bob}/push")["token"] == ["hms-1"]
    assert server.ok("GET", f"/v3/users/{bob}/push/huawei")["tokens"] == []

    for i in range(22):
        register(server, carol, f"many-{i:02}", "gcm")
    kept = server.ok("GET", f"/v3/users/{carol}/push/gcm")["tokens"]
    assert len(kept) == 20 and kept[-1] == "many-21" and "many-00" not in kept

    # The user themselves, with a session.
    session = server.session(bob)
    assert server.ok("POST", f"/v3/users/{bob}/push/apns", session=session, json={"apns_device_token": "mine"})["token"] == "mine"
    assert server.request("GET", f"/v3/users/{carol}/push/apns", token=None, session=session).status_code == 403
    assert_error(server.request("POST", f"/v3/users/{bob}/push/telegraph", json={"token": "x"}), 400, 400100, "token_type")
    assert_error(server.request("POST", f"/v3/users/{bob}/push/apns", json={}), 400, 400111, "apns_device_token")
    assert_error(server.request("POST", f"/v3/users/{bob}/push/apns", json={"token": "a b"}), 400, 400100, "device token")
    assert server.request("GET", "/v3/users/nobody-at-all/push/apns").status_code == 404


def test_push_preferences(server):
    bob, alice = server.user("bob"), server.user("alice")
    url = server.channel([alice, bob])["channel_url"]
    defaults = server.ok("GET", f"/v3/users/{bob}/push_preference")
    assert defaults == {"push_trigger_option": "all", "do_not_disturb": False, "start_hour": 0, "start_min": 0,
                        "end_hour": 0, "end_min": 0, "timezone": "UTC", "snooze_enabled": False,
                        "snooze_start_ts": 0, "snooze_end_ts": 0}
    changed = server.ok("PUT", f"/v3/users/{bob}/push_preference", json={
        "do_not_disturb": True, "start_hour": 22, "start_min": 30, "end_hour": 7, "end_min": 15, "timezone": "Europe/Paris"})
    assert changed["do_not_disturb"] is True and changed["start_min"] == 30 and changed["timezone"] == "Europe/Paris"
    assert changed["push_trigger_option"] == "all"
    assert server.ok("GET", f"/v3/users/{bob}/push_preference") == changed
    assert server.ok("GET", f"/v3/users/{bob}/push_preference/{url}") == {"push_trigger_option": "default"}
    assert server.ok("PUT", f"/v3/users/{bob}/push_preference/{url}",
                     json={"push_trigger_option": "mention_only"}) == {"push_trigger_option": "mention_only"}
    assert server.ok("GET", f"/v3/users/{bob}/push_preference/{url}") == {"push_trigger_option": "mention_only"}

    for body, mentions in [
        ({"push_trigger_option": "sometimes"}, "push_trigger_option"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"start_hour": 24}, "start_hour"),
        ({"snooze_enabled": True, "snooze_start_ts": 10, "snooze_end_ts": 5}, "snooze_end_ts"),
    ]:
        assert_error(server.request("PUT", f"/v3/users/{bob}/push_preference", json=body), 400, 400100, mentions)
    assert_error(server.request("PUT", f"/v3/users/{bob}/push_preference/{url}", json={}), 400, 400111, "push_trigger_option")
    outsider = server.user("outsider")
    assert server.request("GET", f"/v3/users/{outsider}/push_preference/{url}").status_code == 403
    session = server.session(alice)
    assert server.request("PUT", f"/v3/users/{bob}/push_preference", token=None, session=session,
                          json={"push_trigger_option": "off"}).status_code == 403


@pytest.mark.parametrize("args, mentions", [
    (["--push-gateway-url", "ftp://example.test/x"], "--push-gateway-url: 'ftp://example.test/x' is not an http:// or https:// URL"),
    (["--push-gateway-url", "http://127.0.0.1:9/p", "--translator-url", "http://127.0.0.1:9/p"], "the same URL"),
    (["--translator-timeout-seconds", "0"], "--translator-timeout-seconds"),
])
def test_bad_configuration_stops_the_start(tmp_path, args, mentions):
    assert_start_refused(tmp_path, args, mentions)


def test_a_deleted_users_tokens_and_preferences_go_with_them(server):
    """A user made again under a deleted user's id starts without that user's devices and
    preferences (pushes for the new user must not reach the old one's phone)."""
    bob, alice = server.user("bob"), server.user("alice")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    server.ok("PUT", f"/v3/users/{bob}/push_preference", json={"push_trigger_option": "off"})
    server.ok("PUT", f"/v3/users/{bob}/push_preference/{url}", json={"push_trigger_option": "mention_only"})
    server.ok("DELETE", f"/v3/users/{bob}")
    server.ok("POST", "/v3/users", json={"user_id": bob, "nickname": "bob again"})
    assert server.ok("GET", f"/v3/users/{bob}/push/apns")["tokens"] == []
    assert server.ok("GET", f"/v3/users/{bob}/push_preference")["push_trigger_option"] == "all"
    server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [bob]})
    assert server.ok("GET", f"/v3/users/{bob}/push_preference/{url}") == {"push_trigger_option": "default"}


def test_only_the_first_ten_distinct_mentioned_members_are_mentioned(fresh_server, receivers):
    """Twelve members named (one twice): the first ten distinct are the message's mentioned
    users, everywhere: the message, the `mention` event, unread mention counts and the push."""
    gateway = receivers()
    server = push_server(fresh_server, gateway)
    alice = server.user("alice")
    named = [server.user(f"m{i}") for i in range(12)]
    url = server.channel([alice, *named])["channel_url"]
    for user in named:
        register(server, user, f"{user}-phone")
        server.ok("PUT", f"/v3/users/{user}/push_preference", json={"push_trigger_option": "mention_only"})
    first_ten = named[:10]
    # The tenth and the eleventh named watch their streams (and are not pushed: they are online).
    tenth, eleventh = EventReader(server, named[9]), EventReader(server, named[10])
    try:
        wait_online(server, named[9], True)
        wait_online(server, named[10], True)
        sent = server.send(url, alice, "all of you", mentioned_user_ids=[named[0], named[1], named[0], *named[2:]])
        assert [u["user_id"] for u in sent["mentioned_users"]] == first_ten
        got = tenth.until("mention")[0]["json"]
        assert got["message"]["message_id"] == sent["message_id"]
        _, seen = eleventh.until("message_received")
        assert "mention" not in [e.get("event") for e in seen + eleventh.drain(1.0)]
    finally:
        tenth.close()
        eleventh.close()
    [call] = gateway.wait_for(1, "push")
    assert recipients([call]) == sorted(first_ten[:9])
    assert all(r["mentioned"] for r in call["recipients"])
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages/{sent['message_id']}")
    assert [u["user_id"] for u in listed["mentioned_users"]] == first_ten
    for user in named:
        c = server.ok("GET", f"/v3/users/{user}/my_group_channels", params={"channel_urls": url})["channels"][0]
        assert c["unread_mention_count"] == (1 if user in first_ten else 0), user
    assert len(quiet(gateway)) == 1


def test_a_member_whose_stream_has_just_closed_is_notified(fresh_server, receivers):
    """A stream the client closes ends at once, not at the server's next write to it (a
    heartbeat a minute away here): a message sent right after notifies its user."""
    gateway = receivers()
    server = push_server(fresh_server, gateway, "--heartbeat-seconds", "60")
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    for attempt in range(3):
        stream = EventReader(server, bob)
        stream.until("connected")
        wait_online(server, bob, True)
        stream.close()
        sent = server.send(url, alice, f"right after {attempt}")
        call = gateway.wait_for(attempt + 1, "push", timeout=5)[attempt]
        assert call["message_id"] == sent["message_id"] and recipients([call]) == [bob]
        deadline = time.monotonic() + 1
        while server.ok("GET", f"/v3/users/{bob}")["is_online"]:
            assert time.monotonic() < deadline, "bob still online a second after his stream closed"
            time.sleep(0.02)


def test_an_event_that_reached_its_member_is_not_pushed(fresh_server, receivers):
    """Online at the send, the event read, the stream closed soon after: no push."""
    gateway = receivers()
    server = push_server(fresh_server, gateway, "--heartbeat-seconds", "60")
    alice, bob = server.user("alice"), server.user("bob")
    url = server.channel([alice, bob])["channel_url"]
    register(server, bob, "bob-phone")
    stream = EventReader(server, bob)
    try:
        wait_online(server, bob, True)
        server.send(url, alice, "read at once")
        stream.until("message_received")
    finally:
        stream.close()
    wait_online(server, bob, False)
    assert quiet(gateway, 2) == []
    server.send(url, alice, "while away")
    assert recipients(gateway.wait_for(1, "push")) == [bob]


@pytest.mark.postgres_only
def test_a_stream_closed_on_another_server_is_notified_at_once(fresh_server, receivers):
    """Two servers on one database: bob's stream on one closes, alice sends on the other at
    once; the sending server learns he is offline and notifies him."""
    gateway = receivers()
    here = push_server(fresh_server, gateway, "--heartbeat-seconds", "60")
    there = push_server(fresh_server, gateway, "--heartbeat-seconds", "60")
    alice, bob = here.user("alice"), here.user("bob")
    url = here.channel([alice, bob])["channel_url"]
    register(here, bob, "bob-phone")
    stream = EventReader(there, bob)
    stream.until("connected")
    wait_online(here, bob, True)
    stream.close()
    sent = here.send(url, alice, "right after")
    [call] = gateway.wait_for(1, "push", timeout=5)
    assert call["message_id"] == sent["message_id"] and recipients([call]) == [bob]


def test_copied_and_admin_messages_notify_as_a_send_does(fresh_server, receivers):
    gateway, hooks = receivers(), receivers()
    server = push_server(fresh_server, gateway, "--webhook-urls", hooks.url, "--webhook-categories", "message_sent")
    alice, bob, carol = server.user("alice", nickname="Alice"), server.user("bob"), server.user("carol")
    source = server.channel([alice, bob, carol])["channel_url"]
    dest = server.channel([alice, bob, carol], name="Dest")["channel_url"]
    register(server, bob, "bob-phone")
    original = server.send(source, alice, "worth copying", mentioned_user_ids=[bob, carol])
    gateway.wait_for(1, "push")
    watching = EventReader(server, carol)
    try:
        wait_online(server, carol, True)
        copied = server.ok("POST", f"/v3/group_channels/{source}/messages/{original['message_id']}/copy",
                           json={"dest_channel_url": dest})
        mention = watching.until("mention")[0]["json"]
    finally:
        watching.close()
    assert mention["channel_url"] == dest and mention["message"]["message_id"] == copied["message_id"]
    admin = server.ok("POST", f"/v3/group_channels/{dest}/messages", json={"message_type": "ADMM", "message": "notice"})
    calls = {c["message_id"]: c for c in gateway.wait_for(3, "push")[1:]}
    assert set(calls) == {copied["message_id"], admin["message_id"]}
    copy_call, admin_call = calls[copied["message_id"]], calls[admin["message_id"]]
    assert copy_call["channel_url"] == dest and copy_call["sender"] == {"user_id": alice, "nickname": "Alice"}
    assert recipients([copy_call]) == [bob] and copy_call["recipients"][0]["mentioned"] is True
    assert copy_call["recipients"][0]["body"] == "Alice: worth copying"
    assert recipients([admin_call]) == [bob] and "sender" not in admin_call
    sent = {h["message"]["message_id"]: h for h in hooks.wait_for(3, "message_sent")}
    assert set(sent) == {original["message_id"], copied["message_id"], admin["message_id"]}
    assert sent[copied["message_id"]]["channel_url"] == dest and sent[admin["message_id"]]["channel_url"] == dest
