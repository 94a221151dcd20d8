"""docs/SERVER.md walked through as an operator would, one section after another, with what the
page says read from the page itself: install into a prefix, --version and --help (every row of
the settings table), start the installed server from a configuration file with the token from
the environment and logs at info in JSON, the health answers, /metrics before and after
traffic (every metric of the table present, counters moving), the access-log lines, a backup
while the server runs and a server started on it, ready turning false while PostgreSQL is
stopped, and SIGTERM with event streams open: exit 0, the documented retry hint, and a client
that reconnects to the restarted server and resumes exactly after its last event."""
import json
import os
import re
import select
import subprocess
import threading
import time
from types import SimpleNamespace
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

from conftest import ROOT, ready_answer, server_binary
from hook_receiver import Receiver
from tests_support import databases
from tests_support.processes import stop_process

GUIDE = os.path.join(os.path.dirname(ROOT), "docs", "SERVER.md")
TOKEN = "guide-token-from-the-environment"


def guide_section(title):
    """The text of the `## title` section of docs/SERVER.md."""
    text = open(GUIDE).read()
    match = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"docs/SERVER.md has no section {title!r}"
    return match.group(1)


def table_rows(section):
    """The body rows of the first Markdown table in `section`, as lists of cell texts."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    # "\|" inside a cell is a literal bar.
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))] for row in rows[2:]]


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update(extra)
    return env


class Installed:
    """The installed binary, started with `--config FILE` and the token in the environment."""

    def __init__(self, binary, config, log_path):
        self.binary, self.config, self.log_path = binary, config, log_path
        self.proc = None
        self.start()

    def start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([str(self.binary), "--config", str(self.config)], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=clean_environment(PARLEY_API_TOKEN=TOKEN))
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        assert line.startswith("parley-server listening on http://"), (line, open(self.log_path).read()[-2000:])
        self.base = line.strip().split(" on ", 1)[1]

    def url(self, path):
        return self.base + path

    def call(self, method, path, **kwargs):
        headers = {"Api-Token": TOKEN}
        headers.update(kwargs.pop("headers", {}))
        answer = requests.request(method, self.url(path), headers=headers, timeout=15, **kwargs)
        assert answer.status_code == 200, (method, path, answer.status_code, answer.text)
        return answer

    def log_lines(self):
        lines = []
        for line in open(self.log_path).read().splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.log.close()


def scrape(server):
    answer = requests.get(server.url("/metrics"), timeout=10)
    assert answer.status_code == 200, answer.text
    samples = {}
    for line in answer.text.splitlines():
        if line and not line.startswith("#"):
            match = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
            assert match, line
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def total(samples, name, **labels):
    wanted = set(labels.items())
    return sum(value for (n, ls), value in samples.items() if n == name and wanted <= set(ls))


class Stream:
    """An event stream read on a thread, bytes kept, with the frames' ids."""

    def __init__(self, server, user, last_event_id=None):
        headers = {"Api-Token": TOKEN}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.resp = requests.get(server.url(f"/v3/users/{user}/events"), headers=headers, stream=True, timeout=(5, 60))
        assert self.resp.status_code == 200, self.resp.text
        self.received = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for chunk in self.resp.iter_content(None):
                self.received.extend(chunk)
        except Exception:
            pass

    def ids(self):
        return [int(m) for m in re.findall(rb"^id: (\d+)$", bytes(self.received), re.M)]

    def wait_for(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.05)
        return predicate(self)


def test_the_server_guide_walked_through(tmp_path):
    # "Build and install": the script, with the binary under test instead of a release build.
    build = guide_section("Build and install")
    assert "bash scripts/install-server.sh /usr/local" in build
    prefix = tmp_path / "prefix"
    installed = subprocess.run(["bash", os.path.join(os.path.dirname(ROOT), "scripts", "install-server.sh"), str(prefix)],
                               capture_output=True, text=True, timeout=120,
                               env=clean_environment(PARLEY_SERVER_BIN=server_binary()))
    assert installed.returncode == 0, installed.stderr
    for row in table_rows(build):
        path = row[0].strip("`").replace("PREFIX", str(prefix))
        assert os.path.isfile(path), f"the guide says the install puts {row[0]} there"
    binary = prefix / "bin" / "parley-server"
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    assert re.search(r"--version\s+# " + re.escape(version) + r",", build), version
    help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30).stdout
    flat_help = " ".join(help_text.split())

    # "Settings": every row is an option with its variable in --help.
    settings_rows = table_rows(guide_section("Settings"))
    assert len(settings_rows) >= 15
    for key, option, variable, default, meaning in settings_rows:
        option, variable = option.strip("`").split()[0], variable.strip("`")
        assert option in flat_help, f"{option} is in the guide, not in --help"
        assert f"env {variable}" in flat_help, f"{variable} is in the guide, not in --help"

    # "Start": from the example configuration (the guide's own), port and database changed,
    # logs in JSON so that the access lines can be read back; the token from the environment.
    database = databases.new_database(tmp_path, "guide.sqlite")
    settings = json.loads((prefix / "share" / "parley-server" / "config.example.json").read_text())
    assert settings.get("log_level") == "info", "the guide says the example configuration logs at info"
    # "Webhooks": the sends below reach a receiver, signed with the admin token.
    hooks = Receiver()
    settings.update(host="127.0.0.1", port=0, database=database, log_format="json",
                    webhook_urls=hooks.url, webhook_categories="message_sent")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(settings))
    server = Installed(binary, config, tmp_path / "server.log")
    try:
        # The token was taken from the environment: a wrong one is refused, the right one works.
        assert requests.get(server.url("/v3/users"), headers={"Api-Token": "wrong"}, timeout=10).status_code == 401
        server.call("GET", "/v3/users")

        # "Health": the two documented answers, word for word.
        health = guide_section("Health")
        live = requests.get(server.url("/health/live"), timeout=10)
        assert live.status_code == 200 and live.json() == {"status": "live", "version": version}
        documented_ready = json.loads(re.findall(r'^\{"status":"ready".*\}$', health, re.M)[0])
        ready = requests.get(server.url("/health/ready"), timeout=10)
        assert ready.status_code == 200 and ready.json() == documented_ready | {"version": version}, ready.text

        # "Metrics": every metric of the table is exposed; the counters move with traffic.
        metric_names = re.findall(r"`(parley_[a-z_]+)[`{]", guide_section("Metrics"))
        assert len(metric_names) >= 12
        before = scrape(server)
        sender, reader = "guide-sender", "guide-reader"
        for user in (sender, reader):
            server.call("POST", "/v3/users", json={"user_id": user, "nickname": user, "profile_url": ""})
        channel = server.call("POST", "/v3/group_channels", json={"user_ids": [sender, reader]}).json()["channel_url"]
        stream = Stream(server, reader)
        assert stream.wait_for(lambda s: b"event: connected" in s.received)
        sent = [server.call("POST", f"/v3/group_channels/{channel}/messages",
                            json={"message_type": "MESG", "user_id": sender, "message": f"guide {i}"}).json()
                for i in range(3)]
        assert stream.wait_for(lambda s: bytes(s.received).count(b"guide ") >= 3)
        hooks.wait_for(3)
        verify = re.search(r"```python\n(.*?)```", guide_section("Webhooks"), re.S).group(1)
        for raw, signature in [(call["raw"], call["headers"]["X-Parley-Signature"]) for call in hooks.calls]:
            rejected = []
            exec(verify, {"secret": TOKEN, "raw_body": raw, "request": SimpleNamespace(headers={"X-Parley-Signature": signature}),
                          "reject": lambda: rejected.append(raw)})
            assert not rejected
            assert json.loads(raw)["category"] == "message_sent"
        after = scrape(server)
        exposed = {name for name, _ in after}
        for name in metric_names:
            assert name in exposed or name + "_bucket" in exposed, f"{name} is in the guide, not in /metrics"
        route = "/v3/group_channels/:channel_url/messages"
        assert total(after, "parley_http_requests_total", method="POST", route=route, status="200") \
            - total(before, "parley_http_requests_total", method="POST", route=route, status="200") == 3
        assert total(after, "parley_messages_stored_total") - total(before, "parley_messages_stored_total") == 3
        assert total(after, "parley_event_streams_open") == 1
        assert total(after, "parley_events_delivered_total") > total(before, "parley_events_delivered_total")
        assert total(after, "parley_event_log_last_id") >= max(stream.ids())
        assert total(after, "parley_hook_deliveries_total", outcome="delivered") == 3
        assert total(after, "parley_hook_queue_depth") == 0

        # "Logs": one JSON line per request with the documented keys, the request id of the
        # response, the route template; never the token, the texts or the path's ids.
        logs = guide_section("Logs")
        documented_line = json.loads(next(l for l in logs.splitlines() if l.startswith('{"time"')))
        given = requests.get(server.url("/v3/users/" + sender), headers={"Api-Token": TOKEN, "X-Request-Id": "guide-1"},
                             timeout=10)
        assert given.headers["X-Request-Id"] == "guide-1"
        deadline = time.monotonic() + 5
        while not any(l.get("request_id") == "guide-1" for l in server.log_lines()) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [l for l in server.log_lines() if l.get("message") == "request"]
        line = next(l for l in lines if l["request_id"] == "guide-1")
        assert set(line) == set(documented_line), (line, documented_line)
        assert (line["route"], line["status"], line["caller"], line["method"]) == ("/v3/users/:user_id", 200, "admin", "GET")
        assert sum(1 for l in lines if l["route"] == route and l["method"] == "POST") == 3
        log_text = open(server.log_path).read()
        for secret in (TOKEN, "guide 0", channel, sender):
            assert secret not in log_text, secret

        # "Backup", while the server runs; a server started on the copy has the same data.
        backup = guide_section("Backup")
        copy_config = tmp_path / "copy.json"
        if databases.backend() == "sqlite":
            command = re.search(r'`(sqlite3 \S+ "\.backup \S+")`', backup).group(1)
            copy = str(tmp_path / "copy.sqlite")
            command = command.replace("/var/lib/parley-server/parley.sqlite", database).replace("/backups/parley.sqlite", copy)
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            copy_database = copy
        else:
            dump_line = re.search(r"`(pg_dump [^`]+)`", backup).group(1)
            restore_line = re.search(r"`(pg_restore [^`]+)`", backup).group(1)
            copy_database = databases.new_database(tmp_path, "copy")
            dump = str(tmp_path / "parley.dump")
            parts, copy_parts = urlsplit(database), urlsplit(copy_database)
            base_env = dict(os.environ, PGHOST=parts.hostname, PGPORT=str(parts.port), PGUSER=parts.username or "parley")
            if parts.password:
                base_env["PGPASSWORD"] = parts.password
            bin_dir = os.environ.get("PARLEY_PG_BIN", "")
            dump_command = dump_line.replace("pg_dump", os.path.join(bin_dir, "pg_dump") if bin_dir else "pg_dump", 1) \
                .replace(" parley >", f" {parts.path.lstrip('/')} >").replace("parley.dump", dump)
            restore_command = restore_line.replace("pg_restore", os.path.join(bin_dir, "pg_restore") if bin_dir else "pg_restore", 1) \
                .replace("--dbname=parley", f"--dbname={copy_parts.path.lstrip('/')}").replace("parley.dump", dump)
            for command in (dump_command, restore_command):
                done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, env=base_env)
                assert done.returncode == 0, (command, done.stderr)
        copy_config.write_text(json.dumps(settings | {"database": copy_database, "log_level": "error"}))
        restored = Installed(binary, copy_config, tmp_path / "copy.log")
        try:
            path = f"/v3/group_channels/{channel}/messages?message_ts=0&prev_limit=0&next_limit=10&include=false"
            original = server.call("GET", path).json()["messages"]
            assert [m["message_id"] for m in original] == [m["message_id"] for m in sent]
            assert restored.call("GET", path).json()["messages"] == original
            # Online state is the running server's (the reader's stream), not stored data.
            def stored(users):
                return [{k: v for k, v in u.items() if k != "is_online"} for u in users]
            assert stored(restored.call("GET", "/v3/users?limit=100").json()["users"]) \
                == stored(server.call("GET", "/v3/users?limit=100").json()["users"])
        finally:
            restored.stop()

        # "The two backends": while PostgreSQL is away, ready turns false and comes back.
        if databases.backend() == "postgres":
            databases.stop_cluster()
            try:
                answer = ready_answer(server.base, 503, 20)
                assert answer.status_code == 503 and answer.json()["database"] == "unreachable", answer.text
                assert answer.headers["Retry-After"] == "1"
                assert json.loads(re.findall(r'^\{"status":"not_ready".*\}$', health, re.M)[0]) | {"version": version} \
                    == answer.json()
            finally:
                databases.start_cluster()
            assert ready_answer(server.base, 200, 30).status_code == 200

        # "Stopping": SIGTERM with the stream open ends it with the documented hint, exit 0.
        stopping = guide_section("Stopping")
        hint = re.search(r"`(: the server is stopping[^`]*)`, `(retry: \d+)`", stopping)
        last_seen = max(stream.ids())
        server.proc.terminate()
        assert server.proc.wait(timeout=30) == 0
        stream.thread.join(15)
        assert bytes(stream.received).endswith(f"{hint.group(1)}\n{hint.group(2)}\n\n".encode()), bytes(stream.received[-200:])
        server.stop()

        # The client reconnects (to the server started again) and resumes by Last-Event-ID:
        # what was sent meanwhile arrives, nothing it had seen comes again.
        server.start()
        later = server.call("POST", f"/v3/group_channels/{channel}/messages",
                            json={"message_type": "MESG", "user_id": sender, "message": "after the restart"}).json()
        resumed = Stream(server, reader, last_event_id=last_seen)
        assert resumed.wait_for(lambda s: b"after the restart" in s.received), bytes(resumed.received)
        assert resumed.ids() and min(resumed.ids()) > last_seen
        ids = resumed.ids()
        assert ids == sorted(set(ids)), ids
        received = [json.loads(m) for m in re.findall(rb"^event: message_received\ndata: (.*)$", bytes(resumed.received), re.M)]
        assert [m["message"]["message_id"] for m in received] == [later["message_id"]], received
        resumed.resp.close()
    finally:
        server.stop()
        hooks.stop()
