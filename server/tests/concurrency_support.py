"""Helpers for the concurrency and durability tests.

- `Client`: one `requests.Session` (one connection pool) per thread, acting as the
  administrator or as one user (Session-Key).
- `run_threads`: runs callables on threads, optionally released together by a barrier, and
  turns any exception or hang in a thread into one test failure that names the thread.
- `all_messages`: a channel's whole message list through the API, paged by key.
- `EventCollector`: a raw SSE stream read on a thread, every frame kept, with a condition to
  wait on (no sleeps).

Only the HTTP surface and the `Server` object's `url()` are used, so the tests run on any
storage backend the fixtures start.
"""
import json
import threading
import time
import traceback

import requests

from conftest import API_TOKEN


class Client:
    """An HTTP client for one thread: its own connection pool and credential."""

    def __init__(self, server, session_key=None):
        self.server = server
        self.http = requests.Session()
        if session_key is None:
            self.http.headers["Api-Token"] = API_TOKEN
        else:
            self.http.headers["Session-Key"] = session_key

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 30)
        return self.http.request(method, self.server.url(path), **kw)

    def ok(self, method, path, **kw):
        r = self.request(method, path, **kw)
        assert r.status_code == 200, f"{method} {path} {kw.get('params') or kw.get('json') or ''} -> {r.status_code} {r.text[:500]}"
        return r.json()

    def close(self):
        self.http.close()


def run_threads(targets, timeout=60, barrier=False):
    """Runs each `(name, fn)` on its own thread and waits for all of them.

    With `barrier=True` each fn gets a `threading.Barrier` shared by all of them as its one
    argument, to line up the racing requests. Fails naming every thread that raised (with its
    traceback) or that was still running after `timeout` seconds."""
    errors = {}
    gate = threading.Barrier(len(targets)) if barrier else None

    def wrap(name, fn):
        def body():
            try:
                fn(gate) if barrier else fn()
            except BaseException:  # noqa: B902 - reported to the test below
                errors[name] = traceback.format_exc()
                if gate is not None:
                    gate.abort()
        return body

    threads = [threading.Thread(target=wrap(name, fn), name=name, daemon=True) for name, fn in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads still running after {timeout} s: {hung}"
    if errors:
        # A broken barrier in the others is a consequence: show the first real failure first.
        ordered = sorted(errors.items(), key=lambda kv: "BrokenBarrierError" in kv[1])
        raise AssertionError(f"{len(errors)} thread(s) failed:\n" +
                             "\n".join(f"--- {name}\n{tb}" for name, tb in ordered[:3]))


class Countdown:
    """Set once `count` workers have each called `done()` (in a `finally`, so a failed worker
    counts too): the threads that run beside them stop when it is set."""

    def __init__(self, count):
        self._left = count
        self._lock = threading.Lock()
        self._event = threading.Event()

    def done(self):
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._event.set()

    def is_set(self):
        return self._event.is_set()


def message_key(m):
    return (m["created_at"], m["message_id"])


def all_messages(client, url, page=200, **params):
    """Every message of the channel in list order, (created_at, message_id), paged by key
    (each page starts strictly after the previous page's last key, PROTOCOL §7.2)."""
    out = []
    query = {"message_ts": 0, "prev_limit": 0, "next_limit": page, **params}
    while True:
        body = client.ok("GET", f"/v3/group_channels/{url}/messages", params=query)
        msgs = body["messages"]
        out.extend(msgs)
        if not body["has_next"]:
            return out
        assert msgs, f"has_next is true on an empty page of {url} (query {query})"
        last = msgs[-1]
        query = {"message_ts": last["created_at"], "message_id": last["message_id"], "include": "false",
                 "prev_limit": 0, "next_limit": page, **params}


def member_list(client, url):
    """Every member (joined and invited) of the channel, through the paged member list."""
    out, token = [], None
    while True:
        params = {"limit": 100, **({"token": token} if token else {})}
        body = client.ok("GET", f"/v3/group_channels/{url}/members", params=params)
        out.extend(body["members"])
        token = body["next"]
        if not token:
            return out


def now_ts(client):
    """The server's clock (ms), as the channel list reports it."""
    return client.ok("GET", "/v3/group_channels", params={"limit": 1})["ts"]


class EventCollector:
    """Reads `GET /v3/users/{user_id}/events` on a thread and keeps every frame.

    Each frame is a dict: `id` (int or None), `event`, `data` (parsed JSON or None). Heartbeat
    comments are counted, not kept. `wait_for(predicate)` blocks until `predicate(frames)`
    holds, the stream ends, or the timeout passes."""

    def __init__(self, server, user_id, session_key=None, last_event_id=None):
        headers = {"Session-Key": session_key} if session_key else {"Api-Token": API_TOKEN}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.user_id = user_id
        self.resp = requests.get(server.url(f"/v3/users/{user_id}/events"), headers=headers, stream=True,
                                 timeout=(5, 30))
        assert self.resp.status_code == 200, f"event stream of {user_id}: {self.resp.status_code} {self.resp.text[:300]}"
        self.frames = []
        self.heartbeats = 0
        self.ended = False
        self.error = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"sse-{user_id}", daemon=True)
        self.thread.start()

    def _run(self):
        fields = {}
        try:
            for raw in self.resp.iter_lines(chunk_size=None):
                line = raw.decode("utf-8")
                if line == "":
                    if fields:
                        self._add(fields)
                    fields = {}
                elif line.startswith(":"):
                    self.heartbeats += 1
                else:
                    key, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    fields[key] = fields[key] + "\n" + value if key == "data" and key in fields else value
        except Exception as e:  # the stream was closed or the server went away
            self.error = repr(e)
        finally:
            with self.cond:
                self.ended = True
                self.cond.notify_all()

    def _add(self, fields):
        frame = {"id": int(fields["id"]) if "id" in fields else None, "event": fields.get("event"),
                 "data": json.loads(fields["data"]) if "data" in fields else None}
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout):
        """True once `predicate(frames)` holds; False if the stream ended or time ran out first."""
        with self.cond:
            self.cond.wait_for(lambda: self.ended or predicate(self.frames), timeout=timeout)
            return predicate(self.frames)

    def snapshot(self):
        with self.cond:
            return list(self.frames)

    def message_frames(self):
        """(event id, message id, channel url, text) of every `message_received` frame so far."""
        return [(f["id"], f["data"]["message"]["message_id"], f["data"]["channel_url"], f["data"]["message"]["message"])
                for f in self.snapshot() if f["event"] == "message_received"]

    def close(self):
        self.resp.close()


def count_event(category):
    def count(frames):
        return sum(1 for f in frames if f["event"] == category)
    return count


def describe_ids(ids, limit=10):
    ids = sorted(ids)
    more = f" (+{len(ids) - limit} more)" if len(ids) > limit else ""
    return f"{ids[:limit]}{more}"
