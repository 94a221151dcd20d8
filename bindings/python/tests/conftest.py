"""Fixtures: the real parley-server on an ephemeral loopback port with a temp database."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Generic, Iterator, List, NamedTuple, TypeVar, Union

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
sys.path.append(str(ROOT))  # for tests_support
from tests_support import databases  # noqa: E402
from tests_support.processes import stop_process  # noqa: E402

# The servers these tests stop close their port at once (no balancer waits on them).
os.environ.setdefault("PARLEY_SHUTDOWN_DRAIN_SECONDS", "0")


def _give_every_client_the_lane_key(key: str) -> None:
    """The encrypted lane (PARLEY_TEST_CACHE_KEY: 64 hexadecimal digits): every client the
    tests create gets that cache_key, unless its configuration names a key, a passphrase or
    a memory cache, so that the cache suites run on encrypted files."""
    import json

    import parley.client

    original = parley.client.Client.__init__

    def with_key(self: Any, config: Any = None, **options: Any) -> None:
        document = config
        if isinstance(config, str):
            try:
                document = json.loads(config) if config.strip() else {}
            except ValueError:
                return original(self, config, **options)
        if isinstance(document, dict) or document is None:
            merged = dict(document or {})
            merged.update(options)
            if not {"cache_key", "cache_passphrase"} & merged.keys() and merged.get("cache_mode") != "memory":
                merged["cache_key"] = key
            return original(self, merged)
        return original(self, config, **options)

    parley.client.Client.__init__ = with_key  # type: ignore[method-assign]


if os.environ.get("PARLEY_TEST_CACHE_KEY"):
    _give_every_client_the_lane_key(os.environ["PARLEY_TEST_CACHE_KEY"])


def pytest_configure(config: pytest.Config) -> None:
    databases.register_markers(config)
    config.addinivalue_line("markers", "plain_cache_file: reads the cache file itself (Python's sqlite3, its bytes): "
                                       "skipped in the encrypted lane (PARLEY_TEST_CACHE_KEY)")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    databases.skip_by_backend(items)
    if os.environ.get("PARLEY_TEST_CACHE_KEY"):
        skip = pytest.mark.skip(reason="plain_cache_file: the encrypted lane's cache files are encrypted")
        for item in items:
            if item.get_closest_marker("plain_cache_file"):
                item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    databases.drop_all()


def server_database(tmp_path: Path, name: str = "server.sqlite") -> str:
    """The `--database` of a test's server: `tmp_path/name` on SQLite, a PostgreSQL URL with
    PARLEY_TEST_BACKEND=postgres. The same for the same arguments, so a restart reuses it."""
    return databases.database_for(tmp_path, name)


T = TypeVar("T")


class Collected(Generic[T]):
    """A listener that keeps what it is called with, in order (it runs on the callback thread)."""

    def __init__(self) -> None:
        self.items: List[T] = []
        self.lock = threading.Lock()

    def __call__(self, item: T) -> None:
        with self.lock:
            self.items.append(item)

    def snapshot(self) -> List[T]:
        with self.lock:
            return list(self.items)


class RunningServer(NamedTuple):
    url: str
    api_token: str
    process: subprocess.Popen
    database: str = ""


def server_binary() -> Path:
    path = Path(os.environ.get("PARLEY_SERVER_BIN", ROOT / "server" / ".build" / "release" / "parley-server"))
    if not path.exists():
        pytest.fail(f"parley-server not found at {path}: build it (scripts/test.sh does) or set PARLEY_SERVER_BIN")
    return path


def start_server(database: Union[str, Path], api_token: str, port: int = 0) -> RunningServer:
    """Starts parley-server on `port` (0: any free one) and returns once it listens."""
    process = subprocess.Popen(
        [str(server_binary()), "--port", str(port), "--database", str(database), "--api-token", api_token],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    prefix = "parley-server listening on "
    if not line.startswith(prefix):
        process.kill()
        process.wait()
        pytest.fail(f"unexpected first line from parley-server: {line!r}")
    return RunningServer(line[len(prefix):], api_token, process, str(database))


@pytest.fixture(autouse=True)
def private_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's clients keep their default cache files under its own temp dir."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(autouse=True)
def drop_test_databases(tmp_path: Path) -> Iterator[None]:
    """On PostgreSQL, each test's databases go when it ends (servers are stopped by then)."""
    yield
    databases.drop_created_in(tmp_path)


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    if request.node.get_closest_marker("bulk_sends"):
        # Each send's self-check counts the unread messages of every member of the channel,
        # and on PostgreSQL it opens the write's transaction early.
        monkeypatch.setenv("PARLEY_VERIFY_COUNTERS", "0")
    running = start_server(server_database(tmp_path), secrets.token_hex(16))
    yield running
    stop_process(running.process)


class Admin:
    """Drives the server's REST API with the admin token (test setup only)."""

    def __init__(self, server: RunningServer) -> None:
        import requests

        self.server = server
        self.http = requests.Session()
        self.http.headers["Api-Token"] = server.api_token

    def call(self, method: str, path: str, body=None, **params):
        response = self.http.request(method, self.server.url + path, json=body, params=params or None, timeout=10)
        if response.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {response.status_code}: {response.text}")
        return response.json()

    def user(self, user_id: str, nickname: str = "", **extra) -> str:
        """Creates a user and returns a fresh session token for it."""
        self.call("POST", "/v3/users", {"user_id": user_id, "nickname": nickname or user_id.title(), **extra})
        return self.token(user_id)

    def token(self, user_id: str, **extra) -> str:
        return self.call("POST", f"/v3/users/{user_id}/token", extra)["token"]

    def send(self, channel_url: str, user_id: str, text: str, **extra):
        return self.call("POST", f"/v3/group_channels/{channel_url}/messages",
                         {"message_type": "MESG", "user_id": user_id, "message": text, **extra})


@pytest.fixture
def admin(server: RunningServer) -> Admin:
    return Admin(server)


def listing_for(server_url: str, token: str, channel_url: str, **extra: str) -> List[Any]:
    """Every message of the channel as the server lists it to the token's user, oldest first."""
    import time

    params = {"message_ts": int(time.time() * 1000) + 60_000, "prev_limit": 200, "next_limit": 0, **extra}
    messages: List[Any] = listed(server_url, token, f"/v3/group_channels/{channel_url}/messages", params)["messages"]
    return messages


def listed(server_url: str, token: str, path: str, params: Dict[str, Any]) -> Any:
    """One page of a listing as the token's user gets it (the answer's JSON)."""
    import requests

    response = requests.get(server_url + path, params=params, headers={"Session-Key": token}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def walk_channels(server_url: str, token: str, user_id: str, params: Dict[str, Any]) -> List[str]:
    """The URLs of the user's channels as the server lists them (``my_group_channels`` with
    `params`), walked with its ``next`` tokens to the end."""
    query = dict(params)
    urls: List[str] = []
    for _ in range(1000):
        page = listed(server_url, token, f"/v3/users/{user_id}/my_group_channels", query)
        urls += [channel["channel_url"] for channel in page["channels"]]
        if not page["next"]:
            return urls
        query["token"] = page["next"]
    raise AssertionError("the server's listing never ended")


def walk_messages(server_url: str, token: str, channel_url: str, filters: Dict[str, Any]) -> List[int]:
    """The ids of the channel's messages as the server lists them to the token's user (with
    `filters`), walked from the oldest to the end."""
    query: Dict[str, Any] = {"message_ts": 0, "prev_limit": 0, "next_limit": 200, "include": "true", **filters}
    ids: List[int] = []
    while True:
        page = listed(server_url, token, f"/v3/group_channels/{channel_url}/messages", query)
        ids += [m["message_id"] for m in page["messages"]]
        if not page["has_next"]:
            return ids
        last = page["messages"][-1]
        query.update(message_ts=last["created_at"], message_id=last["message_id"], include="false")
