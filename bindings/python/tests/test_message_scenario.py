"""The shared message collection scenario (Tests/scenarios/message_collection.json), run
through the Python binding. The Swift and C suites run the same file."""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import requests

import parley
from conftest import ROOT, Admin, RunningServer

SCENARIO = ROOT / "Tests" / "scenarios" / "message_collection.json"
TIMEOUT = 20.0


class Seen:
    """Reports per view: (kind, message text or "", source, status)."""

    def __init__(self) -> None:
        self.entries: Dict[str, List[Tuple[str, str, str, str]]] = {}
        self.condition = threading.Condition()

    def listener(self, view: str) -> Any:
        def record(change: parley.MessageChange) -> None:
            kind = change.kind.name.lower()
            texts = [m.get("message", "") for m in change.messages] or [""]
            with self.condition:
                self.entries.setdefault(view, []).extend(
                    (kind, text, change.context.source.value, change.context.sending_status.name.lower()) for text in texts)
                self.condition.notify_all()
        return record

    def take(self, expected: Dict[str, str], where: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        with self.condition:
            while True:
                for entry in self.entries.get(expected["view"], []):
                    if entry[0] == expected["kind"] and entry[1] == expected.get("message", "") and \
                            entry[2] == expected.get("source", entry[2]) and entry[3] == expected.get("status", entry[3]):
                        self.entries[expected["view"]].remove(entry)
                        return
                left = deadline - time.monotonic()
                assert left > 0, f"{where}: no {expected}; seen {self.entries.get(expected['view'])}"
                self.condition.wait(left)


def listing(server: RunningServer, token: str, channel: str, query: str) -> List[int]:
    """The server's listing for the viewer, walked whole, oldest first."""
    ids: List[int] = []
    position = "message_ts=0&include=true"
    while True:
        response = requests.get(f"{server.url}/v3/group_channels/{channel}/messages?{query}&prev_limit=0&next_limit=200&{position}",
                                headers={"Session-Key": token}, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        ids += [m["message_id"] for m in page["messages"]]
        if not page["has_next"]:
            return ids
        last = page["messages"][-1]
        position = f"message_ts={last['created_at']}&message_id={last['message_id']}&include=false"


def connect_live(client: parley.Client, viewer: str, token: str) -> None:
    """Connects and waits until the event stream is open: the server registers a stream before
    it answers, so a message posted afterwards arrives live (one posted before would come from
    the catch-up, which the scenario's expectations do not describe)."""
    client.connect(viewer, token).result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while client.connection_state != "open":
        assert time.monotonic() < deadline, "the event stream did not open"
        time.sleep(0.005)


def test_shared_message_collection_scenario(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    scenario = json.loads(SCENARIO.read_text())
    viewer, channel = scenario["viewer"], scenario["channel"]
    token = admin.user(viewer)
    for other in scenario["others"]:
        admin.user(other)
    ids: Dict[str, int] = {}

    def substitute(text: str) -> str:
        text = re.sub(r'"\{msg:([^}]*)\}"', lambda m: str(ids[m.group(1)]), text)
        return re.sub(r"\{msg:([^}]*)\}", lambda m: str(ids[m.group(1)]), text)

    def run_admin(step: Dict[str, Any]) -> None:
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
                truth = listing(server, token, channel, spec["listing"])
                deadline = time.monotonic() + TIMEOUT
                while shown(name) != truth:
                    assert time.monotonic() < deadline, f"{where}: view {name} {shown(name)} != {truth}"
                    if load and views[name].has_previous:
                        views[name].load_previous().result(TIMEOUT)
                    elif load and views[name].has_next:
                        views[name].load_next().result(TIMEOUT)
                    else:
                        time.sleep(0.02)

        wait_for_listings("after loading")
        online = True
        for number, step in enumerate(scenario["steps"]):
            where = f"step {number}: {json.dumps(step)[:120]}"
            if "admin" in step:
                run_admin(step)
            elif "send" in step:
                client.send_user_message(channel, step["send"])[1].result(TIMEOUT)
            elif "send_files" in step:
                sent = client.send_file_messages(channel, [{"url": url, "file_name": url.rsplit("/", 1)[-1]}
                                                           for url in step["send_files"]])
                for _, future in sent:
                    future.result(TIMEOUT)
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
            if online:
                wait_for_listings(where, load=bool(step.get("clear")))
        for view in views.values():
            view.dispose()
