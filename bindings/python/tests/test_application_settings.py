"""The server's application settings as the library meets them (docs/PROTOCOL.md §6.5): a
member who joins with chat history off sees, in a message collection and in the cache, only
what the server lists for them; a join beyond the channel limit fails with the server's
code and leaves the cache alone. And the reference's translation and push parameters are
refused by name (docs/C-API.md, "Not supported")."""
from __future__ import annotations

from pathlib import Path
import pytest

import parley
from conftest import Admin, RunningServer, listing_for
from test_engine import connected, poll_until

TIMEOUT = 10


def test_with_chat_history_off_a_new_member_sees_what_the_server_lists_for_them(server: RunningServer, admin: Admin,
                                                                               tmp_path: Path) -> None:
    assert admin.call("PUT", "/v3/applications/settings", {"chat_history": False})["chat_history"] is False
    admin.user("alice")
    carol = admin.user("carol")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "is_public": True, "channel_url": "history"})["channel_url"]
    admin.send(url, "alice", "before carol one")
    admin.send(url, "alice", "before carol two")
    with connected(server.url, tmp_path / "cache", "carol", carol) as (client, recorder):
        client.join_channel(channel_url=url).result(TIMEOUT)
        collection = client.message_collection(url)
        with collection:
            initial, remote = collection.start()
            initial.result(TIMEOUT)
            remote.result(TIMEOUT)
            assert collection.messages == [] and listing_for(server.url, carol, url) == []
            admin.send(url, "alice", "after carol")
            poll_until(lambda: [m["message"] for m in collection.messages] == ["after carol"], timeout=TIMEOUT)
            truth = listing_for(server.url, carol, url)
            assert [m["message_id"] for m in collection.messages] == [m["message_id"] for m in truth]
            poll_until(lambda: [m["message_id"] for m in client.cached_messages(url)] == [m["message_id"] for m in truth],
                       timeout=TIMEOUT)
            cached = client.cached_channel(url)
            assert cached is not None and cached["unread_message_count"] == 1
            assert cached["last_message"]["message"] == "after carol"
    # alice, who was there before, still sees everything.
    assert [m["message"] for m in listing_for(server.url, admin.token("alice"), url)] == [
        "before carol one", "before carol two", "after carol"]


def test_a_join_beyond_the_channel_limit_fails_with_the_servers_code(server: RunningServer, admin: Admin,
                                                                     tmp_path: Path) -> None:
    admin.call("PUT", "/v3/applications/settings", {"max_channels_per_user": 1})
    admin.user("alice")
    dave = admin.user("dave")
    admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "dave"], "channel_url": "first"})
    admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "is_public": True, "channel_url": "second"})
    with connected(server.url, tmp_path / "cache", "dave", dave) as (client, recorder):
        with pytest.raises(parley.ParleyError) as refused:
            client.join_channel(channel_url="second").result(TIMEOUT)
        assert isinstance(refused.value, parley.Forbidden)
        assert refused.value.http_status == 403 and refused.value.server_code == 900070
        assert not refused.value.retryable
        assert client.cached_channel("second") is None
        client.leave_channel(channel_url="first").result(TIMEOUT)
        client.join_channel(channel_url="second").result(TIMEOUT)
        poll_until(lambda: client.cached_channel("second") is not None, timeout=TIMEOUT)


def test_translation_and_push_parameters_are_refused_by_name(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    erin = admin.user("erin")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["erin"], "channel_url": "ported"})["channel_url"]
    with connected(server.url, tmp_path / "cache", "erin", erin) as (client, recorder):
        cases = [
            ({"target_languages": ["en"]}, "target_languages: message translation is not supported"),
            ({"push_notification_delivery_option": "suppress"},
             "push_notification_delivery_option: push notifications is not supported"),
        ]
        for params, expected in cases:
            with pytest.raises(parley.InvalidArgument) as refused:
                client.send_user_message(url, "hallo", **params)  # type: ignore[call-arg]
            assert expected in refused.value.message
        sent = client.send_user_message(url, "plain")[1].result(TIMEOUT)
        with pytest.raises(parley.InvalidArgument) as refused:
            client.perform("update_message", {"channel_url": url, "message_id": sent["message_id"], "message": "x",
                                                   "translation_target_languages": ["fr"]}).result(TIMEOUT)
        assert "translation_target_languages: message translation is not supported" in refused.value.message
        # Nothing reached the server: the message is unchanged and nothing else was stored.
        assert [m["message"] for m in listing_for(server.url, erin, url)] == ["plain"]
