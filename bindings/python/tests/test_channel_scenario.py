"""The shared channel collection scenario (Tests/scenarios/channel_collection.json), run
through the Python binding. The Swift and C suites run the same file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import parse_qsl

import parley
from conftest import ROOT, Admin, RunningServer, walk_channels
from scenario_run import TIMEOUT, SeenByView, Step, connect_live, create_users, run_steps, wait_for_listing

SCENARIO = ROOT / "Tests" / "scenarios" / "channel_collection.json"


class Seen(SeenByView):
    """Changes per view, one (kind, channel, source, channel object) entry per channel."""

    def __init__(self) -> None:
        super().__init__()
        self.mismatches: List[str] = []

    def listener(self, view: str) -> Any:
        def record(change: parley.ChannelChange) -> None:
            # Every change carries the channel objects; a deletion also their URLs, which must agree.
            urls = [c["channel_url"] for c in change.channels]
            if change.kind is parley.ChangeKind.DELETED and urls != change.channel_urls:
                self.mismatches.append(f"{view}: deleted {change.channel_urls} vs objects {urls}")
            self.record(view, [(change.kind.value, url, change.context.source.value, channel)
                               for url, channel in zip(urls, change.channels)])
        return record

    def matches(self, entry: Any, expected: Dict[str, Any]) -> bool:
        return entry[0] == expected["kind"] and entry[1] == expected["channel"] and \
            ("source" not in expected or entry[2] == expected["source"]) and \
            all(entry[3].get(key) == value for key, value in expected.get("fields", {}).items())

    def describe(self, view: str) -> Any:
        return [entry[:3] for entry in self.entries.get(view, [])]


def listing(server: RunningServer, token: str, user: str, query: str) -> List[str]:
    """The server's listing for the viewer (`query`: the scenario's parameters), walked whole."""
    return walk_channels(server.url, token, user, {**dict(parse_qsl(query)), "limit": 100})


def test_shared_channel_collection_scenario(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    scenario = json.loads(SCENARIO.read_text())
    viewer = scenario["viewer"]
    token = create_users(scenario, admin)
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
                collection = views[name]

                def page() -> bool:
                    if load and collection.has_more:
                        collection.load_more().result(TIMEOUT)
                        return True
                    return False

                wait_for_listing(where, name, lambda: collection.channel_urls, listing(server, token, viewer, view["listing"]), page)

        def run_own(step: Step) -> bool:
            if "op" not in step:
                return False
            client.perform(step["op"], step.get("params", {})).result(TIMEOUT)
            return True

        wait_for_listings("after loading")
        run_steps(scenario, client, token, seen, lambda step: admin.call(step["admin"], step["path"], step.get("body")),
                  run_own, wait_for_listings)
        for collection in views.values():
            collection.dispose()
        assert not seen.mismatches
