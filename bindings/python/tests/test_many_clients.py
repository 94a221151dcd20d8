"""300 clients in one process against the real server (docs/THREADING.md: a process may hold
thousands of clients, and what a client costs must not be a thread of its own): all
connecting at once succeed, the process's threads stay flat, a server killed and started
again under them loses nothing, and each client's callbacks run in order and exactly once
while clients are created and destroyed, also from inside their own callbacks.
PARLEY_MANY_CLIENTS changes the number of clients."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import parley
from conftest import Admin, RunningServer, server_binary, server_database
from tests_support.processes import stop_process

COUNT = int(os.environ.get("PARLEY_MANY_CLIENTS", "300"))
# The goal is a small process-wide set of threads (network threads, the shared callback pool),
# at most 16 whatever the number of clients. The slack is libdispatch's worker pool, shared with
# everything else in the process, which grows for a while under a burst of work (a few per core).
THREAD_GOAL, THREAD_SLACK = 16, 8


@pytest.fixture(autouse=True)
def descriptors_for_hundreds_of_clients() -> Iterator[None]:
    """Each client holds a few descriptors (its stream, its wake-ups): the soft limit goes to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def process_threads() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line in /proc/self/status")


def wait_until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


def text_of(category: str, payload: Any) -> Optional[str]:
    """The message text of a message event: message_received carries {channel, message},
    message_changelog the message itself."""
    if category == "message_received":
        message = payload.get("message")
        return message.get("message") if isinstance(message, dict) else None
    if category == "message_changelog":
        return payload.get("message")
    return None


class Tracked:
    """One client and what its callbacks saw (they run on its callback thread, one at a time)."""

    def __init__(self, server_url: str, user_id: str, token: str) -> None:
        self.user_id = user_id
        self.lock = threading.Lock()
        self.texts: List[str] = []
        self.connected = threading.Event()
        self.connect_outcomes: List[Optional[BaseException]] = []
        self.destroyed = False  # its close returned: no callback may run any more
        self.after_destroy = 0
        self.jobs_run: List[int] = []
        self.jobs_posted = 0
        self.self_destroy_at: Optional[str] = None
        self.client = parley.Client(server_url=server_url, cache_mode="memory")
        self.client.set_event_handler(self.on_event)
        self.client.set_connection_handler(self.on_connection)
        self.client.connect_with_callback(user_id, token, self.on_connected)

    def note_callback(self) -> None:
        if self.destroyed:
            self.after_destroy += 1

    def on_connected(self, result: Any, error: Optional[BaseException]) -> None:
        self.note_callback()
        with self.lock:
            self.connect_outcomes.append(error)

    def on_connection(self, event: str, error: Optional[BaseException]) -> None:
        self.note_callback()
        if event == parley.ConnectionEventKind.CONNECTED:
            self.connected.set()

    def on_event(self, category: str, channel_url: str, payload: Any) -> None:
        self.note_callback()
        text = text_of(category, payload)
        if text is None:
            return
        with self.lock:
            self.texts.append(text)
        if text == self.self_destroy_at:
            # The callbacks still queued run here, nested, before close returns.
            self.client.close()
            self.destroyed = True

    def post_jobs(self, count: int) -> None:
        for _ in range(count):
            number = self.jobs_posted
            self.client.post(lambda number=number: self.on_job(number))
            self.jobs_posted += 1

    def on_job(self, number: int) -> None:
        self.note_callback()
        with self.lock:
            self.jobs_run.append(number)

    def close(self) -> None:
        self.client.close()
        self.destroyed = True

    def count_of(self, text: str) -> int:
        with self.lock:
            return self.texts.count(text)

    def ordered(self, prefix: str) -> List[int]:
        with self.lock:
            return [int(text[len(prefix):]) for text in self.texts if text.startswith(prefix)]

    @property
    def is_open(self) -> bool:
        with self.lock:
            return self.connected.is_set() and self.connect_outcomes == [None]


class Population:
    """COUNT users with a session token each, one channel holding them all and a sender."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        self.sender = f"many-sender-{tag}"
        self.channel = f"many-channel-{tag}"
        admin.call("POST", "/v3/users", {"user_id": self.sender, "nickname": "sender"})
        self.users: List[Tuple[str, str]] = []
        for i in range(COUNT):
            user_id = f"many-{tag}-{i}"
            self.users.append((user_id, admin.user(user_id, nickname=f"member {i}")))
        admin.call("POST", "/v3/group_channels",
                   {"channel_url": self.channel, "user_ids": [self.sender] + [user for user, _ in self.users]})

    def post(self, text: str, attempts: int = 1) -> None:
        """Posts from the sender; retried (the req_id keeps a retry from being stored twice)."""
        for attempt in range(attempts):
            try:
                self.admin.send(self.channel, self.sender, text, req_id=text.replace(" ", "-"))
                return
            except Exception:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.1)

    def connect_all(self, server_url: str) -> List[Tracked]:
        """Every user's client, all connects started back to back; once each stream is open."""
        clients = [Tracked(server_url, user_id, token) for user_id, token in self.users]
        try:
            wait_until(lambda: all(client.is_open for client in clients), f"{COUNT} streams to open", 45)
        except AssertionError:
            failed = [client.user_id for client in clients if not client.is_open]
            close_all(clients)
            raise AssertionError(f"{len(failed)} of {COUNT} clients did not connect: {failed[:5]}")
        return clients


def close_all(clients: List[Tracked]) -> None:
    for client in clients:
        if not client.destroyed:
            client.close()


@pytest.fixture
def population(admin: Admin) -> Population:
    return Population(admin)


def test_all_connecting_at_once_succeed(server: RunningServer, population: Population) -> None:
    started = time.monotonic()
    clients = population.connect_all(server.url)
    print(f"{COUNT} clients connected at once in {time.monotonic() - started:.1f} s")
    close_all(clients)


def measure_threads() -> None:
    """Run in a process of its own by :func:`test_the_process_threads_stay_flat` (stdin: the
    server's URL and the users with their tokens; stdout: the thread counts). Earlier tests of
    a process leave threads behind (libdispatch's workers linger), which would hide some."""
    given = json.load(sys.stdin)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # The process-wide parts exist before the count: one client connected and gone.
    warm = Tracked(given["url"], *given["users"][0])
    wait_until(lambda: warm.is_open, "the first client to connect", 20)
    warm.close()
    time.sleep(1)
    before = process_threads()
    clients = [Tracked(given["url"], user_id, token) for user_id, token in given["users"]]
    wait_until(lambda: all(client.is_open for client in clients), "every stream to open", 45)
    time.sleep(1)
    after = process_threads()
    close_all(clients)
    print(json.dumps({"before": before, "after": after}))


def test_the_process_threads_stay_flat(server: RunningServer, population: Population) -> None:
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
              "import conftest, test_many_clients; test_many_clients.measure_threads()")
    measured = subprocess.run([sys.executable, "-c", script], input=json.dumps({"url": server.url, "users": population.users}),
                              capture_output=True, text=True, timeout=120)
    assert measured.returncode == 0, measured.stderr
    counts = json.loads(measured.stdout.strip().splitlines()[-1])
    before, after = counts["before"], counts["after"]
    print(f"threads: {before} before, {after} with {COUNT} clients connected: {after - before} added")
    assert after - before <= THREAD_GOAL + THREAD_SLACK, (
        f"{COUNT} clients added {after - before} threads ({before} -> {after}); "
        f"the goal is at most {THREAD_GOAL} (+{THREAD_SLACK} for the shared worker pool)")


def test_a_server_restart_under_them_loses_nothing(server: RunningServer, population: Population,
                                                   tmp_path: Path) -> None:
    clients = population.connect_all(server.url)
    texts = [f"restart {k}" for k in range(6)]
    again: Optional[subprocess.Popen] = None
    try:
        for text in texts[:3]:
            population.post(text)
        server.process.kill()
        server.process.wait()
        time.sleep(1)
        again = subprocess.Popen([str(server_binary()), "--port", server.url.rsplit(":", 1)[1], "--database",
                                  server_database(tmp_path), "--api-token", server.api_token],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert again.stdout is not None and "listening" in again.stdout.readline()
        started = time.monotonic()
        for text in texts[3:]:
            population.post(text, attempts=50)

        def missing() -> int:
            return sum(client.count_of(text) == 0 for client in clients for text in texts)

        wait_until(lambda: missing() == 0, "every client to hold every message", 40)
        held = time.monotonic() - started
        time.sleep(1.5)  # a second report of a message would come about now
        twice = [(client.user_id, text) for client in clients for text in texts if client.count_of(text) > 1]
        print(f"every client held every message {held:.1f} s after the start")
        assert twice == []
    finally:
        close_all(clients)
        stop_process(again)


def test_callbacks_run_in_order_and_exactly_once_while_clients_come_and_go(server: RunningServer,
                                                                           population: Population) -> None:
    clients = population.connect_all(server.url)
    messages = 20
    churned, self_destroying = COUNT // 3, COUNT // 6
    for i in range(churned, churned + self_destroying):
        clients[i].self_destroy_at = f"order {i % messages}"
    for client in clients:
        client.post_jobs(5)
    newcomers: List[Tracked] = []
    try:
        for k in range(messages):
            population.post(f"order {k}")
            for i in range(k * churned // messages, (k + 1) * churned // messages):
                clients[i].post_jobs(5)
                clients[i].close()
                fresh = Tracked(server.url, *population.users[i])
                fresh.post_jobs(5)
                if len(newcomers) % 2 == 0:
                    fresh.close()  # while it connects
                newcomers.append(fresh)
        survivors = clients[churned + self_destroying:]
        wait_until(lambda: all(len(client.ordered("order ")) >= messages for client in survivors),
                   "the survivors to get every message", 30)
        wait_until(lambda: all(client.destroyed for client in clients[churned:churned + self_destroying]),
                   "the clients that destroy themselves to do so", 30)
    finally:
        close_all(clients + newcomers)
    everyone = clients + newcomers
    for client in everyone:
        received = [k for k in client.ordered("order ")]
        assert received == sorted(set(received)), f"{client.user_id}: out of order or twice: {received}"
        assert client.jobs_run == list(range(client.jobs_posted)), f"{client.user_id}: jobs {client.jobs_run}"
        assert len(client.connect_outcomes) == 1, f"{client.user_id}: connect completed {len(client.connect_outcomes)} times"
        assert client.after_destroy == 0, f"{client.user_id}: {client.after_destroy} callbacks after close returned"
    for client in clients[churned + self_destroying:]:
        assert client.ordered("order ") == list(range(messages)), client.user_id


def exhaust_descriptors() -> None:
    """Run in a process of its own by
    :func:`test_clients_past_the_descriptor_limit_fail_clearly_and_the_process_lives` (stdin:
    the server's URL, a cache folder, the users with their tokens and a descriptor limit;
    stdout: the clients connected and the failures' messages)."""
    given = json.load(sys.stdin)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (given["limit"], hard))
    clients, failures = [], []
    for user_id, token in given["users"]:
        client = parley.Client(server_url=given["url"], cache_dir=given["cache_dir"])
        try:
            client.connect(user_id, token).result(30)
            clients.append(client)
        except parley.ParleyError as error:
            failures.append(str(error))
            client.close()
        print(f"{user_id}: {len(clients)} connected, {len(failures)} failed", file=sys.stderr, flush=True)
    # Whatever the clients hold, the process still opens files of its own.
    with open("/proc/self/status") as status:
        status.read()
    time.sleep(1)
    for client in clients:
        client.close()
    print(json.dumps({"connected": len(clients), "failures": failures}))


def test_clients_past_the_descriptor_limit_fail_clearly_and_the_process_lives(server: RunningServer, population: Population,
                                                                            tmp_path: Path) -> None:
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
              "import conftest, test_many_clients; test_many_clients.exhaust_descriptors()")
    package = str(Path(parley.__file__).resolve().parents[1])
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")])))
    given = {"url": server.url, "cache_dir": str(tmp_path / "caches"), "users": population.users[:90], "limit": 300}
    measured = subprocess.run([sys.executable, "-c", script], input=json.dumps(given), capture_output=True, text=True,
                              timeout=120, env=environment)
    assert measured.returncode == 0, f"the process ended with {measured.returncode}: {measured.stderr[-2000:]}"
    outcome = json.loads(measured.stdout.strip().splitlines()[-1])
    # 300 descriptors, 64 of them kept free, about 4 per client with a file cache.
    assert 10 <= outcome["connected"] < 90, outcome
    assert outcome["failures"], outcome
    assert all("no file descriptor left" in failure for failure in outcome["failures"]), outcome["failures"][:3]
