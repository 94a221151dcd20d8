"""The server's application settings as the library meets them (docs/PROTOCOL.md §6.5): a
member who joins with chat history off sees, in a message collection and in the cache, only
what the server lists for them; a join beyond the channel limit fails with the server's
code and leaves the cache alone. (The guides' parameters Parley refuses by name:
test_push_and_translation.py.)"""
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


