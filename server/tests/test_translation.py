"""Message translation (docs/PROTOCOL.md §7.8, docs/SERVER.md "Translation"): the real server
asks a real HTTP translator that each test starts on a loopback port, and stores the
translations on the message, which events, reads and changelogs then carry."""
import time

from conftest import EventReader, assert_error
from hook_receiver import DELIVERIES, hook_server, signature


def translate(body):
    """The test translator: "[fr] text" for French, and so on."""
    return {"translations": {lang: f"[{lang}] {body['text']}" for lang in body["target_languages"]}}


def translating_server(fresh_server, translator, *extra):
    return hook_server(fresh_server, "--translator-url", translator.url, *extra)


def members_and_channel(server):
    alice, bob = server.user("alice"), server.user("bob")
    return alice, bob, server.channel([alice, bob])["channel_url"]


def wait_for_translations(server, url, message_id, count, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        m = server.ok("GET", f"/v3/group_channels/{url}/messages/{message_id}")
        if len(m["translations"]) >= count:
            return m
        assert time.monotonic() < deadline, m
        time.sleep(0.05)


def test_a_send_with_target_languages_is_translated_and_announced(fresh_server, receivers):
    translator = receivers(reply=translate)
    server = translating_server(fresh_server, translator)
    alice, bob, url = members_and_channel(server)
    stream = EventReader(server, bob)
    try:
        sent = server.send(url, alice, "good morning", target_languages=["fr", "de", "fr"])
        assert sent["translations"] == {}
        event, _ = stream.until("message_updated", timeout=10)
    finally:
        stream.close()
    message = event["json"]["message"]
    assert message["message_id"] == sent["message_id"]
    assert message["translations"] == {"de": "[de] good morning", "fr": "[fr] good morning"}
    assert message["updated_at"] == sent["updated_at"]
    [call] = translator.bodies("translation")
    assert call["text"] == "good morning" and call["target_languages"] == ["fr", "de"]
    assert call["message_id"] == sent["message_id"] and call["channel_url"] == url
    raw = translator.calls[0]
    assert raw["headers"]["X-Parley-Signature"] == signature(raw["raw"])

    # Reads, lists and changelogs carry them.
    got = server.ok("GET", f"/v3/group_channels/{url}/messages/{sent['message_id']}")
    assert got["translations"] == message["translations"]
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
    assert listed["messages"][0]["translations"]["fr"] == "[fr] good morning"
    changes = server.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", params={"change_ts": sent["created_at"] - 1})
    assert [m["translations"] for m in changes["updated"]] == [message["translations"]]

    # An edit of the text drops the translations of the old one.
    edited = server.ok("PUT", f"/v3/group_channels/{url}/messages/{sent['message_id']}",
                       json={"message_type": "MESG", "message": "good evening"})
    assert edited["translations"] == {}


def test_translate_message_answers_with_the_translations(fresh_server, receivers):
    translator = receivers(reply=translate)
    server = translating_server(fresh_server, translator)
    alice, bob, url = members_and_channel(server)
    sent = server.send(url, alice, "thank you")
    session = server.session(bob)
    answer = server.ok("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                       token=None, session=session, json={"target_langs": ["es"]})
    assert answer["message_id"] == sent["message_id"] and answer["translations"] == {"es": "[es] thank you"}
    # More languages add to those stored; the SDK's name of the field is taken too.
    answer = server.ok("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                       json={"target_languages": ["ko"]})
    assert answer["translations"] == {"es": "[es] thank you", "ko": "[ko] thank you"}
    # Without languages: the caller's preferred ones.
    server.ok("PUT", f"/v3/users/{bob}", json={"preferred_languages": ["ja"]})
    answer = server.ok("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                       token=None, session=session, json={})
    assert answer["translations"]["ja"] == "[ja] thank you"
    assert [b["target_languages"] for b in translator.bodies("translation")] == [["es"], ["ko"], ["ja"]]

    outsider = server.session(server.user("outsider"))
    assert server.request("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                          token=None, session=outsider, json={"target_langs": ["es"]}).status_code == 403
    carol = server.user("carol")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                                token=None, session=server.session(carol), json={}), 403)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages/999999/translation",
                                json={"target_langs": ["es"]}), 404)
    alice_session = server.session(alice)
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                                token=None, session=alice_session, json={}), 400, 400111, "target_langs")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                                json={"target_langs": ["not a tag"]}), 400, 400100, "target_langs")


def test_translator_failures_are_reported(fresh_server, receivers):
    slow = receivers(reply=translate, delay=3)
    server = translating_server(fresh_server, slow, "--translator-timeout-seconds", "0.5")
    alice, _, url = members_and_channel(server)
    sent = server.send(url, alice, "hello")
    path = f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation"
    started = time.monotonic()
    assert_error(server.request("POST", path, json={"target_langs": ["fr"]}), 504, 500904, "within 0.5 s")
    assert time.monotonic() - started < 2.5
    slow.stop()
    assert_error(server.request("POST", path, json={"target_langs": ["fr"]}), 502, 500903, "could not be reached")
    slow.delay = 0
    slow.answers = [500]
    slow.start()
    assert_error(server.request("POST", path, json={"target_langs": ["fr"]}), 502, 500903, "answered 500")
    slow.reply = lambda body: {"translated": "nope"}
    assert_error(server.request("POST", path, json={"target_langs": ["fr"]}), 502, 500903, "not {\"translations\"")
    assert server.ok("GET", f"/v3/group_channels/{url}/messages/{sent['message_id']}")["translations"] == {}


def test_a_slow_or_failing_translator_does_not_hold_sends(fresh_server, receivers):
    translator = receivers(reply=translate, delay=2, answers=[500])
    server = translating_server(fresh_server, translator, "--translator-timeout-seconds", "5")
    alice, _, url = members_and_channel(server)
    durations = []
    sent = []
    for i in range(5):
        started = time.monotonic()
        sent.append(server.send(url, alice, f"text {i}", target_languages=["fr"]))
        durations.append(time.monotonic() - started)
    assert max(durations) < 1.5, durations
    # The first call failed (500) and was tried again; all arrive, in order.
    for i, m in enumerate(sent):
        got = wait_for_translations(server, url, m["message_id"], 1, timeout=40)
        assert got["translations"] == {"fr": f"[fr] text {i}"}
    # The worker stores the translations, then records the call delivered.
    deadline = time.monotonic() + 10
    while any(e["status"] != "delivered" for e in server.ok("GET", DELIVERIES, params={"limit": 10})["deliveries"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    log = server.ok("GET", DELIVERIES, params={"limit": 10})["deliveries"]
    assert {e["category"] for e in log} == {"translation"} and len(log) == 5
    # Every attempt the log counts reached the translator, and the one answered 500 was tried
    # again. (A call that a loaded machine holds past the timeout is tried again too, so the
    # attempts are compared with the calls rather than fixed.)
    assert [c["status"] for c in translator.calls].count(500) == 1
    assert max(e["attempts"] for e in log) >= 2
    assert sum(e["attempts"] for e in log) == len(translator.calls)


def test_without_a_translator_translation_is_refused(server):
    alice, _, url = members_and_channel(server)
    r = server.request("POST", f"/v3/group_channels/{url}/messages",
                       json={"message_type": "MESG", "user_id": alice, "message": "x", "target_languages": ["fr"]})
    assert_error(r, 400, 400920, "not configured")
    sent = server.send(url, alice, "kept")
    r = server.request("POST", f"/v3/group_channels/{url}/messages/{sent['message_id']}/translation",
                       json={"target_langs": ["fr"]})
    assert_error(r, 400, 400920, "not configured")
    # An empty list asks for nothing.
    assert server.send(url, alice, "plain", target_languages=[])["translations"] == {}
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages", params={"message_ts": 0, "next_limit": 10, "prev_limit": 0})
    assert [m["message"] for m in listed["messages"]] == ["kept", "plain"]


def test_file_messages_are_not_translated(fresh_server, receivers):
    translator = receivers(reply=translate)
    server = translating_server(fresh_server, translator)
    alice, _, url = members_and_channel(server)
    r = server.request("POST", f"/v3/group_channels/{url}/messages", json={
        "message_type": "FILE", "user_id": alice, "url": "https://example.org/a.png", "target_languages": ["fr"]})
    assert_error(r, 400, 400100, "not file messages")
