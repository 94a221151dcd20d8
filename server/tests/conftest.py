"""Fixtures: start the real parley-server binary on an ephemeral port with a temp database."""
import json
import os
import queue
import select
import subprocess
import tempfile
import sys
import threading
import time
import uuid

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.dirname(ROOT))  # the repository root, for tests_support
from tests_support import databases  # noqa: E402
from tests_support.processes import stop_process  # noqa: E402

API_TOKEN = "test-admin-token"

# Servers the tests stop close their port at once unless a test asks for a drain
# (docs/SERVER.md "Stopping"): no balancer waits on them.
os.environ.setdefault("PARLEY_SHUTDOWN_DRAIN_SECONDS", "0")


def pytest_configure(config):
    databases.register_markers(config)


def pytest_collection_modifyitems(config, items):
    databases.skip_by_backend(items)


def pytest_sessionfinish(session, exitstatus):
    databases.drop_all()


def server_binary():
    path = os.environ.get("PARLEY_SERVER_BIN") or os.path.join(ROOT, ".build", "release", "parley-server")
    if not os.path.exists(path):
        pytest.exit(f"parley-server binary not found at {path}; build it first", returncode=2)
    return path


class Server:
    """A running server process plus a small HTTP helper. `db_path` is the server's
    `--database`: a SQLite file, or a PostgreSQL URL with PARLEY_TEST_BACKEND=postgres."""

    def __init__(self, db_path, extra_args=()):
        self.db_path = db_path
        self.extra_args = list(extra_args)
        self.proc = None
        self.base = None
        self.start()

    def start(self):
        args = [server_binary(), "--port", "0", "--database", self.db_path, "--api-token", API_TOKEN,
                "--heartbeat-seconds", "0.5"] + self.extra_args
        # Test hooks on: an admin write may hold its transaction open (Parley-Test-Hold-Ms).
        env = dict(os.environ, PARLEY_TEST_HOOKS="1")
        # stderr goes to a file: a pipe nobody reads would stall a server that logs a lot.
        self._remove_log()
        self.log = tempfile.NamedTemporaryFile(prefix="parley-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env)
        deadline = time.time() + 30
        line = b""
        while time.time() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        text = line.decode().strip()
        if not text.startswith("parley-server listening on http://"):
            stderr = self.log_text() if self.proc.poll() is not None else ""
            self.stop()  # a server that did not say it listens is not left running
            raise AssertionError(f"unexpected start line {text!r}; stderr: {stderr}")
        self.base = text.split(" on ", 1)[1]

    def log_text(self):
        """What the server wrote to stderr so far."""
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        stop_process(self.proc)
        self._remove_log()

    def _remove_log(self):
        log = getattr(self, "log", None)
        if log is not None:
            log.close()
            try:
                os.unlink(log.name)
            except FileNotFoundError:
                pass
            self.log = None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def alive(self):
        return self.proc.poll() is None

    def url(self, path):
        return self.base + path

    def request(self, method, path, token=API_TOKEN, session=None, json=None, params=None, headers=None, **kw):
        h = dict(headers or {})
        if session is not None:
            h["Session-Key"] = session
        elif token is not None:
            h["Api-Token"] = token
        kw.setdefault("timeout", 10)
        return requests.request(method, self.url(path), json=json, params=params, headers=h, **kw)

    def ok(self, method, path, **kw):
        r = self.request(method, path, **kw)
        assert r.status_code == 200, f"{method} {path} -> {r.status_code} {r.text}"
        return r.json()

    # Convenience builders used across tests.
    def user(self, prefix="u", **fields):
        uid = f"{prefix}-{uuid.uuid4().hex[:8]}"
        body = {"user_id": uid, "nickname": fields.pop("nickname", uid)}
        body.update(fields)
        self.ok("POST", "/v3/users", json=body)
        return uid

    def session(self, user_id, **body):
        return self.ok("POST", f"/v3/users/{user_id}/token", json=body)["token"]

    def channel(self, user_ids, **fields):
        body = {"user_ids": list(user_ids)}
        body.update(fields)
        return self.ok("POST", "/v3/group_channels", json=body)

    def send(self, url, user_id, text="hello", **fields):
        body = {"message_type": "MESG", "user_id": user_id, "message": text}
        body.update(fields)
        return self.ok("POST", f"/v3/group_channels/{url}/messages", json=body)


def metric(server, name, labels=""):
    """The value of one series of the server's /metrics."""
    for line in requests.get(server.url("/metrics"), timeout=10).text.splitlines():
        if line.startswith(name + labels + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name}{labels} in /metrics")


def wait_until(predicate, timeout=8, step=0.1):
    """Whether `predicate` became true within `timeout` seconds (checked every `step`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def wait_for_a_held_request(server, margin=0.2, timeout=15):
    """Returns once a transaction runs on `server` (a request held by `Parley-Test-Hold-Ms`
    has begun), plus `margin` seconds for its handler to reach the hold. A fixed sleep alone
    does not cover a thread's start and its request on a loaded host."""
    assert wait_until(lambda: metric(server, "parley_db_transactions_in_flight") >= 1, timeout, step=0.02), \
        "the held request never began its transaction"
    time.sleep(margin)


def server_reading_peers_late(db, monkeypatch, milliseconds):
    """A server whose reads of other servers' events each start `milliseconds` later (a
    test hook): what it caches is not refreshed by rendering their events meanwhile."""
    monkeypatch.setenv("PARLEY_TEST_PEER_READ_DELAY_MS", str(milliseconds))
    try:
        return Server(db)
    finally:
        monkeypatch.delenv("PARLEY_TEST_PEER_READ_DELAY_MS")


class EventReader:
    """Reads an SSE stream on a thread; events and comments land in a queue."""

    def __init__(self, server, user_id, session=None, last_event_id=None):
        headers = {"Session-Key": session} if session else {"Api-Token": API_TOKEN}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.resp = requests.get(server.url(f"/v3/users/{user_id}/events"), headers=headers, stream=True, timeout=(5, 10))
        self.queue = queue.Queue()
        self.comments = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        event = {}
        try:
            for raw in self.resp.iter_lines(decode_unicode=True):
                if raw is None:
                    continue
                if raw == "":
                    if event:
                        self.queue.put(event)
                    event = {}
                elif raw.startswith(":"):
                    self.comments += 1
                else:
                    key, _, value = raw.partition(":")
                    event[key] = value[1:] if value.startswith(" ") else value
        except Exception:
            pass

    def next(self, timeout=5):
        e = self.queue.get(timeout=timeout)
        if "data" in e:
            e["json"] = json.loads(e["data"])
        return e

    def until(self, category, timeout=5):
        deadline = time.time() + timeout
        seen = []
        while time.time() < deadline:
            try:
                e = self.next(timeout=max(0.05, deadline - time.time()))
            except queue.Empty:
                break
            seen.append(e)
            if e.get("event") == category:
                return e, seen
        raise AssertionError(f"no {category} event; got {[x.get('event') for x in seen]}")

    def drain(self, wait=0.5):
        out = []
        deadline = time.time() + wait
        while True:
            try:
                out.append(self.next(timeout=max(0.01, deadline - time.time())))
            except queue.Empty:
                return out

    def close(self):
        self.resp.close()


# A database taken back to schema 10 (both engines), where tests of older databases start:
# before migration 11 each member row held its unread counts and the channel no totals
# (server UnreadCounters.swift); before 13 events did not name the channel they changed.
# Migrations 12, 14, 15 and 16 only add PostgreSQL functions and a table, defined again when
# they are applied again; 17 gave message tombstones their sender and request id; 20 made the
# table of queued webhook calls; 22 the push tables and the messages' translations.
# Migrations 22 and later undone: the push tables and the messages' translations (23 and 24
# only define PostgreSQL functions again, as their next application does).
UNDO_SCHEMA_22 = """
    DELETE FROM schema_migrations WHERE version >= 23;
    DROP TABLE push_tokens;
    DROP TABLE push_preferences;
    DROP TABLE push_channel_preferences;
    ALTER TABLE messages DROP COLUMN translations;
    DELETE FROM schema_migrations WHERE version = 22;
    """
UNDO_TO_SCHEMA_10 = UNDO_SCHEMA_22 + """
    DROP TABLE hook_deliveries;
    DROP INDEX message_tombstones_by_request;
    ALTER TABLE message_tombstones DROP COLUMN sender_id;
    ALTER TABLE message_tombstones DROP COLUMN req_id;
    ALTER TABLE events DROP COLUMN changed_channel;
    ALTER TABLE members RENAME COLUMN unread_base TO unread_count;
    ALTER TABLE members RENAME COLUMN mention_base TO unread_mention_count;
    UPDATE members SET
        unread_count = CASE WHEN state = 'joined'
            THEN (SELECT counted_messages FROM channels WHERE url = channel_url) - unread_count ELSE 0 END,
        unread_mention_count = CASE WHEN state = 'joined'
            THEN (SELECT counted_mentions FROM channels WHERE url = channel_url) - unread_mention_count ELSE 0 END;
    ALTER TABLE channels DROP COLUMN counted_messages;
    ALTER TABLE channels DROP COLUMN counted_mentions;
    DELETE FROM schema_migrations WHERE version >= 11;
    """


def ready_answer(base_url, status, timeout):
    """GET /health/ready on the server at `base_url` until it answers `status` or `timeout`
    seconds pass; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = requests.get(base_url + "/health/ready", timeout=10)
        if answer.status_code == status or time.monotonic() >= deadline:
            return answer
        time.sleep(0.2)


def assert_error(response, status, code=None, mentions=None):
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    body = response.json()
    assert body["error"] is True
    assert isinstance(body["code"], int)
    if code is not None:
        assert body["code"] == code, body
    if mentions is not None:
        assert mentions in body["message"], body
    return body


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    database = databases.new_database(tmp_path_factory.mktemp("srv"), "db.sqlite")
    s = Server(database)
    yield s
    s.stop()
    if databases.backend() != "sqlite":
        databases.drop_database(database)


@pytest.fixture
def fresh_server(tmp_path):
    """A private server for tests that restart it or need an empty database. Every server
    it makes in one test uses the same database."""
    servers = []

    def make(extra_args=()):
        s = Server(databases.database_for(tmp_path, "db.sqlite"), extra_args)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()
    if servers and databases.backend() != "sqlite":
        databases.drop_database(servers[0].db_path)


@pytest.fixture
def receivers():
    """Makes HTTP receivers for the server's outgoing calls (`hook_receiver.Receiver`, same
    arguments) and stops them after the test."""
    from hook_receiver import Receiver  # imported here: hook_receiver imports this module

    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()
