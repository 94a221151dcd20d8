"""The client's metrics (`Client.metrics`, docs/C-API.md "Metrics") against the real server:
each counter and gauge follows what the test did — sends, a cut connection, a resync, views
opened and disposed — and the Prometheus collector of examples/python/metrics_exporter.py
exports them."""
from __future__ import annotations

import asyncio
import importlib.util
import re
import time
from pathlib import Path
from typing import Any, List, get_type_hints

import pytest

import parley
from conftest import ROOT, Admin, RunningServer
from test_engine import (
    TIMEOUT, RestartableServer, connect, connected, event_log_bounds, make_client, poll_until, setup_pair,
    short_retention, wait_until_pruned_past,
)


def documented_names() -> List[str]:
    """The names of the table in docs/C-API.md, "Metrics", in its order."""
    text = (ROOT / "docs" / "C-API.md").read_text()
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)


def test_every_metric_is_documented_and_typed(tmp_path: Path) -> None:
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache")) as client:
        metrics = client.metrics()
    assert list(metrics) == sorted(documented_names())
    assert set(get_type_hints(parley.Metrics)) == set(metrics)
    assert metrics["connection_state"] == "closed"
    for name, value in metrics.items():
        if name != "connection_state":
            assert isinstance(value, (float if name.endswith("_seconds") or name.endswith("_seconds_total") else int)), name
            assert value >= 0, name


def test_the_callback_queue_and_the_slowest_callback(tmp_path: Path) -> None:
    """In manual dispatch the queue holds what was posted until dispatch runs it."""
    with parley.Client(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache"), dispatch_mode="manual") as client:
        client.post(lambda: time.sleep(0.05))
        client.post(lambda: None)
        queued = client.metrics()
        assert (queued["callback_queue_depth"], queued["callbacks_total"], queued["callback_slowest_seconds"]) == (2, 0, 0.0)
        assert client.dispatch() == 2
        ran = client.metrics()
        assert (ran["callback_queue_depth"], ran["callbacks_total"]) == (0, 2)
        assert 0.05 <= ran["callback_slowest_seconds"] < 5


def test_the_async_client_reads_the_same_metrics(tmp_path: Path) -> None:
    async def scenario() -> parley.Metrics:
        async with parley.AsyncClient(server_url="http://127.0.0.1:1", cache_dir=str(tmp_path / "cache")) as client:
            return client.metrics()

    assert asyncio.run(scenario())["connection_state"] == "closed"


def test_sends_events_cache_rows_and_views(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
        poll_until(lambda: client.metrics()["catch_up_passes_total"] >= 1)
        poll_until(lambda: client.metrics()["cache_channels"] == 1)
        before = client.metrics()
        assert before["connection_state"] == "open" and before["reconnects_total"] == 0
        assert before["cache_size_bytes"] > 0
        sends = [client.send_user_message(url, f"hello {index}") for index in range(3)]
        for _, result in sends:
            result.result(TIMEOUT)
        # Rows are counted again a moment after a commit (docs/C-API.md, "Metrics": cost).
        poll_until(lambda: client.metrics()["cache_messages"] == 3)
        after = client.metrics()
        assert after["sends_total"] == before["sends_total"] + 3
        assert after["sends_succeeded_total"] == before["sends_succeeded_total"] + 3
        assert after["sends_retried_total"] == 0 and after["send_failures_total"] == 0
        assert after["outbox_pending_messages"] == 0 and after["outbox_failed_messages"] == 0
        assert after["callbacks_total"] > before["callbacks_total"]
        assert after["callback_slowest_seconds"] > 0

        # Events from the stream: received and applied (a catch-up pass may store the message
        # first; the stream still delivers its event).
        admin.send(url, "bob", "from bob")
        recorder.wait(lambda: any(p["message"]["message"] == "from bob" for p in recorder.of("message_received")))
        poll_until(lambda: client.metrics()["events_received_total"] >= after["events_received_total"] + 1)
        poll_until(lambda: client.metrics()["events_applied_total"] >= after["events_applied_total"] + 1)
        poll_until(lambda: client.metrics()["cache_messages"] == 4)
        latest = client.metrics()
        assert latest["events_applied_total"] <= latest["events_received_total"]

        # The open views gauge follows creating and disposing views.
        assert latest["open_views"] == 0
        channels = client.group_channel_collection()
        messages = client.message_collection(url)
        sync = client.sync_view(url)
        search = client.search_messages("hello")
        opened = client.metrics()
        assert (opened["open_views"], opened["open_group_channel_collections"], opened["open_message_collections"],
                opened["open_sync_views"], opened["open_message_searches"]) == (4, 1, 1, 1, 1)
        messages.dispose()
        search.dispose()
        assert (client.metrics()["open_views"], client.metrics()["open_message_collections"]) == (2, 0)
        channels.dispose()
        sync.dispose()
        assert client.metrics()["open_views"] == 0

        # Every message is in the search index, or waiting in its backlog.
        indexed = client.metrics()
        assert indexed["search_index_messages"] + indexed["search_index_backlog_messages"] >= indexed["cache_messages"]

        client.disconnect()
        closed = client.metrics()
        assert closed["connection_state"] == "closed" and closed["cache_messages"] == 4


def test_a_cut_connection_counts_a_reconnect_and_the_resent_messages(tmp_path: Path) -> None:
    server = RestartableServer(tmp_path / "server.sqlite")
    server.start()
    try:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        client, recorder = make_client(server.url, tmp_path / "cache")
        with client:
            connect(client, recorder, "alice", alice_token)
            server.stop()
            recorder.wait(lambda: "reconnect_started" in recorder.names())
            sends = [client.send_user_message(url, f"offline {index}") for index in range(2)]
            for _, result in sends:
                with pytest.raises((parley.NetworkError, parley.Timeout)):
                    result.result(TIMEOUT)
            offline = client.metrics()
            assert offline["connection_state"] in ("connecting", "reconnecting")
            # Each is failed, or pending again while a drain tries it (a reconnection attempt drains).
            assert offline["outbox_failed_messages"] + offline["outbox_pending_messages"] == 2
            assert offline["outbox_failed_messages"] >= 1 or offline["sends_retried_total"] >= 1
            assert offline["send_failures_total"] >= 2 and offline["reconnects_total"] == 0
            poll_until(lambda: client.metrics()["reconnect_failures_total"] >= 1)

            server.start()
            recorder.wait(lambda: "reconnect_succeeded" in recorder.names())
            # Counted once the send completes, just after its message_sent event.
            poll_until(lambda: client.metrics()["sends_succeeded_total"] == 2)
            back = client.metrics()
            assert back["reconnects_total"] == 1
            assert back["connection_state"] == "open"
            # Each failed message went out again at least once (a drain while the server was still
            # down counts another try).
            assert back["sends_total"] == 2 and back["sends_retried_total"] >= 2 and back["sends_succeeded_total"] == 2
            assert back["outbox_failed_messages"] == 0 and back["outbox_pending_messages"] == 0
            assert back["catch_up_passes_total"] >= 2 and back["catch_up_seconds_total"] > 0
            assert back["resyncs_total"] == 0
    finally:
        server.stop()


def test_a_resync_is_counted(tmp_path: Path) -> None:
    with short_retention(tmp_path) as server:
        admin = Admin(server.running())
        alice_token, _, url = setup_pair(admin)
        with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, recorder):
            assert client.metrics()["resyncs_total"] == 0
            client.disconnect()
            away_from = event_log_bounds(server)[1]
            for index in range(6):
                admin.send(url, "bob", f"missed {index}")
            wait_until_pruned_past(server, away_from)
            connect(client, recorder, "alice", alice_token)  # past the retention: the stream says resync
            recorder.wait(lambda: recorder.of("resync"))
            metrics = client.metrics()
            assert metrics["resyncs_total"] == 1
            # A new connection after disconnect is no reconnection.
            assert metrics["reconnects_total"] == 0


def load_exporter() -> Any:
    pytest.importorskip("prometheus_client", reason="prometheus_client is not installed (scripts/setup.sh installs it)")
    spec = importlib.util.spec_from_file_location("metrics_exporter", ROOT / "examples" / "python" / "metrics_exporter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_collector_exports_every_metric(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    exporter = load_exporter()
    from prometheus_client import CollectorRegistry, generate_latest

    alice_token, _, url = setup_pair(admin)
    with connected(server.url, tmp_path / "cache", "alice", alice_token) as (client, _):
        client.send_user_message(url, "counted")[1].result(TIMEOUT)
        registry = CollectorRegistry()
        registry.register(exporter.ParleyCollector(client, const_labels={"client": "alice"}))
        text = generate_latest(registry).decode()
    assert '# TYPE parley_sends_total counter' in text
    assert 'parley_sends_total{client="alice"} 1.0' in text
    assert '# TYPE parley_cache_messages gauge' in text
    assert 'parley_connection_state{client="alice",parley_connection_state="open"} 1.0' in text
    assert 'parley_connection_state{client="alice",parley_connection_state="closed"} 0.0' in text
    for name in documented_names():
        assert f"parley_{name}" in text, name
