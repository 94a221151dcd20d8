"""The library's log lines reach the `logging` logger "parley" by default, at the matching
logging level, with the library's level read from the logger when the client is created
(or when use_logging is called); set_log_handler replaces the forwarding."""
from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Callable, List

import pytest

import parley
from conftest import Admin, RunningServer

TIMEOUT = 20.0


def library_records(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "parley"]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_the_level_mapping() -> None:
    logger = logging.getLogger("parley.test_mapping")
    for level, expected in ((parley.TRACE, parley.LOG_TRACE), (logging.DEBUG, parley.LOG_DEBUG),
                            (logging.INFO, parley.LOG_INFO), (logging.WARNING, parley.LOG_WARNING),
                            (logging.ERROR, parley.LOG_ERROR), (logging.CRITICAL, parley.LOG_OFF)):
        logger.setLevel(level)
        assert parley.log_level_for(logger) == expected
    logger.setLevel(logging.NOTSET)
    assert logging.getLevelName(parley.TRACE) == "TRACE"


def test_library_lines_reach_the_parley_logger(server: RunningServer, admin: Admin, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    token = admin.user("alice")
    caplog.set_level(logging.DEBUG, logger="parley")  # before the client is created
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
        client.connect("alice", token).result(TIMEOUT)
        wait_for(lambda: any("GET /v3/users/alice" in r.getMessage() for r in library_records(caplog)), "the connect's line")
    line = next(r for r in library_records(caplog) if "GET /v3/users/alice" in r.getMessage())
    assert line.levelno == logging.DEBUG
    assert line.thread != threading.get_ident()  # the client's callback thread logged it
    assert not any("exception in a parley callback" in r.getMessage() for r in caplog.records)


def test_a_failed_connect_is_logged_at_info(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.INFO, logger="parley")
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), connect_timeout_ms=2000) as client:
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        wait_for(lambda: any("failed" in r.getMessage() for r in library_records(caplog)), "the failure's line")
    assert {r.levelno for r in library_records(caplog)} == {logging.INFO}  # no DEBUG line was sent


def test_the_level_is_read_at_creation_and_by_use_logging(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING, logger="parley")
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), connect_timeout_ms=2000) as client:
        caplog.set_level(logging.DEBUG, logger="parley")  # the library still sends WARNING and above only
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        after_the_lines = threading.Event()
        client.post(after_the_lines.set)  # callbacks run in order: this one after the connect's log lines
        assert after_the_lines.wait(TIMEOUT)
        assert library_records(caplog) == []
        client.use_logging()  # reads DEBUG now
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        wait_for(lambda: any(r.levelno == logging.DEBUG for r in library_records(caplog)), "a DEBUG line")


def test_a_configured_log_level_wins(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.DEBUG, logger="parley")
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), connect_timeout_ms=2000,
                       log_level="info") as client:
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        wait_for(lambda: library_records(caplog) != [], "a line")
        time.sleep(0.2)
    assert {r.levelno for r in library_records(caplog)} == {logging.INFO}


def test_set_log_handler_replaces_the_forwarding_and_none_turns_logs_off(caplog: pytest.LogCaptureFixture,
                                                                          tmp_path: Path) -> None:
    caplog.set_level(logging.DEBUG, logger="parley")
    own: List[str] = []
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), connect_timeout_ms=2000) as client:
        client.set_log_handler(lambda level, message: own.append(message), parley.LOG_DEBUG)
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        wait_for(lambda: len(own) >= 2, "the handler's lines")
        client.set_log_handler(None)
        with pytest.raises(parley.NetworkError):
            client.connect("alice", "token").result(TIMEOUT)
        time.sleep(0.2)
    assert library_records(caplog) == []


def test_a_raising_logging_filter_does_not_reach_the_library(caplog: pytest.LogCaptureFixture, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable: List[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    class Refuse(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("no")

    caplog.set_level(logging.DEBUG, logger="parley")
    logger = logging.getLogger("parley")
    refuse = Refuse()
    logger.addFilter(refuse)
    try:
        with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), connect_timeout_ms=2000) as client:
            with pytest.raises(parley.NetworkError):
                client.connect("alice", "token").result(TIMEOUT)
            assert client.request("GET", "/v3/users").exception(TIMEOUT) is not None  # callbacks still run
    finally:
        logger.removeFilter(refuse)
    assert unraisable == []  # nothing unwound into the library's thread


def test_async_client_logs_on_the_loop(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.DEBUG, logger="parley")

    async def scenario() -> None:
        async with parley.AsyncClient(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"),
                                      connect_timeout_ms=2000) as client:
            with pytest.raises(parley.NetworkError):
                await asyncio.wait_for(client.connect("alice", "token"), TIMEOUT)
            done = asyncio.Event()
            client.post(done.set)
            await asyncio.wait_for(done.wait(), TIMEOUT)

    asyncio.run(scenario())
    records = library_records(caplog)
    assert any(r.levelno == logging.DEBUG and "GET /v3/users/alice" in r.getMessage() for r in records)
    assert {r.thread for r in records} == {threading.get_ident()}  # asyncio.run ran the loop here
