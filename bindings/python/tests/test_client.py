"""The Python binding over the real library: errors, both dispatch modes, asyncio,
cancellation on close, logging, and raw requests against the real server."""
from __future__ import annotations

import asyncio
import gc
import select
import socket
import threading
import time

import pytest

import parley


def refused_url() -> str:
    return "http://127.0.0.1:9"  # discard port: nothing listens on loopback


@pytest.fixture
def black_hole():
    """A listening socket that never accepts: requests to it hang until cancelled."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_version_matches_package():
    assert parley.version() == parley.__version__


@pytest.mark.parametrize(
    "config, kind, mentions",
    [
        ("{\"server_url\": ", parley.InvalidJSON, "config_json"),
        ({"sever_url": "http://x"}, parley.InvalidArgument, "sever_url"),
        ({"dispatch_mode": "later"}, parley.InvalidArgument, "dispatch_mode"),
        ({"request_timeout_ms": "fast"}, parley.InvalidArgument, "request_timeout_ms"),
        ({"server_url": "gopher://x"}, parley.InvalidArgument, "server_url"),
    ],
)
def test_bad_configuration_raises_with_code_and_message(config, kind, mentions):
    with pytest.raises(kind) as raised:
        if isinstance(config, str):
            parley.Client(config)
        else:
            parley.Client(**config)
    assert raised.value.code == kind.code
    assert mentions in raised.value.message


def test_closed_client_refuses_calls_and_close_is_idempotent():
    client = parley.Client()
    client.close()
    client.close()
    with pytest.raises(parley.InvalidHandle):
        client.post(lambda: None)


def test_thread_mode_runs_posts_in_order_without_overlap():
    seen: list[int] = []
    inside = threading.Lock()
    overlaps = []
    done = threading.Event()
    with parley.Client() as client:
        for index in range(500):
            def job(index=index):
                if not inside.acquire(blocking=False):
                    overlaps.append(index)
                    return
                seen.append(index)
                inside.release()
                if index == 499:
                    done.set()
            client.post(job)
        assert done.wait(10)
    assert seen == list(range(500))
    assert overlaps == []


def test_request_errors_arrive_as_exceptions_with_codes():
    with parley.Client(server_url=refused_url(), connect_timeout_ms=2000) as client:
        future = client.request("GET", "/v3/users")
        with pytest.raises(parley.NetworkError) as raised:
            future.result(timeout=10)
        assert raised.value.code == -6
        with pytest.raises(parley.InvalidArgument):
            client.request("TELEPORT", "/v3/users")
        with pytest.raises(parley.InvalidJSON):
            client.request("POST", "/v3/users", "{broken")


def test_close_cancels_requests_in_flight_exactly_once(black_hole):
    completions: list[type] = []
    client = parley.Client(server_url=black_hole)
    futures = [client.request("GET", "/v3/users") for _ in range(3)]
    operation = client.request_with_callback("GET", "/v3/users", None, lambda result, error: completions.append(type(error)))
    client.cancel(operation)
    with pytest.raises(parley.NotFound):
        client.cancel(operation)  # already completed
    client.close()
    for future in futures:
        assert isinstance(future.exception(timeout=0), parley.Cancelled)
    assert completions == [parley.Cancelled]


def test_manual_mode_callbacks_wait_for_dispatch_and_fd_signals():
    with parley.Client(dispatch_mode="manual") as client:
        fd = client.event_fd
        ran: list[int] = []
        assert select.select([fd], [], [], 0)[0] == []
        for index in range(5):
            client.post(lambda index=index: ran.append(index))
        assert ran == []
        assert select.select([fd], [], [], 0)[0] == [fd]
        assert client.dispatch(2) == 2
        assert client.dispatch() == 3
        assert ran == [0, 1, 2, 3, 4]
        assert select.select([fd], [], [], 0)[0] == []
        with pytest.raises(parley.InvalidState):
            parley.Client().dispatch()


def test_a_dispatch_group_serves_several_manual_clients_through_one_fd():
    with parley.DispatchGroup() as group:
        clients = [parley.Client(dispatch_mode="manual") for _ in range(3)]
        for client in clients:
            client.set_dispatch_group(group)
        ran: list[tuple[int, int]] = []
        assert select.select([group.fd], [], [], 0)[0] == []
        for index in range(4):
            for number, client in enumerate(clients):
                client.post(lambda number=number, index=index: ran.append((number, index)))
        assert select.select([group.fd], [], [], 0)[0] == [group.fd]
        assert group.dispatch(6) == 6
        assert group.dispatch() == 6
        assert select.select([group.fd], [], [], 0)[0] == []
        for number in range(3):
            assert [index for who, index in ran if who == number] == [0, 1, 2, 3]
        with pytest.raises(parley.InvalidState):
            group.close()  # clients are attached
        with pytest.raises(parley.InvalidState):
            parley.Client().set_dispatch_group(group)  # thread mode
        clients[0].set_dispatch_group(None)
        clients[0].post(lambda: ran.append((0, 4)))
        assert select.select([group.fd], [], [], 0)[0] == []
        assert clients[0].dispatch() == 1
        for client in clients:
            client.close()
    assert group.closed
    with pytest.raises(parley.InvalidHandle):
        group.dispatch()


def test_log_handler_receives_records():
    records: list[tuple[int, str]] = []
    with parley.Client(server_url=refused_url(), dispatch_mode="manual") as client:
        client.set_log_handler(lambda level, message: records.append((level, message)), parley.LOG_DEBUG)
        future = client.request("GET", "/v3/users")
        deadline = time.monotonic() + 10
        while not future.done() and time.monotonic() < deadline:
            select.select([client.event_fd], [], [], 0.5)
            client.dispatch()
        assert isinstance(future.exception(timeout=0), parley.NetworkError)
    assert any(level == parley.LOG_DEBUG and "/v3/users" in message for level, message in records)


def test_callback_exceptions_do_not_break_delivery(caplog):
    with parley.Client(dispatch_mode="manual") as client:
        ran = []
        client.post(lambda: 1 / 0)
        client.post(lambda: ran.append(True))
        assert client.dispatch() == 2
    assert ran == [True]
    assert "exception in a parley callback" in caplog.text


def test_callables_are_kept_alive_until_they_run():
    ran = []
    with parley.Client(dispatch_mode="manual") as client:
        for index in range(100):
            client.post((lambda index: lambda: ran.append(index))(index))
        gc.collect()
        client.dispatch()
    assert ran == list(range(100))


def test_asyncio_client_uses_the_event_fd():
    async def scenario():
        async with parley.AsyncClient(server_url=refused_url(), connect_timeout_ms=2000) as client:
            with pytest.raises(parley.NetworkError):
                await asyncio.wait_for(client.request("GET", "/v3/users"), 10)
            loop_thread = threading.get_ident()
            ran_on = []
            done = asyncio.Event()
            client.post(lambda: (ran_on.append(threading.get_ident()), done.set()))
            await asyncio.wait_for(done.wait(), 5)
            assert ran_on == [loop_thread]

    asyncio.run(scenario())


def test_asyncio_task_cancellation_cancels_the_operation(black_hole):
    async def scenario():
        async with parley.AsyncClient(server_url=black_hole) as client:
            task = asyncio.ensure_future(client.request("GET", "/v3/users"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            pending = asyncio.ensure_future(client.request("GET", "/v3/users"))
            await asyncio.sleep(0.1)
        with pytest.raises(parley.Cancelled):
            await pending

    asyncio.run(scenario())


def test_raw_requests_against_the_real_server(server):
    with parley.Client(server_url=server.url, api_token=server.api_token) as client:
        created = client.request("POST", "/v3/users", {"user_id": "alice", "nickname": "Alice"}).result(timeout=10)
        assert created["user_id"] == "alice"
        assert created["nickname"] == "Alice"
        fetched = client.request("GET", "/v3/users/alice").result(timeout=10)
        assert fetched["user_id"] == "alice"
        with pytest.raises(parley.NotFound) as raised:
            client.request("GET", "/v3/users/nobody").result(timeout=10)
        assert raised.value.http_status == 404
        assert raised.value.server_code != 0
    with parley.Client(server_url=server.url, api_token="wrong") as client:
        with pytest.raises(parley.Unauthorized) as raised:
            client.request("GET", "/v3/users/alice").result(timeout=10)
        assert raised.value.http_status == 401


def test_raw_requests_async_against_the_real_server(server):
    async def scenario():
        async with parley.AsyncClient(server_url=server.url, api_token=server.api_token) as client:
            results = await asyncio.gather(*[
                client.request("POST", "/v3/users", {"user_id": f"user{index}", "nickname": f"U{index}"})
                for index in range(20)
            ])
            assert sorted(result["user_id"] for result in results) == sorted(f"user{index}" for index in range(20))

    asyncio.run(scenario())


def test_header_values_with_control_characters_are_refused() -> None:
    for options, field in (({"user_agent": "x\r\nX-Injected: 1"}, "user_agent"), ({"api_token": "t\n"}, "api_token"),
                           ({"server_url": "http://127.0.0.1:1/a b"}, "server_url")):
        with pytest.raises(parley.InvalidArgument) as failure:
            parley.Client(**options)
        assert field in str(failure.value)
