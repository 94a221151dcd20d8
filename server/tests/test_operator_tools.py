"""The operator's tools (docs/SERVER.md "Admin commands", "Metrics", "Logs", "Stopping"):
`parley-server admin` and `migrate` against a database a running server uses, the process
metrics, the lifecycle log lines, the client's address from X-Forwarded-For, and the drain
a stop begins with, seen by HAProxy's health check before the port closes."""
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from conftest import API_TOKEN, UNDO_TO_SCHEMA_10, EventReader, Server, databases, server_binary
from tests_support.balancer import Balancer


def tool_environment(**extra):
    """The test's environment without the settings a tool would take the database from."""
    env = {k: v for k, v in os.environ.items() if k not in ("PARLEY_DATABASE_URL", "PARLEY_DATABASE_URL_FILE", "PARLEY_CONFIG")}
    env.update(extra)
    return env


def tool(*args, database=None, env=None):
    """Runs `parley-server ARGS [--database DATABASE]`; returns the finished process."""
    command = [server_binary(), *args] + (["--database", database] if database else [])
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env or tool_environment())


def ok(result):
    assert result.returncode == 0, (result.args, result.returncode, result.stdout, result.stderr)
    return result.stdout.splitlines()


def fails(result, status, mentions):
    assert result.returncode == status, (result.args, result.returncode, result.stdout, result.stderr)
    assert mentions in result.stderr, result.stderr


def as_user(server, token, user):
    return requests.get(server.url(f"/v3/users/{user}"), headers={"Session-Key": token}, timeout=10)


def test_a_key_revoked_right_after_its_use_is_refused_for_writes_and_reads(fresh_server):
    """The server does not read a session key found valid in the last seconds again before the
    request's body (docs/PROTOCOL.md §1): the request itself checks it, so a key revoked just
    after a request used it is refused by the next one, which stores nothing."""
    server = fresh_server()
    db = server.db_path
    created = ok(tool("admin", "create-user", "rv-alice", "--issue-token", database=db))
    key = created[1]
    bob = server.user("rv-bob")
    url = server.channel(["rv-alice", bob], name="revoked")["channel_url"]

    def send(text):
        return requests.post(server.url(f"/v3/group_channels/{url}/messages"), headers={"Session-Key": key},
                             json={"message_type": "MESG", "message": text, "req_id": text}, timeout=10)

    assert send("before").status_code == 200
    assert ok(tool("admin", "revoke-token", key, database=db)) == ["revoked 1 session token"]
    refused = send("after")
    assert refused.status_code == 401 and refused.json()["code"] == 400301, refused.text
    assert as_user(server, key, "rv-alice").status_code == 401
    texts = [m["message"] for m in server.ok("GET", f"/v3/group_channels/{url}/messages?prev_limit=10")["messages"]]
    assert texts == ["before"], texts


def test_admin_commands_work_on_the_database_a_running_server_uses(fresh_server, tmp_path):
    server = fresh_server()
    db = server.db_path

    created = ok(tool("admin", "create-user", "ops-alice", "--nickname", "Alice", "--issue-token", database=db))
    assert created[0] == "created user ops-alice"
    first = created[1]
    assert re.fullmatch(r"[0-9a-f]{40}", first), created
    answer = as_user(server, first, "ops-alice")
    assert answer.status_code == 200 and answer.json()["nickname"] == "Alice", answer.text
    fails(tool("admin", "create-user", "ops-alice", database=db), 1, 'user "ops-alice" exists already')
    fails(tool("admin", "create-user", "", database=db), 1, '"user_id" must not be empty')

    second = ok(tool("admin", "issue-token", "ops-alice", "--expires-in", "3600", database=db))[0]
    assert as_user(server, second, "ops-alice").status_code == 200
    assert ok(tool("admin", "revoke-token", first, database=db)) == ["revoked 1 session token"]
    assert as_user(server, first, "ops-alice").status_code == 401
    assert as_user(server, second, "ops-alice").status_code == 200
    fails(tool("admin", "revoke-token", first, database=db), 1, "no session has this token")
    fails(tool("admin", "issue-token", "nobody", database=db), 1, 'no user "nobody"')

    # The channels the API made, newest first, with the members who joined.
    bob = server.user("ops-bob")
    older = server.channel(["ops-alice", bob], name="older", channel_url="ops-older")["channel_url"]
    newer = server.channel([bob], name="newer\tname", channel_url="ops-newer")["channel_url"]
    listed = ok(tool("admin", "list-channels", database=db))
    assert listed[0] == "url\tname\tcustom_type\tmembers\tcreated_at\tfrozen"
    rows = [line.split("\t") for line in listed[1:]]
    assert [row[0] for row in rows] == [newer, older], listed
    assert rows[0][1:4] == ["newer name", "", "1"] and rows[1][3] == "2", rows
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rows[0][4]), rows
    assert [line.split("\t")[0] for line in ok(tool("admin", "list-channels", "--member", "ops-alice", database=db))[1:]] \
        == [older]
    assert len(ok(tool("admin", "list-channels", "--limit", "1", database=db))) == 2

    assert ok(tool("admin", "deactivate-user", "ops-alice", database=db)) == ["deactivated user ops-alice; revoked 1 session token"]
    # The server's next write renders her as the database holds her, not as it last wrote her.
    renamed = server.ok("PUT", f"/v3/group_channels/{older}", json={"name": "renamed"})
    assert [m["is_active"] for m in renamed["members"] if m["user_id"] == "ops-alice"] == [False], renamed["members"]
    assert as_user(server, second, "ops-alice").status_code == 401
    assert server.ok("GET", "/v3/users/ops-alice")["is_active"] is False
    fails(tool("admin", "issue-token", "ops-alice", database=db), 1, "is deactivated")

    schema = ok(tool("admin", "schema-version", database=db))
    assert re.fullmatch(r"schema version (\d+) \(this server's: \1\): current", schema[0]), schema

    # Usage, settings and a missing database each have their status and a clear line.
    fails(tool("admin", "revoke-token", database=db), 64, "give either a token or --user USER_ID")
    fails(tool("admin", "list-channels", "--limit", "0", database=db), 64, "--limit must be from 1 to 10000")
    bad_config = tmp_path / "bad.json"
    bad_config.write_text('{"prot": 8080}')
    fails(tool("admin", "schema-version", "--config", str(bad_config)), 78, 'unknown key "prot"')
    missing = str(tmp_path / "missing.sqlite")
    fails(tool("admin", "create-user", "x", database=missing), 1, f"no database at {missing}")
    assert not os.path.exists(missing)
    fails(tool("admin", "schema-version", database="postgres://parley@127.0.0.1:1/nowhere"), 1,
          "cannot connect to PostgreSQL database postgres://parley@127.0.0.1:1/nowhere")


def test_check_config_resolves_every_source_and_hides_secrets(fresh_server, tmp_path):
    server = fresh_server()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"port": 9000, "log_level": "info", "trusted_proxies": "10.0.0.0/8, ::1"}))
    env = tool_environment(PARLEY_DATABASE_URL=server.db_path, PARLEY_PORT="9001", PARLEY_METRICS_TOKEN="metrics-secret")
    lines = ok(tool("admin", "check-config", "--config", str(config), "--port", "9002", "--api-token", "admin-secret",
                    env=env))
    settings = dict(line.split(" = ", 1) for line in lines if " = " in line)
    assert settings["port"] == "9002" and settings["log_level"] == "info"
    assert settings["trusted_proxies"] == "10.0.0.0/8,::1"
    assert settings["api_token"] == "(set)" and settings["metrics_token"] == "(set)"
    assert settings["shutdown_drain_seconds"] in ("0.0", "5.0")
    assert "admin-secret" not in "\n".join(lines) and "metrics-secret" not in "\n".join(lines)
    assert re.fullmatch(r"database: reachable; schema version (\d+) \(this server's: \1\): current", lines[-1]), lines
    fails(tool("admin", "check-config", "--shutdown-drain-seconds=-1"), 78,
          "--shutdown-drain-seconds: '-1' is not a number of seconds from 0")
    fails(tool("admin", "check-config", "--trusted-proxies", "10.0.0.0/33"), 78,
          "--trusted-proxies: '10.0.0.0/33': the prefix length must be a whole number in 0...32")


def schema_dump(database):
    """Every table, column, index, trigger and function of the database, as text."""
    if databases.backend() == "sqlite":
        connection = sqlite3.connect(database)
        try:
            return sorted(str(row) for row in connection.execute("SELECT type, name, sql FROM sqlite_master"))
        finally:
            connection.close()
    return databases.psql(database, """
        SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
            SELECT table_name || '.' || column_name || ' ' || data_type AS x FROM information_schema.columns
                WHERE table_schema = 'public'
            UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'
            UNION ALL SELECT tgname FROM pg_trigger WHERE NOT tgisinternal
            UNION ALL SELECT proname || ':' || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
            UNION ALL SELECT version::text || '@' || applied_at::text FROM schema_migrations) s
        """)


def test_migrate_lists_what_it_would_run_changes_nothing_then_runs_it(tmp_path):
    database = databases.new_database(tmp_path, "migrated.sqlite")
    try:
        if databases.backend() == "sqlite":
            # A dry run on no database says everything would run and creates nothing.
            everything = ok(tool("migrate", "--dry-run", database=database))
            assert everything[0].startswith("schema version 0 ") and everything[1].startswith("would apply 1: ")
            assert not os.path.exists(database)
        applied = ok(tool("migrate", database=database))
        latest = int(re.fullmatch(r"schema version (\d+): current", applied[-1]).group(1))
        assert applied[0].startswith("applied 1: ") and applied[-2].startswith(f"applied {latest}: "), applied
        assert ok(tool("migrate", database=database)) == [f"schema version {latest}: current, nothing to apply"]

        # Taken back to schema 10, as an older server left it.
        if databases.backend() == "sqlite":
            connection = sqlite3.connect(database)
            connection.executescript(UNDO_TO_SCHEMA_10)
            connection.commit()
            connection.close()
        else:
            databases.psql(database, UNDO_TO_SCHEMA_10)
        before = schema_dump(database)
        planned = ok(tool("migrate", "--dry-run", database=database))
        assert planned[0] == f"schema version 10 (this server's: {latest}): {latest - 10} migrations to apply " \
                             "(parley-server migrate, or the server's next start)", planned
        assert [int(re.match(r"would apply (\d+): \S", line).group(1)) for line in planned[1:]] == list(range(11, latest + 1))
        assert schema_dump(database) == before
        fails(tool("admin", "create-user", "early", database=database), 1,
              f"the database has schema version 10, this server needs {latest}: run `parley-server migrate` first")
        assert ok(tool("admin", "schema-version", database=database))[0] == planned[0]

        done = ok(tool("migrate", database=database))
        assert [int(re.match(r"applied (\d+): ", line).group(1)) for line in done[:-1]] == list(range(11, latest + 1))
        assert ok(tool("migrate", "--dry-run", database=database)) == [f"schema version {latest} (this server's: {latest}): current"]

        # A server starts on it without migrating again, and says so.
        server = Server(database, ["--log-level", "info"])
        try:
            server.user("after-migrate")
            started = [line for line in server.log_text().splitlines() if "started" in line]
            assert started and "migrations_applied=none" in started[0] and f"schema_version={latest}" in started[0], started
        finally:
            server.stop()
    finally:
        if databases.backend() != "sqlite":
            databases.drop_database(database)


def test_the_process_metrics_are_beside_the_server_metrics(server):
    started = time.time()
    answer = requests.get(server.url("/metrics"), timeout=10)
    assert answer.status_code == 200
    values = {}
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                 "process_open_fds", "process_max_fds", "process_start_time_seconds", "parley_process_start_time_seconds"):
        found = re.search(rf"^{name} (\S+)$", answer.text, re.M)
        assert found, f"no {name} in /metrics"
        values[name] = float(found.group(1))
    assert "# TYPE process_start_time_seconds gauge" in answer.text
    assert "# TYPE process_cpu_seconds_total counter" in answer.text
    with open(f"/proc/{server.proc.pid}/status") as status:
        rss_kb = int(re.search(r"^VmRSS:\s+(\d+) kB", status.read(), re.M).group(1))
    assert 0.5 < values["process_resident_memory_bytes"] / (rss_kb * 1024) < 2, (values, rss_kb)
    assert values["process_virtual_memory_bytes"] >= values["process_resident_memory_bytes"]
    assert 0 < values["process_cpu_seconds_total"] < (started - values["process_start_time_seconds"] + 1) * os.cpu_count()
    assert 5 <= values["process_open_fds"] <= min(len(os.listdir(f"/proc/{server.proc.pid}/fd")) + 10, values["process_max_fds"])
    assert abs(values["process_start_time_seconds"] - values["parley_process_start_time_seconds"]) < 2
    assert started - 3600 < values["process_start_time_seconds"] <= started


def access_lines(server):
    return [json.loads(line) for line in server.log_text().splitlines()
            if line.startswith("{") and json.loads(line).get("message") == "request"]


def client_of(server, forwarded_for):
    request_id = f"xff-{time.monotonic_ns()}"
    headers = {"X-Request-Id": request_id}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    assert requests.get(server.url("/health/live"), headers=headers, timeout=10).status_code == 200
    deadline = time.time() + 5
    while time.time() < deadline:
        for line in access_lines(server):
            if line["request_id"] == request_id:
                return line["client"]
        time.sleep(0.05)
    raise AssertionError(f"no access-log line for {request_id}")


def test_x_forwarded_for_names_the_client_only_behind_a_trusted_proxy(fresh_server):
    logging = ["--log-level", "info", "--log-format", "json"]
    trusting = fresh_server(logging + ["--trusted-proxies", "10.0.0.0/8,127.0.0.1"])
    try:
        assert client_of(trusting, None) == "127.0.0.1"
        assert client_of(trusting, "203.0.113.7") == "203.0.113.7"
        # The rightmost address no trusted proxy wrote: what the client put first is not believed.
        assert client_of(trusting, "198.51.100.1, 203.0.113.9, 10.1.2.3") == "203.0.113.9"
        assert client_of(trusting, "2001:db8::1") == "2001:db8::1"
        assert client_of(trusting, "not-an-address") == "127.0.0.1"
    finally:
        trusting.stop()
    for others in ([], ["--trusted-proxies", "10.0.0.0/8"]):
        untrusting = fresh_server(logging + others)
        try:
            assert client_of(untrusting, "203.0.113.7") == "127.0.0.1"
        finally:
            untrusting.stop()


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_stop_drains_behind_the_balancer_before_the_port_closes(fresh_server, tmp_path):
    """SIGTERM with a 2 s drain: HAProxy's /health/ready check sees 503 and takes the server out
    while its port is still open and it still serves; a request running across the drain is
    answered; the stream gets the reconnect hint once the drain is over; the exit is 0."""
    server = fresh_server(["--shutdown-drain-seconds", "2", "--log-level", "info"])
    port = int(server.base.rsplit(":", 1)[1])
    balancer = Balancer(tmp_path / "haproxy", [f"127.0.0.1:{port}"], ready_check=True)
    try:
        def node_status():
            return [row for row in balancer.stat_rows() if row["svname"] == "node0"][0]
        deadline = time.monotonic() + 10
        while node_status()["status"] != "UP":
            assert time.monotonic() < deadline, node_status()
            time.sleep(0.1)
        user = server.user("drained")
        stream = EventReader(server, user)
        held = {}

        def held_write():
            # Held 3 s inside its transaction (a test hook): it runs across the end of the drain.
            held["answer"] = requests.post(server.url("/v3/users"), json={"user_id": "written-while-draining"},
                                           headers={"Api-Token": API_TOKEN, "Parley-Test-Hold-Ms": "3000"}, timeout=30)
        writer = threading.Thread(target=held_write)
        writer.start()
        time.sleep(0.3)
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)

        seen_503_at = balancer_down_at = closed_at = None
        while closed_at is None and time.monotonic() - signalled < 20:
            if not port_open(port):
                closed_at = time.monotonic()
                break
            try:
                answer = requests.get(server.url("/health/ready"), timeout=2)
                if answer.status_code == 503 and seen_503_at is None:
                    assert answer.json()["event_streams"] == "closing", answer.text
                    seen_503_at = time.monotonic()
                    # Still served while draining, the stream still open.
                    assert requests.get(server.url("/health/live"), timeout=2).status_code == 200
                    assert stream.thread.is_alive()
            except requests.ConnectionError:
                pass
            status = node_status()
            if balancer_down_at is None and status["status"].startswith("DOWN"):
                balancer_down_at = time.monotonic()
                # HAProxy marks a check still running with "* " before its last result.
                assert status["check_status"].removeprefix("* ") == "L7STS" and status["check_code"] == "503", status
            time.sleep(0.05)
        assert seen_503_at is not None and closed_at is not None and seen_503_at < closed_at
        assert balancer_down_at is not None and balancer_down_at < closed_at, (balancer_down_at, closed_at)
        assert closed_at - signalled >= 1.8, closed_at - signalled
        assert server.proc.wait(timeout=20) == 0
        writer.join(20)
        assert held["answer"].status_code == 200, held["answer"].text
        stream.thread.join(10)
        assert not stream.thread.is_alive()
        log = server.log_text()
        for line in ("shutdown begun", "drain over", "shutdown done"):
            assert line in log, log[-3000:]
        assert "signal=SIGTERM" in log and "drain_seconds=2.0" in log, log[-3000:]
    finally:
        balancer.stop()


def test_without_a_drain_the_port_closes_at_once(fresh_server):
    server = fresh_server(["--shutdown-drain-seconds", "0"])
    port = int(server.base.rsplit(":", 1)[1])
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=10) == 0
    assert time.monotonic() - signalled < 1.5
    assert not port_open(port)


def test_the_log_tells_the_servers_life(fresh_server):
    server = fresh_server(["--log-level", "notice", "--log-format", "json"])
    server.user("alive")
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=15) == 0
    lines = [json.loads(line) for line in server.log_text().splitlines() if line.startswith("{")]
    messages = [line["message"] for line in lines]
    assert "started" in messages and messages[-1] == "shutdown done", messages
    assert messages.index("started") < messages.index("shutdown begun") < messages.index("shutdown done")
    started = lines[messages.index("started")]
    assert re.fullmatch(r"\d+\.\d+\.\d+", started["version"])
    assert started["backend"] == databases.backend() and re.fullmatch(r"[0-9a-f]{16}", started["node_id"])
    assert isinstance(started["schema_version"], int) and started["migrations_applied"].startswith("1,")
    assert "shutdown begun" in messages and lines[messages.index("shutdown begun")]["signal"] == "SIGINT"


def test_the_default_level_shows_the_lifecycle_and_no_requests(fresh_server, monkeypatch):
    """Started without a level, the server logs its start and stop, not each request."""
    monkeypatch.delenv("PARLEY_LOG_LEVEL", raising=False)
    server = fresh_server()
    server.user("quiet")
    server.ok("GET", "/v3/users")
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=15) == 0
    lines = server.log_text().splitlines()
    for message in ("started", "shutdown begun", "shutdown done"):
        assert any(" notice parley-server:" in line and line.endswith(" " + message) for line in lines), lines
    assert not any(line.endswith(" request") for line in lines), lines


@pytest.mark.postgres_only
def test_the_log_says_when_postgresql_is_lost_and_back(fresh_server):
    server = fresh_server(["--log-level", "notice"])
    try:
        databases.stop_cluster()
        deadline = time.time() + 15
        while "PostgreSQL unreachable" not in server.log_text():
            assert time.time() < deadline, server.log_text()[-2000:]
            time.sleep(0.2)
    finally:
        databases.start_cluster()
    deadline = time.time() + 30
    while "PostgreSQL reachable again" not in server.log_text():
        assert time.time() < deadline, server.log_text()[-2000:]
        time.sleep(0.2)
    assert re.search(r"unreachable_seconds=\d", server.log_text())


def test_the_guide_names_every_admin_command_as_its_help_does():
    """docs/SERVER.md "Admin commands": each row's command and options are in its --help."""
    guide = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              "docs", "SERVER.md")).read()
    section = guide.split("## Admin commands", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `admin ([a-z-]+)([^`]*)`", section, re.M)
    assert len(rows) >= 7, rows
    listed = ok(tool("admin", "--help"))
    for command, usage in rows:
        assert any(line.strip().startswith(command + " ") for line in listed), f"admin {command} is not in admin --help"
        help_text = "\n".join(ok(tool("admin", command, "--help")))
        for option in re.findall(r"--[a-z-]+", usage):
            assert option in help_text, f"admin {command}: {option} is in the guide, not in its --help"
