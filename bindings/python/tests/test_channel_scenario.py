"""The shared channel collection scenario (Tests/scenarios/channel_collection.json), run
through the Python binding. The Swift and C suites run the same file."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import requests

import parley
from conftest import ROOT, Admin, RunningServer
from test_message_scenario import connect_live

SCENARIO = ROOT / "Tests" / "scenarios" / "channel_collection.json"
TIMEOUT = 20.0


class Seen:
    """Changes per view, one (kind, channel, source, channel object) entry per channel."""

    def __init__(self) -> None:
        self.entries: Dict[str, List[Tuple[str, str, str, Any]]] = {}
        self.mismatches: List[str] = []
        self.condition = threading.Condition()

    def listener(self, view: str) -> Any:
        def record(change: parley.ChannelChange) -> None:
            # Every change carries the channel objects; a deletion also their URLs, which must agree.
            urls = [c["channel_url"] for c in change.channels]
            if change.kind is parley.ChangeKind.DELETED and urls != change.channel_urls:
                self.mismatches.append(f"{view}: deleted {change.channel_urls} vs objects {urls}")
            with self.condition:
                self.entries.setdefault(view, []).extend(
                    (change.kind.value, url, change.context.source.value, channel) for url, channel in zip(urls, change.channels))
                self.condition.notify_all()
        return record

    def take(self, expected: Dict[str, str], where: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        with self.condition:
            while True:
                for entry in self.entries.get(expected["view"], []):
                    if entry[0] == expected["kind"] and entry[1] == expected["channel"] and \
                            ("source" not in expected or entry[2] == expected["source"]) and \
                            all(entry[3].get(key) == value for key, value in expected.get("fields", {}).items()):
                        self.entries[expected["view"]].remove(entry)
                        return
                left = deadline - time.monotonic()
                assert left > 0, f"{where}: no {expected}; seen {[entry[:3] for entry in self.entries.get(expected['view'], [])]}"
                self.condition.wait(left)


def listing(server: RunningServer, token: str, user: str, query: str) -> List[str]:
    urls: List[str] = []
    position = ""
    while True:
        response = requests.get(f"{server.url}/v3/users/{user}/my_group_channels?{query}&limit=100{position}",
                                headers={"Session-Key": token}, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        urls += [channel["channel_url"] for channel in page["channels"]]
        if not page["next"]:
            return urls
        position = "&token=" + requests.utils.quote(page["next"])


def test_shared_channel_collection_scenario(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    scenario = json.loads(SCENARIO.read_text())
    viewer = scenario["viewer"]
    token = admin.user(viewer)
    for other in scenario["others"]:
        admin.user(other)
    for step in scenario["setup"]:
        admin.call(step["admin"], step["path"], step.get("body"))
    seen = Seen()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50) as client:
        connect_live(client, viewer, token)
        views: Dict[str, parley.GroupChannelCollection] = {}
        for name, view in scenario["views"].items():
            collection = client.group_channel_collection(view["query"])
            collection.add_listener(seen.listener(name))
            while collection.has_more:
                collection.load_more().result(TIMEOUT)
            views[name] = collection

        def wait_for_listings(where: str, load: bool = False) -> None:
            """Until every view lists what the server lists; with `load`, views with more are
            paged meanwhile (after a clear they reload their first page and are walked again)."""
            for name, view in scenario["views"].items():
                truth = listing(server, token, viewer, view["listing"])
                deadline = time.monotonic() + TIMEOUT
                while views[name].channel_urls != truth:
                    assert time.monotonic() < deadline, f"{where}: view {name} {views[name].channel_urls} != {truth}"
                    if load and views[name].has_more:
                        views[name].load_more().result(TIMEOUT)
                    else:
                        time.sleep(0.02)

        wait_for_listings("after loading")
        online = True
        for number, step in enumerate(scenario["steps"]):
            where = f"step {number}: {json.dumps(step)[:120]}"
            if "admin" in step:
                admin.call(step["admin"], step["path"], step.get("body"))
            elif "op" in step:
                client.perform(step["op"], step.get("params", {})).result(TIMEOUT)
            elif step.get("disconnect"):
                client.disconnect()
                online = False
            elif step.get("connect"):
                connect_live(client, viewer, token)
                online = True
            elif step.get("clear"):
                client.clear_cached_data()
            for expected in step.get("expect", []):
                seen.take(expected, where)
            if online:  # offline, the views keep what they had
                wait_for_listings(where, load=bool(step.get("clear")))
        for collection in views.values():
            collection.dispose()
        assert not seen.mismatches
