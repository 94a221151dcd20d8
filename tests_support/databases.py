"""The database a test server runs on: a SQLite file (the default) or, with
PARLEY_TEST_BACKEND=postgres, a fresh database on the PostgreSQL server named by
PARLEY_TEST_PG (which `source scripts/pg-test-cluster.sh start` provides).

Either way a test gets one string to pass as the server's `--database`.
"""
from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

import pytest

BACKENDS = ("sqlite", "postgres")
SQLITE_ONLY_HELP = "sqlite_only: the test reads or writes the server's SQLite file directly; skipped on PostgreSQL"
POSTGRES_ONLY_HELP = "postgres_only: several servers share one database, which only PostgreSQL supports; skipped on SQLite"
BULK_SENDS_HELP = ("bulk_sends: the test sends thousands of messages to set up what it checks; its server runs "
                   "without the unread counters' self-check (PARLEY_VERIFY_COUNTERS), which would be most of its time")

# Every PostgreSQL database this process created, so that drop_all can remove the leftovers.
_created: List[str] = []
# database_for's memory: one database per (directory, name), so that restarts reuse it.
_by_location: Dict[Tuple[str, str], str] = {}
# dropdb runs still going: a drop takes about 0.2 s, which the next test need not wait for.
_dropping: List[subprocess.Popen] = []


def backend() -> str:
    """The backend the suites run on, from PARLEY_TEST_BACKEND (default sqlite)."""
    value = os.environ.get("PARLEY_TEST_BACKEND", "").strip().lower() or "sqlite"
    if value not in BACKENDS:
        pytest.exit(f"PARLEY_TEST_BACKEND={value!r} is not one of {', '.join(BACKENDS)}", returncode=2)
    return value


def _postgres_base() -> str:
    base = os.environ.get("PARLEY_TEST_PG", "").strip()
    if not base:
        pytest.exit("PARLEY_TEST_BACKEND=postgres needs PARLEY_TEST_PG (postgres://USER@HOST:PORT); "
                    "start a throwaway server with: source scripts/pg-test-cluster.sh start", returncode=2)
    return base


def _client_command(tool: str, base: str) -> Tuple[List[str], Dict[str, str]]:
    """createdb/dropdb with the connection options of `base`, and its environment."""
    parts = urlsplit(base)
    binary = os.path.join(os.environ["PARLEY_PG_BIN"], tool) if os.environ.get("PARLEY_PG_BIN") else tool
    command = [binary, "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432),
               "-U", parts.username or "parley"]
    env = dict(os.environ)
    if parts.password:
        env["PGPASSWORD"] = parts.password
    return command, env


def _with_database(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def new_database(tmp_path: Union[str, Path], name: str) -> str:
    """A new, empty database for one server: the path `tmp_path/name` on SQLite (created by
    the server itself), or a database made with createdb on PostgreSQL, as its URL."""
    if backend() == "sqlite":
        return str(Path(tmp_path) / name)
    base = _postgres_base()
    database = f"parley_{secrets.token_hex(8)}"
    command, env = _client_command("createdb", base)
    result = subprocess.run(command + [database], env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        pytest.fail(f"createdb {database} failed ({result.returncode}): {result.stderr.strip()}")
    url = _with_database(base, database)
    _created.append(url)
    return url


def database_for(tmp_path: Union[str, Path], name: str = "server.sqlite") -> str:
    """new_database, but the same answer for the same directory and name: a test that
    stops and starts its server by building the location again gets the same database."""
    key = (str(tmp_path), name)
    if key not in _by_location:
        _by_location[key] = new_database(tmp_path, name)
    return _by_location[key]


def drop_database(url: str) -> None:
    """Removes a database new_database made. Connections still open to it are ended. On
    PostgreSQL the drop goes on in the background (its name is never given out again);
    drop_all waits for every drop still running."""
    if url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(url)
        base = urlunsplit((parts.scheme, parts.netloc, "", parts.query, ""))
        command, env = _client_command("dropdb", base)
        _dropping[:] = [running for running in _dropping if running.poll() is None]
        _dropping.append(subprocess.Popen(command + ["--if-exists", "--force", parts.path.lstrip("/")], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if url in _created:
            _created.remove(url)
        for key in [k for k, v in _by_location.items() if v == url]:
            del _by_location[key]
    else:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.remove(url + suffix)
            except FileNotFoundError:
                pass


def psql(url: str, sql: str) -> str:
    """Runs SQL on a PostgreSQL database new_database made (psql, unaligned, tuples only) and
    returns what it printed."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, "", parts.query, ""))
    command, env = _client_command("psql", base)
    result = subprocess.run(command + ["-d", parts.path.lstrip("/"), "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
                            env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        pytest.fail(f"psql failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


class PsqlSession:
    """One psql session kept open on a database new_database made, for tests that hold a lock
    or a transaction while the server runs: `run` sends SQL and returns what it printed
    (unaligned, tuples only), with errors in the text rather than raised."""

    _marker = "--parley-psql-done--"

    def __init__(self, url: str):
        parts = urlsplit(url)
        base = urlunsplit((parts.scheme, parts.netloc, "", parts.query, ""))
        command, env = _client_command("psql", base)
        self.process = subprocess.Popen(command + ["-d", parts.path.lstrip("/"), "-At", "-q"], env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def run(self, sql: str) -> str:
        self.process.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + self._marker + "\n")
        self.process.stdin.flush()
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("psql ended: " + "".join(lines))
            if line.strip() == self._marker:
                return "".join(lines)
            lines.append(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(10)


def _as_cluster_owner(command: List[str]) -> List[str]:
    # scripts/pg-test-cluster.sh runs the cluster as "parleypg" when started by root.
    return ["runuser", "-u", "parleypg", "--"] + command if os.geteuid() == 0 else command


def stop_cluster() -> None:
    """Stops the test cluster of scripts/pg-test-cluster.sh (fast: sessions are ended), as an
    administrator restarting it would. `start_cluster` brings it back on the same port."""
    pg_ctl = os.path.join(os.environ["PARLEY_PG_BIN"], "pg_ctl")
    data = os.path.join(os.environ["PARLEY_PG_DIR"], "data")
    subprocess.run(_as_cluster_owner([pg_ctl, "-D", data, "-m", "fast", "-w", "-t", "60", "stop"]),
                   check=True, capture_output=True, timeout=90)


def start_cluster() -> None:
    pg_ctl = os.path.join(os.environ["PARLEY_PG_BIN"], "pg_ctl")
    directory = os.environ["PARLEY_PG_DIR"]
    subprocess.run(_as_cluster_owner([pg_ctl, "-D", os.path.join(directory, "data"), "-l",
                                      os.path.join(directory, "server.log"), "-w", "-t", "60", "start"]),
                   check=True, capture_output=True, timeout=90)


def drop_created_in(tmp_path: Union[str, Path]) -> None:
    """Drops the PostgreSQL databases database_for made for `tmp_path` (one test's)."""
    for (directory, _), url in list(_by_location.items()):
        if directory == str(tmp_path) and url.startswith(("postgres://", "postgresql://")):
            drop_database(url)


def drop_all() -> None:
    """Drops every PostgreSQL database this process created and has not dropped yet, and
    waits until every drop has ended."""
    for url in list(_created):
        drop_database(url)
    for running in _dropping:
        try:
            running.wait(timeout=60)
        except subprocess.TimeoutExpired:
            running.kill()
    _dropping.clear()


def register_markers(config: pytest.Config) -> None:
    config.addinivalue_line("markers", SQLITE_ONLY_HELP)
    config.addinivalue_line("markers", POSTGRES_ONLY_HELP)
    config.addinivalue_line("markers", BULK_SENDS_HELP)


def skip_by_backend(items: List[pytest.Item]) -> None:
    """Skips the tests marked sqlite_only when the backend is not SQLite, and those marked
    postgres_only when it is not PostgreSQL."""
    wrong = "postgres_only" if backend() == "sqlite" else "sqlite_only"
    skip = pytest.mark.skip(reason=f"{wrong}: not run on the {backend()} backend")
    for item in items:
        if item.get_closest_marker(wrong):
            item.add_marker(skip)
