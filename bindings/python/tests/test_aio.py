"""The asyncio client's habits against the real server: sends are coroutines returning a
PendingSend (the stored pending message at once, the server's message awaited), the message
view sends too, and connection changes and events are async iterators that end when the
client closes."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, List, Tuple, TypeVar

import pytest

import parley
from conftest import Admin, RunningServer
from parley import ConnectionEventKind as Kind
from parley import EventCategory, MessageChangeKind, SendingStatus

TIMEOUT = 20.0
T = TypeVar("T")


def setup_pair(admin: Admin) -> Tuple[str, str]:
    alice = admin.user("alice")
    admin.user("bob")
    admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "channel_url": "pair"})
    return alice, "pair"


def server_messages(admin: Admin, channel_url: str) -> List[Any]:
    return admin.call("GET", f"/v3/group_channels/{channel_url}/messages", message_ts=int(time.time() * 1000) + 60_000,
                      prev_limit=200, next_limit=0)["messages"]


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), 3 * TIMEOUT))


async def open_client(server: RunningServer, tmp_path: Path, token: str) -> parley.AsyncClient:
    client = parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache"))
    await client.connect("alice", token)
    while client.connection_state != "open":
        await asyncio.sleep(0.02)
    return client


def test_a_send_returns_the_pending_message_then_the_servers(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, url = setup_pair(admin)

    async def scenario() -> None:
        async with await open_client(server, tmp_path, token) as client:
            sent = await client.send_user_message(url, "hello", custom_type="greeting")
            assert isinstance(sent, parley.PendingSend)
            assert sent.pending["sending_status"] == "pending" and sent.pending["message"] == "hello"
            assert sent.req_id and sent.req_id == sent.pending["req_id"]
            assert not sent.delivered.done()  # nothing ran between the store and here
            assert [m["req_id"] for m in client.cached_messages(url)] == [sent.req_id]
            message = await asyncio.wait_for(sent.delivered, TIMEOUT)
            listed = [m for m in server_messages(admin, url) if m["message_id"] == message["message_id"]]
            assert len(listed) == 1
            assert listed[0]["message"] == message["message"] == "hello"
            assert listed[0]["req_id"] == message["req_id"] == sent.req_id
            assert message["custom_type"] == "greeting"

            # Refused (muted): the failure is what `delivered` raises; a resend is a Send.
            admin.call("POST", f"/v3/group_channels/{url}/mute", {"user_id": "alice", "seconds": 60})
            refused = await client.send_user_message(url, "muted")
            with pytest.raises(parley.ParleyError):
                await asyncio.wait_for(refused.delivered, TIMEOUT)
            admin.call("DELETE", f"/v3/group_channels/{url}/mute/alice")
            resent = await client.resend_message(refused.req_id)
            assert isinstance(resent, parley.Send) and not isinstance(resent, parley.PendingSend)
            assert resent.req_id == refused.req_id
            again = await asyncio.wait_for(resent.delivered, TIMEOUT)
            assert again["req_id"] == refused.req_id and again["message_id"] > message["message_id"]
            assert [m["message_id"] for m in server_messages(admin, url)] == [message["message_id"], again["message_id"]]

            # A send the library refuses raises at once, from the first await.
            with pytest.raises(parley.InvalidArgument):
                await client.send_user_message(url, "x", colour="red")  # type: ignore[call-arg]
            # A failure nobody awaits is not "never retrieved": the events report it.
            admin.call("POST", f"/v3/group_channels/{url}/mute", {"user_id": "alice", "seconds": 60})
            ignored = await client.send_user_message(url, "nobody waits for me")
            while not ignored.delivered.done():
                await asyncio.sleep(0.02)

    loop_errors: List[Any] = []

    async def watched() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
        await scenario()

    run(watched)
    import gc
    gc.collect()
    assert loop_errors == []


def test_file_send_through_the_client(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, url = setup_pair(admin)
    path = tmp_path / "note.txt"
    path.write_bytes(b"parley" * 1000)

    async def scenario() -> None:
        async with await open_client(server, tmp_path, token) as client:
            progress: List[Tuple[str, int, int]] = []
            sent = await client.send_file_message(url, progress=lambda *report: progress.append(report),
                                                  file_path=str(path), file_type="text/plain")
            assert sent.pending["type"] == "FILE" and sent.pending["sending_status"] == "pending"
            message = await asyncio.wait_for(sent.delivered, TIMEOUT)
            assert message["file"]["size"] == 6000 and message["req_id"] == sent.req_id
            assert progress and {req_id for req_id, _, _ in progress} == {sent.req_id}
            assert progress[-1][1] == progress[-1][2] > 0  # the whole upload (the multipart body)

    run(scenario)


def test_the_message_view_sends(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, url = setup_pair(admin)
    admin.send(url, "bob", "before")

    async def scenario() -> None:
        async with await open_client(server, tmp_path, token) as client:
            with client.message_collection(url) as view:
                assert [m["message"] for m in await view.start()] == ["before"]
                sent = await view.send_user_message("from the view")
                statuses: List[Tuple[MessageChangeKind, SendingStatus]] = []
                async for change in view.changes():
                    if any(m.get("req_id") == sent.req_id for m in change.messages):
                        statuses.append((change.kind, change.context.sending_status))
                    if statuses[-1:] == [(MessageChangeKind.UPDATED, SendingStatus.SUCCEEDED)]:
                        break
                assert statuses[0] == (MessageChangeKind.ADDED, SendingStatus.PENDING)
                message = await sent.delivered
                assert [m["message"] for m in view.messages] == ["before", "from the view"]
                assert view.messages[-1]["message_id"] == message["message_id"] and not view.pending_messages

                admin.call("POST", f"/v3/group_channels/{url}/mute", {"user_id": "alice", "seconds": 60})
                refused = await view.send_user_message("muted")
                with pytest.raises(parley.ParleyError):
                    await refused.delivered
                while not view.failed_messages:
                    await asyncio.sleep(0.02)
                assert view.remove_failed_messages() == [refused.req_id]
                admin.call("DELETE", f"/v3/group_channels/{url}/mute/alice")
                hosted = await view.send_file_message(url=server.url + "/files/elsewhere.png", file_name="elsewhere.png")
                assert (await hosted.delivered)["type"] == "FILE"

    run(scenario)


def test_connection_events_iterate_in_order_and_end_at_close(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, _ = setup_pair(admin)

    async def scenario() -> None:
        client = parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache"))
        handled: List[str] = []
        client.set_connection_handler(lambda event, error: handled.append(event))
        first, second = client.connection_events(), client.connection_events()
        await client.connect("alice", token)
        # Nobody iterates yet: the events wait in the queues.
        while "connected" not in handled:
            await asyncio.sleep(0.02)
        await client.disconnect()
        await client.close()
        seen = [(event.kind, event.error) async for event in first]
        assert seen == [(Kind.CONNECTING, None), (Kind.CONNECTED, None), (Kind.DISCONNECTED, None)]
        assert [event.kind async for event in second] == [kind for kind, _ in seen]
        assert handled == ["connecting", "connected", "disconnected"]  # the handler's strings still
        assert [event async for event in client.connection_events()] == []  # after close: ends at once

    run(scenario)


def test_events_iterate_what_the_handler_gets(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, url = setup_pair(admin)

    async def scenario() -> None:
        client = await open_client(server, tmp_path, token)
        handled: List[Tuple[str, str]] = []
        client.set_event_handler(lambda category, channel_url, payload: handled.append((category, channel_url)))
        # Once the first catch-up is done (a view is live): a channel changelog it stores
        # late would be one more event below.
        with client.group_channel_collection() as probe:
            await probe.load_more()
            deadline = time.monotonic() + TIMEOUT
            while probe.freshness is not parley.Freshness.LIVE:
                assert time.monotonic() < deadline, f"the probe view is not live: {probe.freshness}"
                await asyncio.sleep(0.02)
        events = client.events()
        async with client.events() as stopped_early:
            pass  # closed: receives nothing more
        assert [event async for event in stopped_early] == []
        sent = admin.send(url, "bob", "to the iterator")
        async for event in events:
            if event.category is EventCategory.MESSAGE_RECEIVED:
                assert event.channel_url == url
                assert event.payload["message"]["message_id"] == sent["message_id"]
                assert event.payload["message"]["message"] == "to the iterator"
                break
        assert (EventCategory.MESSAGE_RECEIVED, url) in handled

        mine = await client.send_user_message(url, "mine")
        ending = asyncio.ensure_future(collect(events))
        await mine.delivered
        await asyncio.sleep(0.1)
        await client.close()
        rest = await asyncio.wait_for(ending, TIMEOUT)  # the iteration ended with the close
        assert [(e.category, e.payload["req_id"]) for e in rest] == [
            (EventCategory.MESSAGE_PENDING, mine.req_id), (EventCategory.MESSAGE_SENT, mine.req_id)]

    run(scenario)


async def collect(events: parley.EventStream[parley.ClientEvent]) -> List[parley.ClientEvent]:
    return [event async for event in events]


def test_an_async_relevance_search_loads_the_window_below(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token, url = setup_pair(admin)
    sent = [admin.send(url, "bob", f"probe {n}")["message_id"] for n in range(5)]

    async def scenario() -> None:
        async with await open_client(server, tmp_path, token) as client:
            with client.message_collection(url) as view:
                await view.start()
            with client.search_messages("probe", order="relevance", relevance_window=3) as search:
                # One occurrence each: ties, newest first; the three newest, then the two below.
                assert [r["message"]["message_id"] for r in await search.load_more()] == sent[:1:-1]
                assert search.relevance_window == parley.RelevanceWindow(3, True)
                assert [r["message"]["message_id"] for r in await search.load_older()] == sent[1::-1]
                assert search.relevance_window == parley.RelevanceWindow(2, False)

    run(scenario)


def test_async_clients_of_one_loop_share_one_reader(server: RunningServer) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        added: List[int] = []
        removed: List[int] = []
        add_reader, remove_reader = loop.add_reader, loop.remove_reader

        def counting_add(fd: int, callback: Callable[..., Any], *args: Any) -> None:
            added.append(fd)
            add_reader(fd, callback, *args)

        def counting_remove(fd: int) -> bool:
            removed.append(fd)
            return remove_reader(fd)

        loop.add_reader, loop.remove_reader = counting_add, counting_remove  # type: ignore[method-assign]
        clients = [parley.AsyncClient(server_url=server.url, api_token=server.api_token) for _ in range(40)]
        assert len(added) == 1
        answers = await asyncio.wait_for(asyncio.gather(*(client.request("GET", "/v3/users") for client in clients)), TIMEOUT)
        assert all("users" in answer for answer in answers)
        # Each client's callbacks still run in order, on the loop's thread.
        order: List[Tuple[int, int]] = []
        done = asyncio.Event()
        for index in range(5):
            for number, client in enumerate(clients):
                client.post(lambda number=number, index=index: order.append((number, index)))
        clients[-1].post(done.set)
        await asyncio.wait_for(done.wait(), TIMEOUT)
        for number in range(len(clients)):
            assert [index for who, index in order if who == number] == list(range(5))
        for client in clients[:39]:
            await client.close()
        assert removed == []  # one client left on the group
        assert (await asyncio.wait_for(clients[39].request("GET", "/v3/users"), TIMEOUT))["users"] is not None
        await clients[39].close()
        assert removed == added
        # A later client makes a new group and reader.
        async with parley.AsyncClient(server_url=server.url, api_token=server.api_token) as again:
            await asyncio.wait_for(again.request("GET", "/v3/users"), TIMEOUT)
            assert len(added) == 2
        assert len(removed) == 2

    run(scenario)
