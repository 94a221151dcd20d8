"""Running the server as an operator would (docs/SERVER.md): --version and --help, settings
from the command line, the environment and a configuration file (secrets from files), bad
settings refused at start naming the key, and the health endpoints."""
import json
import os
import re
import select
import shutil
import subprocess
import time

import pytest
import requests

from concurrency_support import EventCollector
from conftest import ROOT, Server, databases, ready_answer, server_binary, wait_for_a_held_request
from tests_support.processes import stop_process

SETTING_KEYS = ["host", "port", "database", "database_file", "api_token", "api_token_file",
                "upload_limit_bytes", "event_retention", "heartbeat_seconds", "max_streams_per_user",
                "listen_backlog", "log_level", "log_format", "metrics_token", "metrics_token_file", "shutdown_grace_seconds"]
ENVIRONMENT = {"database": "PARLEY_DATABASE_URL", "database_file": "PARLEY_DATABASE_URL_FILE"}


def clean_environment(**extra):
    """The test's environment without any PARLEY_ setting of the outer run, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update(extra)
    return env


def run_briefly(args, env, timeout=20):
    return subprocess.run([server_binary()] + args, env=env, capture_output=True, text=True, timeout=timeout)


class Started:
    """A server started with exactly the given arguments and environment."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen([server_binary()] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        assert line.startswith("parley-server listening on http://"), \
            (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.base = line.strip().split(" on ", 1)[1]

    def get(self, path, token=None, **kwargs):
        headers = {"Api-Token": token} if token else {}
        return requests.get(self.base + path, headers=headers, timeout=10, **kwargs)

    def stop(self):
        stop_process(self.proc)


def library_version():
    text = open(os.path.join(os.path.dirname(ROOT), "CMakeLists.txt")).read()
    return re.search(r"project\(Parley VERSION (\S+)", text).group(1)


def test_version_is_the_library_version():
    result = run_briefly(["--version"], clean_environment())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == library_version()


def test_help_names_every_setting_with_its_environment_variable():
    result = run_briefly(["--help"], clean_environment())
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for key in SETTING_KEYS:
        assert "--" + key.replace("_", "-") in text, key
        assert ENVIRONMENT.get(key, "PARLEY_" + key.upper()) in text, key
    assert "--config" in text and "PARLEY_CONFIG" in text


def test_settings_come_from_the_file_the_environment_and_the_command_line_in_that_order(tmp_path):
    """The file says 1 stream per user, the environment 2, the command line 3: 3 count. The
    token comes from a file named by the environment, the database from the file."""
    db = databases.database_for(tmp_path, "settings.sqlite")
    token_file = tmp_path / "token"
    token_file.write_text("secret-from-a-file\n")
    config = tmp_path / "parley.json"
    config.write_text(json.dumps({"port": 0, "database": db, "max_streams_per_user": 1, "log_level": "warning"}))
    env = clean_environment(PARLEY_CONFIG=str(config), PARLEY_API_TOKEN_FILE=str(token_file),
                            PARLEY_MAX_STREAMS_PER_USER="2")
    server = Started(["--max-streams-per-user", "3"], env)
    try:
        assert server.get("/v3/users", token="secret-from-a-file").status_code == 200
        assert server.get("/v3/users", token="secret-from-a-fil").status_code == 401
        created = requests.post(server.base + "/v3/users", headers={"Api-Token": "secret-from-a-file"},
                                json={"user_id": "u1", "nickname": "u1", "profile_url": ""}, timeout=10)
        assert created.status_code == 200, created.text
        streams = [server.get("/v3/users/u1/events", token="secret-from-a-file", stream=True) for _ in range(4)]
        try:
            assert [s.status_code for s in streams] == [200, 200, 200, 429]
        finally:
            for s in streams:
                s.close()
    finally:
        server.stop()
    # Without the command line the environment's 2 count, and the database named in the
    # file is the one written.
    again = Started([], env)
    try:
        users = again.get("/v3/users", token="secret-from-a-file").json()["users"]
        assert [u["user_id"] for u in users] == ["u1"]
        streams = [again.get("/v3/users/u1/events", token="secret-from-a-file", stream=True) for _ in range(3)]
        try:
            assert [s.status_code for s in streams] == [200, 200, 429]
        finally:
            for s in streams:
                s.close()
    finally:
        again.stop()


@pytest.mark.parametrize("args, env, file, message", [
    ([], {"PARLEY_PORT": "eighty"}, None, "PARLEY_PORT: 'eighty' is not a whole number"),
    (["--port", "70000"], {}, None, "--port: '70000' is not a whole number in 0...65535"),
    ([], {}, {"prot": 8080}, 'unknown key "prot"'),
    ([], {}, {"port": True}, '"port" must be a string or a number'),
    ([], {}, {"heartbeat_seconds": 0}, '"heartbeat_seconds"'),
    ([], {"PARLEY_LOG_LEVEL": "loud"}, None, "PARLEY_LOG_LEVEL: 'loud' is no log level"),
    (["--api-token", "a", "--api-token-file", "/etc/hostname"], {}, None,
     "--api-token and --api-token-file are both given"),
    ([], {"PARLEY_API_TOKEN_FILE": "/nonexistent/token"}, None, "PARLEY_API_TOKEN_FILE: cannot read '/nonexistent/token'"),
    ([], {"PARLEY_DATABASE_URL": "mysql://x/y"}, None, "PARLEY_DATABASE_URL: unsupported database URL scheme 'mysql'"),
    ([], {}, "not json", "is not valid JSON"),
])
def test_invalid_settings_are_refused_at_start_naming_the_key(tmp_path, args, env, file, message):
    if file is not None:
        config = tmp_path / "bad.json"
        config.write_text(file if isinstance(file, str) else json.dumps(file))
        args = ["--config", str(config)] + args
    if "PARLEY_DATABASE_URL" not in env:
        args = args + ["--database", str(tmp_path / "unused.sqlite")]
    result = run_briefly(args, clean_environment(**env))
    assert result.returncode == 78, (result.returncode, result.stderr)
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "unused.sqlite").exists(), "the server went on to open its database"


def test_health_live_and_ready_need_no_credentials_and_say_nothing_sensitive(server):
    live = requests.get(server.url("/health/live"), timeout=10)
    assert live.status_code == 200
    assert live.json() == {"status": "live", "version": library_version()}
    ready = requests.get(server.url("/health/ready"), timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "version": library_version(), "database": "ok",
                            "schema": "current", "event_streams": "accepting"}
    assert "postgres" not in ready.text and "sqlite" not in ready.text
    assert requests.post(server.url("/health/ready"), timeout=10).status_code == 405


@pytest.mark.postgres_only
def test_the_event_log_compresses_its_large_values_with_lz4_where_postgresql_has_it(fresh_server):
    """Migration 31: an event of a channel of 50 is large enough for its data to be compressed,
    with LZ4 when the cluster was built with it (Debian's is)."""
    server = fresh_server()
    db = server.db_path
    has_lz4 = databases.psql(db, "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    members = [server.user("m") for _ in range(50)]
    url = server.channel(members, name="large")["channel_url"]
    server.send(url, members[0], text="large")
    methods = databases.psql(db, """
        SELECT string_agg(DISTINCT pg_column_compression(data), ',') FROM events WHERE category = 'message_received'""")
    assert methods.strip() == ("lz4" if has_lz4.strip() == "t" else "pglz"), (methods, has_lz4)


def search_trigger_calls(db):
    return int(databases.psql(db, """
        SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'parley_message_search_trigger'""") or 0)


@pytest.mark.postgres_only
def test_a_message_write_runs_the_search_trigger_only_where_it_has_work(fresh_server):
    """Migration 32: the server's upsert carries the message's search vector, so its sends run
    the trigger function not at all; an edit of the text runs it once, and so does an insert
    without a vector (an older server's, a copy made in SQL). Every vector is the one the
    function computes from the text and the file."""
    server = fresh_server()
    db = server.db_path
    databases.psql(db, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET track_functions = pl', current_database()); END $$")
    server.stop()
    server.start()  # sessions that count their function calls
    alice = server.user("alice")
    url = server.channel([alice])["channel_url"]
    ids = [server.send(url, alice, text=f"needle {n}")["message_id"] for n in range(5)]
    server.ok("PUT", f"/v3/group_channels/{url}/messages/{ids[0]}", json={"message": "haystack"})
    databases.psql(db, f"""
        CREATE TEMP TABLE copied AS SELECT * FROM messages WHERE id = {ids[1]};
        UPDATE copied SET id = id + 1000000, req_id = 'copied', message = 'copied needle', search_vector = NULL;
        INSERT INTO messages SELECT * FROM copied""")
    # Sessions report their counts when idle, at the latest 10 s after their last statement.
    deadline = time.monotonic() + 15
    while search_trigger_calls(db) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(11)
    assert search_trigger_calls(db) == 2
    assert databases.psql(db, """
        SELECT count(*) FROM messages WHERE search_vector IS DISTINCT FROM parley_message_search_vector(message, file)""").strip() == "0"
    found = server.ok("GET", "/v3/search/messages", params={"query": "needle", "channel_url": url, "user_id": alice})
    assert sorted(r["message"]["message"] for r in found["results"]) == ["copied needle", "needle 1", "needle 2", "needle 3", "needle 4"]


@pytest.mark.postgres_only
def test_ready_turns_false_while_postgresql_is_stopped_and_back_after(fresh_server):
    server = fresh_server()
    assert requests.get(server.url("/health/ready"), timeout=10).status_code == 200
    databases.stop_cluster()
    try:
        answer = ready_answer(server.url(""), 503, 15)
        assert answer.status_code == 503, answer.text
        assert answer.json()["status"] == "not_ready" and answer.json()["database"] == "unreachable", answer.text
        assert answer.headers.get("Retry-After") == "1"
        # The process itself still lives.
        assert requests.get(server.url("/health/live"), timeout=10).status_code == 200
    finally:
        databases.start_cluster()
    assert ready_answer(server.url(""), 200, 20).json()["status"] == "ready"


def listen_backlog(base_url):
    """The backlog of the socket listening at base_url's port, as the kernel reports it."""
    port = base_url.rsplit(":", 1)[1]
    lines = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True,
                           check=True).stdout.split()
    return int(lines[2])  # State Recv-Q Send-Q: Send-Q of a listening socket is its backlog


def test_the_listen_backlog_is_the_systems_largest_by_default_and_a_setting(tmp_path):
    somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
    env = clean_environment()
    default = Started(["--port", "0", "--database", str(tmp_path / "backlog.sqlite")], env)
    try:
        assert listen_backlog(default.base) == somaxconn
    finally:
        default.stop()
    small = Started(["--port", "0", "--database", str(tmp_path / "backlog.sqlite"), "--listen-backlog", "17"], env)
    try:
        assert listen_backlog(small.base) == 17
    finally:
        small.stop()
    refused = run_briefly(["--port", "0", "--database", str(tmp_path / "backlog.sqlite"), "--listen-backlog", "0"], env)
    assert refused.returncode == 78 and "listen-backlog" in refused.stderr + refused.stdout


def test_ready_turns_false_once_the_server_is_stopping(tmp_path):
    """After SIGTERM the server ends its streams and says it no longer accepts them (it may
    also stop answering at once; both are fine, a 200 is not)."""
    server = Server(databases.database_for(tmp_path, "stopping.sqlite"))
    try:
        user = server.user("stopper")
        stream = requests.get(server.url(f"/v3/users/{user}/events"), headers={"Api-Token": "test-admin-token"},
                              stream=True, timeout=10)
        assert stream.status_code == 200
        server.proc.terminate()
        try:
            answer = requests.get(server.url("/health/ready"), timeout=5)
            assert answer.status_code == 503 and answer.json()["event_streams"] == "closing", answer.text
        except requests.ConnectionError:
            pass
        assert server.proc.wait(timeout=15) == 0
        stream.close()
    finally:
        server.stop()


def test_the_installed_server_runs_from_its_configuration_file_and_its_unit_verifies(tmp_path):
    """scripts/install-server.sh into a prefix (installing the binary under test), then the
    installed server started from the example configuration (port and database changed) with
    the token from the environment; the installed systemd unit passes systemd-analyze."""
    prefix = tmp_path / "prefix"
    script = os.path.join(os.path.dirname(ROOT), "scripts", "install-server.sh")
    installed = subprocess.run(["bash", script, str(prefix)], capture_output=True, text=True, timeout=120,
                               env=clean_environment(PARLEY_SERVER_BIN=server_binary()))
    assert installed.returncode == 0, installed.stderr
    binary = prefix / "bin" / "parley-server"
    assert subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip() == library_version()
    assert (prefix / "share" / "doc" / "parley-server" / "SERVER.md").exists()
    settings = json.loads((prefix / "share" / "parley-server" / "config.example.json").read_text())
    settings.update(port=0, host="127.0.0.1", database=databases.database_for(tmp_path, "installed.sqlite"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(settings))
    proc = subprocess.Popen([str(binary), "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_environment(PARLEY_API_TOKEN="installed-token"))
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("parley-server listening on http://"), line
        base = line.strip().split(" on ", 1)[1]
        assert requests.get(base + "/v3/users", headers={"Api-Token": "installed-token"}, timeout=10).status_code == 200
        assert requests.get(base + "/health/ready", timeout=10).json()["status"] == "ready"
    finally:
        stop_process(proc)
    assert proc.returncode == 0, proc.stderr.read()
    unit = prefix / "share" / "parley-server" / "parley-server.service"
    text = unit.read_text()
    assert f"ExecStart={binary} --config /etc/parley-server/config.json" in text
    check_unit_syntax(text, binary)
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:  # else the syntax check above is all
        verified = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert verified.returncode == 0, verified.stdout + verified.stderr


def check_unit_syntax(text, binary):
    """The unit file's syntax as systemd reads it (sections, `Key=value` lines, comments, keys
    that may repeat), and the settings docs/SERVER.md promises: a dedicated user, a restart on
    failure, the token as a credential, the hardening options."""
    sections, current = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            assert line.endswith("]") and line[1:-1] in ("Unit", "Service", "Install"), (number, line)
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, (number, line)
        key, _, value = line.partition("=")
        assert key and key == key.strip() and key.replace("_", "").isalnum(), (number, line)
        current.setdefault(key, []).append(value)
    service = sections["Service"]
    assert service["ExecStart"] == [f"{binary} --config /etc/parley-server/config.json"]
    assert service["User"] == ["parley"] and service["Restart"] == ["on-failure"]
    assert service["LoadCredential"] == ["api-token:/etc/parley-server/api-token"]
    assert service["Environment"] == ["PARLEY_API_TOKEN_FILE=%d/api-token"]
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices", "RestrictSUIDSGID"):
        assert service[key] == ["yes"], key
    assert service["ProtectSystem"] == ["strict"] and "SystemCallFilter" in service
    assert sections["Install"]["WantedBy"] == ["multi-user.target"]


def access_lines(text):
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line for line in lines if line.get("message") == "request"]


def test_access_log_lines_in_json_name_route_status_caller_and_request_id_never_secrets(tmp_path):
    server = Server(databases.database_for(tmp_path, "logs.sqlite"), ["--log-level", "info", "--log-format", "json"])
    try:
        user = server.user("logger")
        session = server.session(user)
        given = server.request("GET", "/v3/users", headers={"X-Request-Id": "lb-7f3a.9"})
        assert given.headers["X-Request-Id"] == "lb-7f3a.9"
        mine = server.request("GET", f"/v3/users/{user}", token=None, session=session)
        assert mine.status_code == 200, mine.text
        made_up = server.request("GET", "/v3/group_channels/nothing-here", headers={"X-Request-Id": "not a token"})
        assert made_up.status_code == 400 or made_up.status_code == 404
        assert re.fullmatch(r"[0-9a-f]{16}", made_up.headers["X-Request-Id"])
        stranger = requests.get(server.url("/no/such/route"), timeout=10)
        deadline = time.monotonic() + 5
        while len(access_lines(server.log_text())) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        text = server.log_text()
    finally:
        server.stop()
    lines = access_lines(text)
    by_id = {line["request_id"]: line for line in lines}
    first = by_id["lb-7f3a.9"]
    assert (first["method"], first["route"], first["status"], first["caller"]) == ("GET", "/v3/users", 200, "admin")
    assert first["level"] == "info" and first["logger"] == "parley-server"
    assert isinstance(first["duration_ms"], float) and 0 <= first["duration_ms"] < 10_000
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    own = by_id[mine.headers["X-Request-Id"]]
    assert (own["route"], own["status"], own["caller"]) == ("/v3/users/:user_id", 200, user)
    other = by_id[made_up.headers["X-Request-Id"]]
    assert other["route"] == "/v3/group_channels/:channel_url" and other["status"] == made_up.status_code
    unknown = by_id[stranger.headers["X-Request-Id"]]
    assert (unknown["route"], unknown["status"], unknown["caller"]) == ("-", 404, "-")
    # The path's ids, the token and the session key appear nowhere in the log.
    for secret in ("test-admin-token", session, "nothing-here"):
        assert secret not in text


def test_text_logs_and_level_error_keeps_stderr_quiet(tmp_path):
    loud = Server(databases.database_for(tmp_path, "text.sqlite"), ["--log-level", "info"])
    quiet = Server(databases.database_for(tmp_path, "quiet.sqlite"), ["--log-level", "error"])
    try:
        for s in (loud, quiet):
            s.request("GET", "/v3/users", headers={"X-Request-Id": "text-1"})
        deadline = time.monotonic() + 5
        while "text-1" not in loud.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        loud_text, quiet_text = loud.log_text(), quiet.log_text()
    finally:
        loud.stop()
        quiet.stop()
    line = next(l for l in loud_text.splitlines() if "text-1" in l)
    assert " info parley-server: " in line and line.endswith(" request"), line
    assert "route=/v3/users" in line and "status=200" in line and "caller=admin" in line, line
    assert "text-1" not in quiet_text


def scrape(server, headers=None):
    """The samples of /metrics: {(name, frozenset(labels)): value}."""
    answer = requests.get(server.url("/metrics"), headers=headers or {}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for line in answer.text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
        assert match, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def test_metrics_move_with_traffic(tmp_path):
    server = Server(databases.database_for(tmp_path, "metrics.sqlite"))
    try:
        before = scrape(server)
        assert before[("parley_event_streams_open", frozenset())] == 0
        started = before[("parley_process_start_time_seconds", frozenset())]
        assert time.time() - 600 < started <= time.time() + 1
        sender, reader = server.user("m"), server.user("m")
        url = server.channel([sender, reader])["channel_url"]
        stream = EventCollector(server, reader)
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
        for i in range(3):
            server.send(url, sender, text=f"counted {i}")
        assert stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "message_received") >= 3, 10)
        # The hub notes what it delivered just after queueing the frames.
        deadline = time.monotonic() + 5
        after = scrape(server)
        while (after[("parley_events_delivered_through_id", frozenset())]
               < after[("parley_event_log_last_id", frozenset())]) and time.monotonic() < deadline:
            time.sleep(0.05)
            after = scrape(server)
        stream.close()
    finally:
        server.stop()

    def value(samples, name, **labels):
        return samples.get((name, frozenset(labels.items())), 0.0)

    sent = dict(method="POST", route="/v3/group_channels/:channel_url/messages", status="200")
    assert value(after, "parley_http_requests_total", **sent) - value(before, "parley_http_requests_total", **sent) == 3
    assert value(after, "parley_http_request_duration_seconds_count", method="POST",
                 route="/v3/group_channels/:channel_url/messages") == 3
    assert value(after, "parley_messages_stored_total") - value(before, "parley_messages_stored_total") == 3
    assert value(after, "parley_events_delivered_total") > value(before, "parley_events_delivered_total")
    assert value(after, "parley_event_frames_total") >= 3
    assert value(after, "parley_event_streams_open") == 1
    assert value(after, "parley_event_log_last_id") >= value(after, "parley_event_log_first_id") > 0
    # Every stored event delivered (on PostgreSQL ids have gaps: the watermark may pass the last one).
    assert value(after, "parley_events_delivered_through_id") >= value(after, "parley_event_log_last_id")
    assert value(after, "parley_db_transaction_duration_seconds_count", kind="write") > \
        value(before, "parley_db_transaction_duration_seconds_count", kind="write")
    assert value(after, "parley_db_transactions_in_flight") == 0
    # Bounded labels: the route template, never a channel url.
    assert not any(url in str(labels) for (_, labels) in after)


def test_the_guide_lists_every_metric(fresh_server, receivers):
    """docs/SERVER.md "Metrics": the table names each metric /metrics exports, with its type,
    and nothing else (a webhook call made first, so that the labelled counters exist)."""
    from hook_receiver import hook_server
    receiver = receivers()
    server = hook_server(fresh_server, "--webhook-urls", receiver.url, "--webhook-categories", "message_sent")
    alice = server.user("alice")
    server.send(server.channel([alice])["channel_url"], alice)
    receiver.wait_for(1, "message_sent")
    deadline = time.monotonic() + 10
    while True:
        text = requests.get(server.url("/metrics"), timeout=10).text
        exported = dict(re.findall(r"^# TYPE (parley_\w+) (\w+)$", text, re.M))
        if "parley_hook_deliveries_total" in exported or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    with open(os.path.join(os.path.dirname(ROOT), "docs", "SERVER.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for names, kind in re.findall(r"^\| ((?:`parley_[^`]+`(?:, )?)+) \| (\w+) \|", section, re.M):
        for name in re.findall(r"`(parley_\w+)", names):
            listed[name] = kind
    assert listed == exported


def test_metrics_behind_a_token(tmp_path):
    server = Server(databases.database_for(tmp_path, "metrics-token.sqlite"), ["--metrics-token", "scraper"])
    try:
        assert requests.get(server.url("/metrics"), timeout=10).status_code == 401
        wrong = requests.get(server.url("/metrics"), headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        assert ("parley_process_start_time_seconds", frozenset()) in scrape(server, {"Authorization": "Bearer scraper"})
    finally:
        server.stop()


def held_create(server, user_id, hold_ms, outcome):
    """Creates a user through a write that keeps its transaction open `hold_ms` first
    (PARLEY_TEST_HOOKS); puts the status, or the exception's name, into `outcome`."""
    try:
        r = requests.post(server.url("/v3/users"), json={"user_id": user_id, "nickname": user_id},
                          headers={"Api-Token": "test-admin-token", "Parley-Test-Hold-Ms": str(hold_ms)}, timeout=30)
        outcome.append(r.status_code)
    except requests.RequestException as error:
        outcome.append(type(error).__name__)


def test_sigterm_finishes_requests_in_flight_ends_streams_with_a_retry_hint_and_exits_0(tmp_path):
    import threading
    server = Server(databases.database_for(tmp_path, "stop.sqlite"))
    try:
        reader = server.user("reader")
        stream = requests.get(server.url(f"/v3/users/{reader}/events"), headers={"Api-Token": "test-admin-token"},
                              stream=True, timeout=30)
        received = bytearray()
        reading = threading.Thread(target=lambda: [received.extend(chunk) for chunk in stream.iter_content(None)])
        reading.start()
        outcome = []
        writer = threading.Thread(target=held_create, args=(server, "written-while-stopping", 1500, outcome))
        writer.start()
        wait_for_a_held_request(server)
        started = time.monotonic()
        server.proc.terminate()
        assert server.proc.wait(timeout=15) == 0
        writer.join(10)
        reading.join(10)
        assert outcome == [200], outcome
        assert time.monotonic() - started >= 0.7, "the server did not wait for the request in flight"
        assert received.endswith(b": the server is stopping; reconnect and resume\nretry: 250\n\n"), bytes(received[-200:])
        # What was answered is stored.
        server.start()
        assert server.request("GET", "/v3/users/written-while-stopping").status_code == 200
    finally:
        server.stop()


def test_a_stop_gives_up_requests_still_running_after_the_grace_period(tmp_path):
    import threading
    server = Server(databases.database_for(tmp_path, "grace.sqlite"), ["--shutdown-grace-seconds", "1"])
    try:
        outcome = []
        writer = threading.Thread(target=held_create, args=(server, "never-answered", 8000, outcome))
        writer.start()
        wait_for_a_held_request(server)
        started = time.monotonic()
        server.proc.terminate()
        assert server.proc.wait(timeout=15) == 0
        assert 0.8 <= time.monotonic() - started < 5, time.monotonic() - started
        writer.join(15)
        assert outcome and outcome[0] != 200, outcome
        # Nothing was acknowledged, and nothing half done is stored.
        server.start()
        assert server.request("GET", "/v3/users/never-answered").status_code == 404
    finally:
        server.stop()
