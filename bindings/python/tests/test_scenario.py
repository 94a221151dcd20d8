"""The shared operations scenario (Tests/scenarios/operations.json), run through the Python
binding. The Swift and C suites run the same file, so every catalog operation is exercised
from all three languages against the real server."""
from __future__ import annotations

import json
import re
from typing import Any, Dict

import parley
from parley import _native
from conftest import ROOT, Admin, RunningServer

SCENARIO = ROOT / "Tests" / "scenarios" / "operations.json"
TIMEOUT = 15


def substitute(value: Any, saved: Dict[str, Any]) -> Any:
    if isinstance(value, str):
        exact = re.fullmatch(r"\$(\w+)", value)
        if exact:
            return saved[exact.group(1)]
        return re.sub(r"\$(\w+)", lambda m: str(saved[m.group(1)]), value)
    if isinstance(value, list):
        return [substitute(item, saved) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, saved) for key, item in value.items()}
    return value


def lookup(value: Any, path: str) -> Any:
    for part in filter(None, path.split(".")):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_shared_operations_scenario(server: RunningServer, admin: Admin) -> None:
    scenario = json.loads(SCENARIO.read_text())
    clients = {}
    for user in scenario["users"]:
        token = admin.user(user)
        client = parley.Client(server_url=server.url, cache_mode="memory")
        client.connect(user, token).result(TIMEOUT)
        clients[user] = client
    saved: Dict[str, Any] = {}
    exercised = set()
    try:
        for number, step in enumerate(scenario["steps"]):
            where = f"step {number}: {json.dumps(step)}"
            if "admin" in step:
                answer = admin.call(step["admin"], substitute(step["path"], saved), substitute(step.get("body"), saved))
            else:
                exercised.add(step["op"])
                future = clients[step["as"]].perform(step["op"], substitute(step.get("params", {}), saved))
                if "error" in step:
                    try:
                        future.result(TIMEOUT)
                    except parley.ParleyError as error:
                        assert _native.lib.parley_error_name(error.code).decode() == step["error"], where
                        if "server_code" in step:
                            assert error.server_code == step["server_code"], where
                        continue
                    raise AssertionError(f"{where}: expected {step['error']}")
                answer = future.result(TIMEOUT)
            for name, path in step.get("save", {}).items():
                saved[name] = lookup(answer, path)
            for path, expected in step.get("expect", {}).items():
                assert lookup(answer, path) == substitute(expected, saved), f"{where}: {path} in {answer}"
            for path, count in step.get("expect_count", {}).items():
                assert len(lookup(answer, path)) == count, f"{where}: {path} in {answer}"
    finally:
        for client in clients.values():
            client.close()
    missing = {entry["name"] for entry in parley.operations()} - exercised
    assert missing == set(), f"operations the scenario does not cover: {sorted(missing)}"
