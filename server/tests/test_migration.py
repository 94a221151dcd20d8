"""A database written by an earlier server reads exactly as that server read it (issue 22).

tests/fixtures/legacy-v1.sqlite was written through the REST API by the server of the
`records` / `events` / `counters` layout (members as `member` records), legacy-v0.sqlite holds
the same data in the layout before it (members inside the channel records); both have their
upload directory beside them. legacy-v1.expected.json holds the reads that server served
from them (make_legacy_fixture.py writes all four; legacy_fixture.py holds the capture).

For each fixture the server under test starts on a copy, which it may migrate once; every
golden read must come back the same, field by field. A second start on the same copy must
change nothing in the file (no second migration) and serve the same reads again.
"""
import json
import os
import sqlite3

import pytest

import legacy_fixture
from conftest import Server

HERE = os.path.dirname(os.path.abspath(__file__))
# PARLEY_LEGACY_FIXTURES: another directory of fixtures (e.g. fresh ones from make_legacy_fixture.py --out).
FIXTURES = os.environ.get("PARLEY_LEGACY_FIXTURES") or os.path.join(HERE, "fixtures")

# SQLite only: the fixtures are SQLite files. (The marker is registered in conftest.py by the
# storage-backend work; until then pytest only warns about it.)
pytestmark = pytest.mark.sqlite_only


@pytest.fixture(scope="module")
def golden():
    with open(os.path.join(FIXTURES, "legacy-v1.expected.json"), encoding="utf-8") as f:
        data = json.load(f)
    assert data["format"] == legacy_fixture.FORMAT
    return data


def dump_database(path):
    """Every table's schema and rows, sorted; read-only (the server may be running)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        for name, sql in tables:
            rows = db.execute(f'SELECT * FROM "{name}"').fetchall()
            out[name] = (sql, sorted(rows, key=repr))
        return out
    finally:
        db.close()


def assert_same_reads(expected, actual, what):
    report = legacy_fixture.describe_differences(expected, actual)
    if report:
        pytest.fail(f"{what}: the reads differ from the golden file\n{report}", pytrace=False)


@pytest.mark.parametrize("fixture", ["legacy-v1", "legacy-v0"])
def test_legacy_database_serves_the_same_reads(fixture, golden, tmp_path, monkeypatch):
    manifest, expected = golden["manifest"], golden["reads"]
    db = str(tmp_path / f"{fixture}.sqlite")
    legacy_fixture.copy_fixture(os.path.join(FIXTURES, f"{fixture}.sqlite"), db)
    # The fixtures' uploads are recorded as `<fixture>.sqlite.files/<id>`, relative to the
    # working directory of the server that wrote them (see legacy_fixture.working_directory).
    monkeypatch.chdir(tmp_path)

    # First start: migrates if it must.
    server = Server(db, legacy_fixture.SERVER_ARGS)
    try:
        first = legacy_fixture.capture(server.base, manifest)
    finally:
        server.stop()
    assert_same_reads(expected, first, f"{fixture}, first start")
    after_first = dump_database(db)

    # Second start on the same file: nothing to migrate; the REST reads change nothing on disk
    # (the event streams that follow write presence, `last_seen_at`).
    server = Server(db, legacy_fixture.SERVER_ARGS)
    try:
        second = legacy_fixture.capture(server.base, manifest, events=False)
        after_second = dump_database(db)
        second.update(legacy_fixture.capture(server.base, manifest, rest=False))
    finally:
        server.stop()
    changed = sorted(t for t in set(after_first) | set(after_second) if after_first.get(t) != after_second.get(t))
    if changed:
        pytest.fail(f"{fixture}: the second start changed the tables {changed}", pytrace=False)
    assert_same_reads(expected, second, f"{fixture}, second start")
