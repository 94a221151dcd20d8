"""Push notifications and translation through the library (docs/C-API.md, "Push
notifications and translation"): the token and preference operations, the send options and
translate_message against a real server whose push gateway and translator are real HTTP
receivers this module starts; and the guides' parameters Parley still refuses, by name."""
from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import parley
from conftest import Admin, RunningServer, server_database, start_server
from test_engine import connected, poll_until
from tests_support.processes import stop_process

TIMEOUT = 10


class Receiver:
    """Records every POST's JSON body; `reply(body)` gives the JSON answer (default none)."""

    def __init__(self, reply: Optional[Callable[[Dict[str, Any]], Any]] = None) -> None:
        self.bodies: List[Dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                receiver.bodies.append(body)
                answer = json.dumps(reply(body)).encode() if reply else b""
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def translate(body: Dict[str, Any]) -> Dict[str, Any]:
    return {"translations": {lang: f"[{lang}] {body['text']}" for lang in body["target_languages"]}}


@pytest.fixture
def hooked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple]:
    """A server with a push gateway and a translator, each a Receiver; and its Admin."""
    gateway, translator = Receiver(), Receiver(reply=translate)
    monkeypatch.setenv("PARLEY_PUSH_GATEWAY_URL", gateway.url)
    monkeypatch.setenv("PARLEY_TRANSLATOR_URL", translator.url)
    monkeypatch.setenv("PARLEY_WEBHOOK_RETRY_MAX_SECONDS", "1")
    # A closed stream is noticed at the next keep-alive: soon, so that a member goes offline soon.
    monkeypatch.setenv("PARLEY_HEARTBEAT_SECONDS", "0.5")
    running = start_server(server_database(tmp_path, "hooked.sqlite"), secrets.token_hex(16))
    try:
        yield running, Admin(running), gateway, translator
    finally:
        stop_process(running.process)
        gateway.close()
        translator.close()


def test_tokens_and_preferences_decide_the_push_of_an_offline_member(hooked: tuple, tmp_path: Path) -> None:
    server, admin, gateway, _ = hooked
    admin.user("alice")
    bob = admin.user("bob")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "trip", "name": "Trip"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "bob", bob) as (client, _):
        answer = client.register_push_token(token_type="apns", token="bob-iphone").result(TIMEOUT)
        assert answer["token"] == "bob-iphone" and answer["type"] == "APNS"
        client.register_push_token(token_type="fcm", token="bob-pixel").result(TIMEOUT)
        assert client.list_push_tokens(token_type="gcm").result(TIMEOUT)["tokens"] == ["bob-pixel"]
        assert client.unregister_push_token(token_type="gcm", token="bob-pixel").result(TIMEOUT)["token"] == ["bob-pixel"]
        preference = client.set_push_preference(push_trigger_option="mention_only", timezone="Europe/Paris").result(TIMEOUT)
        assert preference["push_trigger_option"] == "mention_only" and preference["timezone"] == "Europe/Paris"
        assert client.get_push_preference().result(TIMEOUT) == preference
        assert client.set_channel_push_preference(channel_url=url, push_trigger_option="all").result(TIMEOUT) == \
            {"push_trigger_option": "all"}
        assert client.get_channel_push_preference(channel_url=url).result(TIMEOUT)["push_trigger_option"] == "all"
        # Connected, bob has an event stream open: he is online and not notified.
        admin.send(url, "alice", "while bob is here")
        time.sleep(1)
        assert gateway.bodies == []
    poll_until(lambda: admin.call("GET", "/v3/users/bob")["is_online"] is False, timeout=TIMEOUT)
    admin.send(url, "alice", "bob is away")
    poll_until(lambda: len(gateway.bodies) == 1, timeout=TIMEOUT)
    [recipient] = gateway.bodies[0]["recipients"]
    assert recipient["user_id"] == "bob" and recipient["tokens"] == [{"type": "APNS", "token": "bob-iphone"}]
    assert recipient["body"] == "Alice: bob is away" and recipient["badge"] == 2
    with connected(server.url, tmp_path / "cache2", "bob", bob) as (client, _):
        assert client.unregister_all_push_tokens().result(TIMEOUT)["token"] == ["bob-iphone"]


def test_sends_with_push_options_and_translations(hooked: tuple, tmp_path: Path) -> None:
    server, admin, gateway, translator = hooked
    alice = admin.user("alice")
    admin.user("bob")
    admin.call("POST", "/v3/users/bob/push/apns", {"apns_device_token": "bob-iphone"})
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "talk"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "alice", alice) as (client, _):
        _, quiet = client.send_user_message(url, "no push", push_notification_delivery_option="suppress")
        quiet.result(TIMEOUT)
        _, critical = client.send_user_message(url, "fire", apple_critical_alert_options={"name": "alarm.caf", "volume": 0.5})
        critical.result(TIMEOUT)
        poll_until(lambda: len(gateway.bodies) == 1, timeout=TIMEOUT)
        assert gateway.bodies[0]["apple_critical_alert_options"] == {"name": "alarm.caf", "volume": 0.5}

        _, sent = client.send_user_message(url, "good morning", target_languages=["fr", "de"])
        message = sent.result(TIMEOUT)
        poll_until(lambda: [m.get("translations") for m in client.cached_messages(url)
                            if m["message_id"] == message["message_id"]] == [{"de": "[de] good morning", "fr": "[fr] good morning"}],
                   timeout=TIMEOUT)
        translated = client.translate_message(channel_url=url, message_id=message["message_id"],
                                              target_languages=["es"]).result(TIMEOUT)
        assert translated["translations"]["es"] == "[es] good morning"
        assert translated["translations"]["fr"] == "[fr] good morning"
        cached = [m for m in client.cached_messages(url) if m["message_id"] == message["message_id"]]
        assert cached[0]["translations"]["es"] == "[es] good morning"
        # Without languages: the user's preferred ones.
        client.update_current_user(preferred_languages=["it"]).result(TIMEOUT)
        assert "it" in client.translate_message(channel_url=url, message_id=message["message_id"]).result(TIMEOUT)["translations"]
    assert [b["target_languages"] for b in translator.bodies] == [["fr", "de"], ["es"], ["it"]]


def test_without_a_translator_the_server_refuses(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice = admin.user("alice")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "channel_url": "solo"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "alice", alice) as (client, _):
        message = client.send_user_message(url, "plain")[1].result(TIMEOUT)
        with pytest.raises(parley.ParleyError) as refused:
            client.translate_message(channel_url=url, message_id=message["message_id"], target_languages=["fr"]).result(TIMEOUT)
        assert refused.value.http_status == 400 and refused.value.server_code == 400920
        assert "not configured" in refused.value.message
        _, failed = client.send_user_message(url, "translate me", target_languages=["fr"])
        with pytest.raises(parley.ParleyError) as send_refused:
            failed.result(TIMEOUT)
        assert send_refused.value.server_code == 400920 and not send_refused.value.retryable


def test_what_is_still_unsupported_is_refused_by_name(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice = admin.user("alice")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "channel_url": "ported"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "alice", alice) as (client, _):
        cases = [
            ({"translation_target_languages": ["fr"]}, "translation_target_languages: not this spelling: give the languages as target_languages"),
            ({"push_option": "suppress"}, "push_option: the older SDK's push option is not supported"),
            ({"push_notification_delivery_option": "never"}, "push_notification_delivery_option: expected default or suppress"),
            ({"apple_critical_alert_options": {"name": "x", "volume": 3}}, "volume"),
            ({"target_languages": "fr"}, "target_languages"),
        ]
        for params, expected in cases:
            with pytest.raises(parley.InvalidArgument) as refused:
                client.send_user_message(url, "hallo", **params)  # type: ignore[arg-type]
            assert expected in refused.value.message
        with pytest.raises(parley.InvalidArgument) as file_refused:
            client.send_file_message(url, url="https://example.org/a.png", target_languages=["fr"])  # type: ignore[call-arg]
        assert "target_languages: message translation applies to user messages" in file_refused.value.message
        sent = client.send_user_message(url, "plain")[1].result(TIMEOUT)
        with pytest.raises(parley.InvalidArgument) as not_a_send:
            client.perform("update_message", {"channel_url": url, "message_id": sent["message_id"], "message": "x",
                                              "push_notification_delivery_option": "suppress"}).result(TIMEOUT)
        assert "push_notification_delivery_option: push notifications parameters apply to sends only" in not_a_send.value.message
        assert client.cached_messages(url)[0]["message"] == "plain"
        assert len(client.cached_messages(url)) == 1
