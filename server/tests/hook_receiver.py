"""The far end of the server's outgoing calls (docs/SERVER.md "Webhooks"): a real HTTP
receiver on a loopback port standing for a webhook endpoint, the push gateway or the
translator, and the checks the webhook, push and translation tests share. The `receivers`
fixture (conftest.py) makes receivers and stops them after the test."""
import hashlib
import hmac
import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import API_TOKEN, server_binary

SECRET = "webhook-test-secret"
DELIVERIES = "/v3/applications/settings/webhook/deliveries"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """An HTTP endpoint that records every POST. `answers` is a list of status codes used in
    turn (then 200); `delay` seconds pass before each answer; `reply(body)` gives the answer's
    JSON body (default none). It can be stopped and started again on the same port
    (connections are then refused meanwhile)."""

    def __init__(self, port=None, answers=(), delay=0.0, start=True, reply=None):
        self.port = port or free_port()
        self.answers = list(answers)
        self.delay = delay
        self.reply = reply
        self.calls = []
        self.lock = threading.Lock()
        self.httpd = None
        if start:
            self.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(receiver.delay)
                with receiver.lock:
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    receiver.calls.append({"headers": dict(self.headers), "raw": body, "status": status,
                                           "body": json.loads(body)})
                answer = json.dumps(receiver.reply(json.loads(body))).encode() if receiver.reply else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                if answer:
                    self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def bodies(self, category=None, delivered_only=True):
        with self.lock:
            return [c["body"] for c in self.calls
                    if (category is None or c["body"]["category"] == category) and (not delivered_only or c["status"] == 200)]

    def wait_for(self, count, category=None, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.bodies(category)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{len(self.bodies(category))} {category or ''} deliveries, expected {count}: {self.calls}")


def hook_server(fresh_server, *extra):
    """A private server that signs its calls with SECRET and retries them within a second."""
    return fresh_server(["--webhook-secret", SECRET, "--webhook-retry-max-seconds", "1", *extra])


def signature(raw):
    """The `X-Parley-Signature` a call with the body `raw` carries."""
    return "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()


def newest_delivery(server, status=None, attempts=1, timeout=10):
    """The delivery log's newest entry once it has `status` and at least `attempts` attempts.
    A receiver sees a call before the server has its answer and records the outcome, so a
    test waits for the log rather than reading it once."""
    deadline = time.monotonic() + timeout
    while True:
        entry = server.ok("GET", DELIVERIES)["deliveries"][0]
        if (status is None or entry["status"] == status) and entry["attempts"] >= attempts:
            return entry
        assert time.monotonic() < deadline, entry
        time.sleep(0.05)


def check_each_call_once_across_a_restart(server, receiver, category, send, message_id, before, queued):
    """Has `before` calls delivered, then `queued` more queued while the receiver is down;
    restarts the server, then the receiver. Every call must arrive exactly once, in order.
    `send(text)` makes one call and returns its message's id; `message_id(body)` reads it
    from a call."""
    sent = [send(f"before {i}") for i in range(before)]
    receiver.wait_for(before, category)
    receiver.stop()
    sent += [send(f"queued {i}") for i in range(queued)]
    time.sleep(1.5)  # attempts fail meanwhile: the receiver is down
    server.stop()
    server.start()
    assert len(server.ok("GET", DELIVERIES, params={"status": "pending"})["deliveries"]) == queued
    receiver.start()
    receiver.wait_for(before + queued, category, timeout=20)
    time.sleep(2)
    assert [message_id(b) for b in receiver.bodies(category)] == sent
    assert server.ok("GET", DELIVERIES, params={"status": "pending"})["deliveries"] == []


def assert_start_refused(tmp_path, args, mentions):
    """The server refuses to start with `args` (exit 78, the configuration error) and says
    `mentions` on stderr."""
    done = subprocess.run([server_binary(), "--port", "0", "--database", str(tmp_path / "db.sqlite"),
                           "--api-token", API_TOKEN, *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 78
    assert mentions in done.stderr


def assert_sends_do_not_wait(server, url, sender, count):
    """`count` sends while the receiver answers in 3 s: none waits for it. The bounds leave
    room for a loaded machine."""
    server.send(url, sender, "warm-up")
    durations = []
    for i in range(count):
        started = time.monotonic()
        server.send(url, sender, f"while slow {i}")
        durations.append(time.monotonic() - started)
    assert sorted(durations)[len(durations) // 2] < 0.5, durations
    assert max(durations) < 2.0, durations
