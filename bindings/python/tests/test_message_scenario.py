"""The shared message collection scenario (Tests/scenarios/message_collection.json), run
through the Python binding. The Swift and C suites run the same file."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import parse_qsl

import parley
from conftest import ROOT, Admin, RunningServer, walk_messages
from scenario_run import TIMEOUT, SeenByView, Step, connect_live, create_users, run_steps, wait_for_listing

SCENARIO = ROOT / "Tests" / "scenarios" / "message_collection.json"


class Seen(SeenByView):
    """Reports per view: (kind, message text or "", source, status)."""

    def listener(self, view: str) -> Any:
        def record(change: parley.MessageChange) -> None:
            kind = change.kind.name.lower()
            texts = [m.get("message", "") for m in change.messages] or [""]
            self.record(view, [(kind, text, change.context.source.value, change.context.sending_status.name.lower())
                               for text in texts])
        return record

    def matches(self, entry: Any, expected: Dict[str, Any]) -> bool:
        return entry[0] == expected["kind"] and entry[1] == expected.get("message", "") and \
            entry[2] == expected.get("source", entry[2]) and entry[3] == expected.get("status", entry[3])


def listing(server: RunningServer, token: str, channel: str, query: str) -> List[int]:
    """The server's listing for the viewer (`query`: the scenario's filters), walked whole, oldest first."""
    return walk_messages(server.url, token, channel, dict(parse_qsl(query)))


def test_shared_message_collection_scenario(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    scenario = json.loads(SCENARIO.read_text())
    viewer, channel = scenario["viewer"], scenario["channel"]
    token = create_users(scenario, admin)
    ids: Dict[str, int] = {}

    def substitute(text: str) -> str:
        text = re.sub(r'"\{msg:([^}]*)\}"', lambda m: str(ids[m.group(1)]), text)
        return re.sub(r"\{msg:([^}]*)\}", lambda m: str(ids[m.group(1)]), text)

    def run_admin(step: Step) -> None:
        body = json.loads(substitute(json.dumps(step["body"]))) if "body" in step else None
        answer = admin.call(step["admin"], substitute(step["path"]), body)
        if step["admin"] == "POST" and step["path"].endswith("/messages") and "message_id" in answer:
            ids[answer["message"]] = answer["message_id"]

    for step in scenario["setup"]:
        run_admin(step)
    seen = Seen()
    with parley.Client(server_url=server.url, cache_dir=str(tmp_path / "cache"), reconnect_initial_delay_ms=50) as client:
        connect_live(client, viewer, token)
        views: Dict[str, parley.MessageCollection] = {}
        for name, spec in scenario["views"].items():
            point = parley.NEWEST if spec["starting_point"] == "newest" else 0
            view = client.message_collection(channel, point, spec["params"])
            view.add_listener(seen.listener(name))
            view.start()[1].result(TIMEOUT)
            while view.has_previous:
                view.load_previous().result(TIMEOUT)
            while view.has_next:
                view.load_next().result(TIMEOUT)
            views[name] = view

        def shown(name: str) -> List[int]:
            messages = [m for m in views[name].messages if "sending_status" not in m]
            order = [m["message_id"] for m in messages]
            return order[::-1] if scenario["views"][name]["params"].get("reverse") else order

        def wait_for_listings(where: str, load: bool = False) -> None:
            """Until every view shows what the server lists; with `load`, views are paged both
            ways meanwhile (after a clear they reload around their starting point)."""
            for name, spec in scenario["views"].items():
                view = views[name]

                def page() -> bool:
                    if load and view.has_previous:
                        view.load_previous().result(TIMEOUT)
                    elif load and view.has_next:
                        view.load_next().result(TIMEOUT)
                    else:
                        return False
                    return True

                wait_for_listing(where, name, lambda: shown(name), listing(server, token, channel, spec["listing"]), page)

        def run_own(step: Step) -> bool:
            if "send" in step:
                client.send_user_message(channel, step["send"])[1].result(TIMEOUT)
            elif "send_files" in step:
                sent = client.send_file_messages(channel, [{"url": url, "file_name": url.rsplit("/", 1)[-1]}
                                                           for url in step["send_files"]])
                for _, future in sent:
                    future.result(TIMEOUT)
            else:
                return False
            return True

        wait_for_listings("after loading")
        run_steps(scenario, client, token, seen, run_admin, run_own, wait_for_listings)
        for view in views.values():
            view.dispose()
