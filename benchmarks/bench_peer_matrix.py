"""bench_peer_matrix: the "Peer" rows -- P3 and P7 measured on a Synapse home server with
matrix-nio clients, on this machine, in the same run as Parley's rows.

    build/peer-venv/bin/python benchmarks/bench_peer_matrix.py [--quick] [--members N]

scripts/bench-peer-setup.sh installs Synapse and matrix-nio from PyPI into build/peer-venv;
run this script with that environment's Python. Run with a Python that lacks them, it says
so, prints its rows as not measured and exits 0 (so does a run that fails on the way).

Synapse runs as a subprocess from a temporary directory (SQLite database, plain HTTP on a
loopback port, rate limits raised out of reach, presence off, users registered through the
shared secret); it is stopped and the directory removed on every exit.

P3, as bench_live: one user's client (matrix-nio `room_send`, one request in flight, each
at its time on the schedule, or at once when its time has passed; the rate reached is
printed) sends 500 messages (200 with --quick) into a room of 2 at 50 and at 200 per
second; the other user's client runs `sync_forever` (long-poll /sync). Latency: from
the send call to the receiver's event callback for the m.room.message (p50, p99, max);
lost: not seen 5 s after the last send.

P7, as bench_server: one room of 50 members, each with a matrix-nio client in a sync loop
(50 long-polls open, all past a first message before the runs). 4 sends in flight, each
message from the next member in turn, sending stopped after 8 s (3 s with --quick; half
that for the room of 2): a burst into a room of 2 of the members, a burst into the room of
50, then the room of 50 paced at 200 msg/s, or at half the burst's rate where Synapse takes
less (so that the latency is not the length of its queue). Throughput = accepted sends /
wall time of the burst. Delivery: from the send call until the last of the room's clients
has it (p50, p99, max); lost: an accepted message some client still lacks when 5 s pass
without a new delivery.
All clients live in this one asyncio process; its CPU and Synapse's are printed beside.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

try:
    import nio
    import synapse  # noqa: F401  (the server runs as `python -m synapse.app.homeserver`)
    from signedjson.key import generate_signing_key, write_signing_keys
    MISSING: Optional[str] = None
except ImportError as error:  # the peer is not installed in this Python
    MISSING = str(error)

PEER = "(Synapse + matrix-nio)"
GOAL = "Parley >= 2x better"
P3_RATES = (50, 200)
P7_SENDERS = 4
P7_PACED_RATE = 200
SYNC_TIMEOUT_MS = 30000


PRINTED: set = set()


def row(measure: str, figure: str, comparison: str, goal: str = GOAL) -> None:
    PRINTED.add(measure)
    print(f"ROW\t{measure}\t{figure}\t{comparison}\t{goal}", flush=True)


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def row_names(members: int) -> List[tuple]:
    """(measure, Parley's counterpart) of every row, in order."""
    return [
        (f"Peer P3 live delivery at {P3_RATES[0]} msg/s {PEER}", f"Parley: P3 live delivery at {P3_RATES[0]} msg/s"),
        (f"Peer P3 live delivery at {P3_RATES[1]} msg/s {PEER}", f"Parley: P3 live delivery at {P3_RATES[1]} msg/s"),
        (f"Peer P7 accepted messages, {members} members {PEER}",
         "Parley: P7 SQLite: accepted messages"),
        (f"Peer P7 delivery to all {members}, paced {PEER}",
         f"Parley: P7 SQLite: delivery to all {members} at {P7_PACED_RATE} msg/s"),
        (f"Peer P7 delivery to all {members}, burst {PEER}", f"Parley: P7 SQLite: delivery to all {members} (burst)"),
    ]


def rows_not_measured(members: int, why: str) -> None:
    for measure, counterpart in row_names(members):
        if measure not in PRINTED:
            row(measure, "not measured", f"{why}; {counterpart}")


# ---- Synapse --------------------------------------------------------------------------------

class Synapse:
    """A Synapse of its own in a temporary directory; `stop` ends it and removes the directory."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="parley-bench-synapse-")
        self.secret = secrets.token_hex(24)
        self.process: Optional[subprocess.Popen] = None
        self.url = ""

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        path = lambda name: os.path.join(self.dir, name)  # noqa: E731
        unlimited = {"per_second": 100000, "burst_count": 100000}
        config: Dict[str, Any] = {
            "server_name": "localhost",
            "pid_file": path("homeserver.pid"),
            "listeners": [{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                           "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
            "database": {"name": "sqlite3", "args": {"database": path("homeserver.db")}},
            "log_config": path("log.yaml"),
            "media_store_path": path("media"),
            "signing_key_path": path("signing.key"),
            "registration_shared_secret": self.secret,
            "enable_registration": False,
            "macaroon_secret_key": secrets.token_hex(24),
            "form_secret": secrets.token_hex(24),
            "report_stats": False,
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "bcrypt_rounds": 4,  # registration only; no login is timed
            "presence": {"enabled": False},
            "url_preview_enabled": False,
            # A benchmark: every rate limit out of reach.
            "rc_message": unlimited,
            "rc_registration": unlimited,
            "rc_login": {"address": unlimited, "account": unlimited, "failed_attempts": unlimited},
            "rc_joins": {"local": unlimited, "remote": unlimited},
            "rc_joins_per_room": unlimited,
            "rc_invites": {"per_room": unlimited, "per_user": unlimited, "per_issuer": unlimited},
            "rc_room_creation": unlimited,
            "rc_presence": {"per_user": unlimited},
            "rc_delayed_event_mgmt": unlimited,
            "rc_user_directory": unlimited,
            "rc_profile": unlimited,
        }
        logging_config = {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "filename": path("homeserver.log"), "formatter": "plain"}},
            "root": {"level": "WARNING", "handlers": ["file"]},
        }
        # JSON is YAML.
        with open(path("homeserver.yaml"), "w") as out:
            json.dump(config, out, indent=1)
        with open(path("log.yaml"), "w") as out:
            json.dump(logging_config, out, indent=1)
        with open(path("signing.key"), "w") as out:
            write_signing_keys(out, [generate_signing_key("a_bench")])

        def die_with_parent() -> None:  # PR_SET_PDEATHSIG: no Synapse outlives this script
            try:
                ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)
            except OSError:
                pass

        self.process = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", path("homeserver.yaml")],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=open(path("stdout.log"), "w"), stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent)
        started = time.monotonic()
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"Synapse exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_matrix/client/versions", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                pass
            if time.monotonic() - started > 120:
                raise RuntimeError(f"Synapse did not answer within 120 s:\n{self.log_tail()}")
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - started

    def log_tail(self, lines: int = 15) -> str:
        text = ""
        for name in ("stdout.log", "homeserver.log"):
            try:
                with open(os.path.join(self.dir, name)) as log:
                    text += "".join(log.readlines()[-lines:])
            except OSError:
                pass
        return text

    def problems(self) -> List[str]:
        """Warning and error lines Synapse logged so far."""
        try:
            with open(os.path.join(self.dir, "homeserver.log")) as log:
                # Not counted: the start banner, and long-polls the clients dropped when they stopped.
                return [line.rstrip() for line in log if "synapse.config.logger" not in line
                        and "Not sending response to request" not in line
                        and (" WARNING " in line or " ERROR " in line or " CRITICAL " in line)]
        except OSError:
            return []

    def cpu_seconds(self) -> float:
        if self.process is None:
            return 0.0
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    # Setup calls, plain HTTP (nothing here is timed).
    def call(self, method: str, path: str, body: Optional[dict] = None, token: Optional[str] = None) -> dict:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode())
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path}: {error.code} {error.read()[:300]!r}") from None

    def register(self, name: str) -> dict:
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        password = secrets.token_hex(12)
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        for part in (nonce, name, password):
            mac.update(part.encode() + b"\x00")
        mac.update(b"notadmin")
        return self.call("POST", "/_synapse/admin/v1/register",
                         {"nonce": nonce, "username": name, "password": password, "admin": False, "mac": mac.hexdigest()})


# ---- matrix-nio clients ---------------------------------------------------------------------

class NioWarnings(logging.Handler):
    """Counts what matrix-nio warns of (429 retries, timeouts) instead of printing it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        key = record.msg.split(",")[0] if isinstance(record.msg, str) else str(record.msg)
        self.counts[key] = self.counts.get(key, 0) + 1


def client_for(url: str, user: dict) -> "nio.AsyncClient":
    client = nio.AsyncClient(url, user["user_id"], store_path=None,
                             config=nio.AsyncClientConfig(request_timeout=120, store_sync_tokens=False))
    client.restore_login(user["user_id"], user["device_id"], user["access_token"])
    return client


async def ready_to_sync(client: "nio.AsyncClient") -> str:
    """A filter that lets a sync carry every new event (the default timeline of 10 would cut
    a busy room's sync short), and a first sync, so that the loop starts at the present."""
    answer = await client.upload_filter(room={"timeline": {"limit": 1000}})
    if not isinstance(answer, nio.UploadFilterResponse):
        raise RuntimeError(f"upload_filter: {answer}")
    first = await client.sync(timeout=0, sync_filter=answer.filter_id)
    if not isinstance(first, nio.SyncResponse):
        raise RuntimeError(f"first sync: {first}")
    return answer.filter_id


class Tracker:
    """Which receiver saw which message when; one per run (body prefix `tag`)."""

    def __init__(self, tag: str, receivers: int) -> None:
        self.tag = tag + " "
        self.receivers = receivers
        self.sent: Dict[int, float] = {}
        self.answered: Dict[int, float] = {}
        self.accepted: Dict[int, bool] = {}
        self.seen: Dict[int, int] = {}
        self.first: Dict[int, float] = {}
        self.last: Dict[int, float] = {}
        self.by_receiver: Dict[int, set] = {}
        self.duplicates = 0
        self.complete = 0
        self.last_delivery = 0.0
        self.first_error = ""

    def on_event(self, receiver: int, body: str) -> None:
        now = time.monotonic()
        if not body.startswith(self.tag):
            return
        index = int(body[len(self.tag):])
        seen_here = self.by_receiver.setdefault(receiver, set())
        if index in seen_here:
            self.duplicates += 1
            return
        seen_here.add(index)
        self.seen[index] = self.seen.get(index, 0) + 1
        self.first.setdefault(index, now)
        self.last[index] = self.last_delivery = now
        if self.seen[index] == self.receivers:
            self.complete += 1

    async def wait_all(self, grace: float, cap: float = 120) -> None:
        """Until every receiver has every accepted message, or `grace` seconds pass without a
        new delivery (at most `cap` seconds)."""
        started = time.monotonic()
        while self.complete < sum(self.accepted.values()):
            now = time.monotonic()
            if now - max(self.last_delivery, started) > grace or now - started > cap:
                return
            await asyncio.sleep(0.01)

    def result(self) -> dict:
        ok = [i for i, accepted in self.accepted.items() if accepted]
        delays = [(self.last[i] - self.sent[i]) * 1e3 for i in ok if self.seen.get(i, 0) == self.receivers]
        firsts = [(self.first[i] - self.sent[i]) * 1e3 for i in ok if i in self.first]
        answers = [(self.answered[i] - self.sent[i]) * 1e3 for i in ok]
        nan = float("nan")
        return {"sent": len(self.accepted), "accepted": len(ok), "failed": len(self.accepted) - len(ok),
                "lost": len(ok) - len(delays), "partial": sum(1 for i in ok if 0 < self.seen.get(i, 0) < self.receivers),
                "p50": quantile(delays, 0.5) if delays else nan, "p99": quantile(delays, 0.99) if delays else nan,
                "max": max(delays) if delays else nan, "first_p50": quantile(firsts, 0.5) if firsts else nan,
                "answer_p50": quantile(answers, 0.5) if answers else nan, "duplicates": self.duplicates,
                "error": self.first_error}


async def send_one(client: "nio.AsyncClient", room: str, tracker: Tracker, index: int) -> None:
    tracker.sent[index] = time.monotonic()
    answer = await client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": f"{tracker.tag}{index}"})
    tracker.answered[index] = time.monotonic()
    tracker.accepted[index] = isinstance(answer, nio.RoomSendResponse)
    if not tracker.accepted[index] and not tracker.first_error:
        tracker.first_error = str(answer)[:200]


def listen(client: "nio.AsyncClient", receiver: int, trackers: Dict[str, List[Tracker]]) -> None:
    """Messages in each room of `trackers` go to that room's trackers."""
    def on_message(where: "nio.MatrixRoom", event: "nio.RoomMessageText") -> None:
        for tracker in trackers.get(where.room_id, ()):
            tracker.on_event(receiver, event.body)
    client.add_event_callback(on_message, nio.RoomMessageText)


class CpuMeter:
    def __init__(self, server: Synapse) -> None:
        self.server = server
        self.wall, self.mine, self.theirs = time.monotonic(), time.process_time(), server.cpu_seconds()

    def text(self) -> str:
        wall = max(time.monotonic() - self.wall, 1e-9)
        return (f"CPU: Synapse {100 * (self.server.cpu_seconds() - self.theirs) / wall:.0f} %, "
                f"the clients' process {100 * (time.process_time() - self.mine) / wall:.0f} % of a core")


async def stop_loops(clients: List["nio.AsyncClient"], loops: List["asyncio.Task"]) -> None:
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


# ---- P3 ------------------------------------------------------------------------------------------

async def p3(server: Synapse, sender_user: dict, receiver_user: dict, room: str, messages: int) -> List[dict]:
    """As bench_live: one send in flight, each at its time on the schedule (or at once when
    the schedule is past)."""
    sender, receiver = client_for(server.url, sender_user), client_for(server.url, receiver_user)
    warm = Tracker("p3-warm", 1)
    trackers = [Tracker(f"p3-{rate}", 1) for rate in P3_RATES]
    listen(receiver, 0, {room: [warm] + trackers})
    loops: List[asyncio.Task] = []
    results = []
    try:
        filter_id = await ready_to_sync(receiver)
        loops.append(asyncio.create_task(receiver.sync_forever(timeout=SYNC_TIMEOUT_MS, sync_filter=filter_id)))
        for index in range(3):  # the loop runs and the sender's connection is open
            await send_one(sender, room, warm, index)
            await warm.wait_all(30)
        for rate, tracker in zip(P3_RATES, trackers):
            meter = CpuMeter(server)
            started = next_at = time.monotonic()
            for index in range(messages):
                now = time.monotonic()
                if now < next_at:
                    await asyncio.sleep(next_at - now)
                next_at += 1 / rate
                await send_one(sender, room, tracker, index)
            sending = time.monotonic() - started
            waited = time.monotonic()
            while tracker.complete < messages and time.monotonic() - waited < 5:
                await asyncio.sleep(0.005)
            result = tracker.result()
            result["lost"] = messages - len(tracker.seen)
            result.update(rate=rate, achieved=messages / sending, messages=messages, cpu=meter.text())
            results.append(result)
    finally:
        await stop_loops([sender, receiver], loops)
    return results


# ---- P7 ------------------------------------------------------------------------------------------

async def p7_run(senders: List["nio.AsyncClient"], room: str, tracker: Tracker, count: int, rate: float,
                 seconds: float, server: Synapse) -> dict:
    """Up to `count` messages, each from the next of `senders` in turn, P7_SENDERS in flight,
    at `rate` per second (0: as fast as answered); sending stops after `seconds`."""
    meter = CpuMeter(server)
    started = time.monotonic()
    taken = 0

    async def slot() -> None:
        nonlocal taken
        while taken < count and time.monotonic() - started < seconds:
            index = taken
            taken += 1
            if rate:
                delay = started + index / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await send_one(senders[index % len(senders)], room, tracker, index)

    await asyncio.gather(*(slot() for _ in range(P7_SENDERS)))
    sending = time.monotonic() - started
    cpu = meter.text()
    await tracker.wait_all(5)
    result = tracker.result()
    result.update(seconds=sending, rate=result["accepted"] / sending, cpu=cpu)
    return result


async def p7(server: Synapse, users: List[dict], room: str, pair_room: str, count: int, seconds: float) -> dict:
    """As bench_server: a burst into 2 of the members, a burst into all of them, then a paced
    run at 200 msg/s or at half the burst's rate if that is less (a rate the server takes)."""
    members = len(users)
    receivers = [client_for(server.url, user) for user in users]
    senders = [client_for(server.url, user) for user in users]
    warm, pair_warm = Tracker("p7-warm", members), Tracker("p7-warm", 2)
    pair, burst = Tracker("p7-pair", 2), Tracker("p7-burst", members)
    gaps = [0]

    async def on_sync(response: "nio.SyncResponse") -> None:
        for joined_room, joined in response.rooms.join.items():
            if joined_room in (room, pair_room) and joined.timeline.limited:
                gaps[0] += 1

    big_trackers: List[Tracker] = [warm, burst]
    loops: List[asyncio.Task] = []
    try:
        opening = time.monotonic()
        filters = await asyncio.gather(*(ready_to_sync(client) for client in receivers))
        for index, (client, filter_id) in enumerate(zip(receivers, filters)):
            listen(client, index, {room: big_trackers, pair_room: [pair_warm, pair]})
            client.add_response_callback(on_sync, nio.SyncResponse)
            loops.append(asyncio.create_task(client.sync_forever(timeout=SYNC_TIMEOUT_MS, sync_filter=filter_id)))
        await send_one(senders[0], room, warm, 0)
        await warm.wait_all(60)
        opened = time.monotonic() - opening
        if warm.complete < 1:
            raise RuntimeError(f"the first message reached {warm.seen.get(0, 0)} of {members} sync loops in 60 s")
        # Every sender's connection open before the runs.
        await asyncio.gather(*(send_one(client, room, warm, 1 + i) for i, client in enumerate(senders[1:])))
        await send_one(senders[1], pair_room, pair_warm, 0)
        await warm.wait_all(10)
        await pair_warm.wait_all(10)
        pair_result = await p7_run(senders[:2], pair_room, pair, count, 0, seconds / 2, server)
        burst_result = await p7_run(senders, room, burst, count, 0, seconds, server)
        rate = P7_PACED_RATE if burst_result["rate"] >= 2 * P7_PACED_RATE else max(1, int(burst_result["rate"] / 2))
        paced = Tracker("p7-paced", members)
        big_trackers.append(paced)
        paced_result = await p7_run(senders, room, paced, max(10, int(rate * seconds)), rate, seconds + 5, server)
        paced_result["offered"] = rate
    finally:
        await stop_loops(receivers + senders, loops)
    return {"opened": opened, "pair": pair_result, "burst": burst_result, "paced": paced_result, "gaps": gaps[0]}


# ---- main ----------------------------------------------------------------------------------------

def figure(result: dict, total: int) -> str:
    return (f"p50 {result['p50']:.1f} p99 {result['p99']:.1f} ms, max {result['max']:.0f}, "
            f"lost {result['lost']}/{total}")


async def watched(server: Synapse, args: argparse.Namespace) -> None:
    """measure() under a watch: Synapse exiting or the run outlasting its limit is a failure;
    SIGTERM cancels it like Ctrl-C (asyncio.run turns SIGINT into a cancellation)."""
    run = asyncio.ensure_future(measure(server, args))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, run.cancel)
    limit = 300 if args.quick else 600
    deadline = time.monotonic() + limit
    try:
        while not run.done():
            await asyncio.wait({run}, timeout=0.5)
            if run.done():
                break
            failure = None
            if server.process is not None and server.process.poll() is not None:
                failure = f"Synapse exited with {server.process.returncode} during the run"
            elif time.monotonic() > deadline:
                failure = f"the run took longer than {limit} s"
            if failure:
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
                raise RuntimeError(failure)
    except asyncio.CancelledError:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        raise
    run.result()


async def measure(server: Synapse, args: argparse.Namespace) -> None:
    members = args.members
    tag = secrets.token_hex(3)
    started = time.monotonic()
    # P3's two users are not among P7's members: each run starts from clients that never synced.
    users = [server.register(f"bench{tag}m{i}") for i in range(members + 2)]
    p3_users, users = users[members:], users[:members]
    registered = time.monotonic()

    def room_of(people: List[dict], preset: str) -> str:
        made = server.call("POST", "/_matrix/client/v3/createRoom", {"preset": preset}, people[0]["access_token"])
        for person in people[1:]:
            server.call("POST", f"/_matrix/client/v3/join/{made['room_id']}", {}, person["access_token"])
        return made["room_id"]

    small, pair, big = room_of(p3_users, "public_chat"), room_of(users[:2], "public_chat"), room_of(users, "public_chat")
    print(f"  {members + 2} users registered in {registered - started:.1f} s (shared secret), rooms of 2, 2 and {members} "
          f"made in {time.monotonic() - registered:.1f} s", flush=True)

    messages = 200 if args.quick else 500
    for result in await p3(server, p3_users[0], p3_users[1], small, messages):
        measure_name, counterpart = row_names(members)[P3_RATES.index(result["rate"])]
        print(f"P3 live messages in a room of 2 at {result['rate']} msg/s offered ({result['achieved']:.0f} sent), "
              f"room_send -> receiver's event callback ({messages})", flush=True)
        print(f"  p50 {result['p50']:7.2f} ms   p99 {result['p99']:7.2f} ms   max {result['max']:7.2f} ms   "
              f"lost {result['lost']}   send errors {result['failed']}   room_send answered p50 {result['answer_p50']:.1f} ms",
              flush=True)
        print(f"  {result['cpu']}", flush=True)
        text = figure(result, messages)
        if result["achieved"] < 0.95 * result["rate"]:
            text += f", sent at {result['achieved']:.0f}/s"
        row(measure_name, text, counterpart)

    seconds = 3.0 if args.quick else 8.0
    outcome = await p7(server, users, big, pair, 3000, seconds)
    print(f"P7 one room of {members} members, {members} matrix-nio sync loops (all open after {outcome['opened']:.1f} s), "
          f"{P7_SENDERS} sends in flight, sender = the next member in turn, room_send -> every member's sync loop", flush=True)
    paced_title = f"{members} members, {outcome['paced']['offered']} msg/s:"
    for title, key, receivers in (("2 members, burst:", "pair", 2), (f"{members} members, burst:", "burst", members),
                                  (paced_title, "paced", members)):
        result = outcome[key]
        print(f"  {title:24} {result['sent']:5d} sent, {result['accepted']:5d} accepted in {result['seconds']:.1f} s: "
              f"{result['rate']:6.1f} msg/s   {result['cpu']}", flush=True)
        print(f"  {'':24} answered p50 {result['answer_p50']:.1f} ms; first loop p50 {result['first_p50']:.1f} ms; last of "
              f"{receivers} p50 {result['p50']:.1f}  p99 {result['p99']:.1f}  max {result['max']:.1f} ms; lost {result['lost']} "
              f"({result['partial']} partly delivered)" + (f"; first send error: {result['error']}" if result["error"] else ""),
              flush=True)
    if outcome["paced"]["offered"] != P7_PACED_RATE:
        print(f"  (paced at half the burst's rate: Synapse does not take twice {P7_PACED_RATE} msg/s here)")
    if outcome["gaps"]:
        print(f"  syncs with a cut timeline (limited): {outcome['gaps']}")
    names = row_names(members)
    pair, burst, paced = outcome["pair"], outcome["burst"], outcome["paced"]
    row(names[2][0], f"{burst['rate']:.1f} msg/s (2 members: {pair['rate']:.0f})", names[2][1])
    row(names[3][0], figure(paced, paced["accepted"]) + f" at {paced['offered']} msg/s", names[3][1])
    row(names[4][0], figure(burst, burst["accepted"]) + f" at {burst['rate']:.1f} msg/s", names[4][1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--members", type=int, default=50, help="P7 room size (default 50)")
    args = parser.parse_args()
    if args.members < 2:
        parser.error("--members must be at least 2")
    print(f"Peer: Synapse + matrix-nio on this machine ({os.cpu_count()} cores, shared by Synapse, its clients and the rest)",
          flush=True)
    if MISSING is not None:
        print(f"  the peer is not installed in this Python ({MISSING}); run scripts/bench-peer-setup.sh and this script "
              f"with build/peer-venv/bin/python -- no Peer rows measured", flush=True)
        rows_not_measured(args.members, "peer not installed")
        return 0

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    nio_warnings = NioWarnings()
    nio_logger = logging.getLogger("nio")
    nio_logger.addHandler(nio_warnings)
    nio_logger.propagate = False

    server = Synapse()
    interrupted = False
    try:
        server.start()
        print(f"  Synapse {package_version('matrix-synapse')} (SQLite, rate limits off, presence off) answering after "
              f"{server.start_seconds:.1f} s; matrix-nio {package_version('matrix-nio')}", flush=True)
        asyncio.run(watched(server, args))
        if nio_warnings.counts:
            print(f"  matrix-nio warnings: {nio_warnings.counts}")
        problems = server.problems()
        if problems:
            print(f"  Synapse logged {len(problems)} warnings/errors; the first: {problems[0][:200]}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    except Exception as error:  # the peer failed: say so, the rest of the benchmark goes on
        traceback.print_exc()
        print(f"  the peer run failed: {error}", flush=True)
        tail = server.log_tail()
        if tail:
            print("  Synapse's log ends:\n" + "\n".join("    " + line for line in tail.splitlines()), flush=True)
        rows_not_measured(args.members, f"peer run failed: {str(error).splitlines()[0][:80]}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal does not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        server.stop()
    if interrupted:
        print("  interrupted: Synapse stopped, its directory removed", flush=True)
        return 130
    return 0


def package_version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


if __name__ == "__main__":
    sys.exit(main())
