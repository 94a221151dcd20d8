"""What the runs of the shared scenario files (Tests/scenarios/*.json) through the binding
have in common: connecting so that events arrive live, recording each view's reports until a
step's expectations take them, waiting until the views show the server's listing, and the
steps every scenario has (admin calls, going offline and back, clearing the cache)."""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, List

import parley
from conftest import Admin

TIMEOUT = 20.0

#: A scenario's step as the file gives it.
Step = Dict[str, Any]


def connect_live(client: parley.Client, viewer: str, token: str) -> None:
    """Connects and waits until the event stream is open: the server registers a stream before
    it answers, so a message posted afterwards arrives live (one posted before would come from
    the catch-up, which the scenario's expectations do not describe)."""
    client.connect(viewer, token).result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while client.connection_state != "open":
        assert time.monotonic() < deadline, "the event stream did not open"
        time.sleep(0.005)


def create_users(scenario: Dict[str, Any], admin: Admin) -> str:
    """Creates the viewer and the other users; returns the viewer's token."""
    token = admin.user(scenario["viewer"])
    for other in scenario["others"]:
        admin.user(other)
    return token


class SeenByView:
    """The reports of each view, as entries the subclass's listener records; :meth:`take` waits
    for the one a step expects and removes it."""

    def __init__(self) -> None:
        self.entries: Dict[str, List[Any]] = {}
        self.condition = threading.Condition()

    def record(self, view: str, entries: List[Any]) -> None:
        with self.condition:
            self.entries.setdefault(view, []).extend(entries)
            self.condition.notify_all()

    def matches(self, entry: Any, expected: Dict[str, Any]) -> bool:
        raise NotImplementedError

    def describe(self, view: str) -> Any:
        """What the failure message shows of a view's entries."""
        return self.entries.get(view)

    def take(self, expected: Dict[str, Any], where: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        with self.condition:
            while True:
                for entry in self.entries.get(expected["view"], []):
                    if self.matches(entry, expected):
                        self.entries[expected["view"]].remove(entry)
                        return
                left = deadline - time.monotonic()
                assert left > 0, f"{where}: no {expected}; seen {self.describe(expected['view'])}"
                self.condition.wait(left)


def wait_for_listing(where: str, name: str, shown: Callable[[], List[Any]], truth: List[Any],
                     page: Callable[[], bool] = lambda: False) -> None:
    """Until view `name` shows `truth`; meanwhile `page()` may load a page (it says whether it did)."""
    deadline = time.monotonic() + TIMEOUT
    while shown() != truth:
        assert time.monotonic() < deadline, f"{where}: view {name} {shown()} != {truth}"
        if not page():
            time.sleep(0.02)


def run_steps(scenario: Dict[str, Any], client: parley.Client, token: str, seen: SeenByView,
              run_admin: Callable[[Step], None], run_own: Callable[[Step], bool],
              wait_for_listings: Callable[[str, bool], None]) -> None:
    """Runs the scenario's steps: an admin call, a step of the scenario's own (`run_own` says
    whether it was one), going offline, connecting again or clearing the cache; then takes
    the step's expected reports and, online, waits until the views show the server's
    listings (after a clear paging them, as they reload)."""
    online = True
    for number, step in enumerate(scenario["steps"]):
        where = f"step {number}: {json.dumps(step)[:120]}"
        if "admin" in step:
            run_admin(step)
        elif run_own(step):
            pass
        elif step.get("disconnect"):
            client.disconnect()
            online = False
        elif step.get("connect"):
            connect_live(client, scenario["viewer"], token)
            online = True
        elif step.get("clear"):
            client.clear_cached_data()
        for expected in step.get("expect", []):
            seen.take(expected, where)
        if online:  # offline, the views keep what they had
            wait_for_listings(where, bool(step.get("clear")))
