"""The Python in bindings/python/README.md is what it says: every ```python block passes
`mypy --strict` as written, and each program the README marks (the comment
`<!-- executed by tests/test_readme_examples.py: NAME.py -->` on the line before its block)
runs unchanged against the real server, its output compared with what the server holds."""
from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

from conftest import ROOT, Admin, RunningServer, listed, listing_for

pytest.importorskip("mypy", reason="mypy is not installed (scripts/setup.sh installs it)")

from test_typing import mypy  # noqa: E402

README = ROOT / "bindings" / "python" / "README.md"
MARKER = re.compile(r"<!-- executed by tests/test_readme_examples\.py: (\S+\.py) -->")
# The programs these tests run: a program marked in the README and not run here fails the check below.
PROGRAMS = {"make_user.py", "first.py", "chat.py"}
TIMEOUT = 120  # seconds for one program; generous, the machine may be busy


class Block(NamedTuple):
    line: int  # the README's line number of the block's first line of code
    program: str  # the name the README gives it, "" for a block that is only type-checked
    code: str


def python_blocks() -> List[Block]:
    lines = README.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```python":
            end = lines.index("```", index + 1)
            marker = MARKER.fullmatch(lines[index - 1].strip()) if index > 0 else None
            blocks.append(Block(index + 2, marker.group(1) if marker else "", "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        index += 1
    return blocks


def programs() -> Dict[str, str]:
    return {block.program: block.code for block in python_blocks() if block.program}


def test_the_marked_programs_are_the_ones_run_here() -> None:
    text = README.read_text(encoding="utf-8")
    marked = MARKER.findall(text)
    assert len(marked) == len(set(marked)), f"a program is marked twice: {marked}"
    # A marker not followed by a python block would leave its program unchecked.
    assert set(programs()) == set(marked), "a marker is not on the line before a ```python block"
    assert set(marked) == PROGRAMS


def test_every_python_block_passes_mypy_strict(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) >= len(PROGRAMS)
    files = {}
    for block in blocks:
        path = tmp_path / f"readme_line_{block.line}.py"
        path.write_text(block.code, encoding="utf-8")
        files[path.name] = block.line
    result = mypy(*(tmp_path / name for name in files))
    # Report each error at its README line.
    located = re.sub(r"^(?:.*/)?(readme_line_\d+\.py):(\d+):",
                     lambda m: f"README.md:{files[m.group(1)] + int(m.group(2)) - 1}:", result.stdout, flags=re.MULTILINE)
    assert result.returncode == 0, located + result.stderr


def program_path(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "programs" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(programs()[name], encoding="utf-8")
    return path


def environment(**variables: str) -> Dict[str, str]:
    """This process's environment (PARLEY_LIBRARY, the test's XDG_CACHE_HOME) with the package
    importable, output unbuffered (a test reads it while the program runs) and `variables`."""
    package = str(ROOT / "bindings" / "python")
    path = os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **variables)


def run(tmp_path: Path, name: str, args: List[str], **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(program_path(tmp_path, name)), *args], cwd=tmp_path,
                          env=environment(**variables), capture_output=True, text=True, timeout=TIMEOUT)


def session(server: RunningServer, user_id: str, token: str) -> Dict[str, str]:
    return {"PARLEY_SERVER_URL": server.url, "PARLEY_USER_ID": user_id, "PARLEY_SESSION_TOKEN": token}


def test_make_user_creates_users_and_tokens_that_work(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    result = run(tmp_path, "make_user.py", ["alice", "bob"], PARLEY_SERVER_URL=server.url, PARLEY_API_TOKEN=server.api_token)
    assert result.returncode == 0, result.stderr
    printed = [line.split(" ") for line in result.stdout.splitlines()]
    assert [fields[0] for fields in printed] == ["alice", "bob"], result.stdout
    for user_id, token in printed:
        # The token is a session of that user: the server answers the user's own entry to it.
        me = listed(server.url, token, f"/v3/users/{user_id}", {})
        assert (me["user_id"], me["nickname"]) == (user_id, user_id.title())
    listed_users = admin.call("GET", "/v3/users", user_ids="alice,bob")["users"]
    assert sorted(user["user_id"] for user in listed_users) == ["alice", "bob"]

    again = run(tmp_path, "make_user.py", ["alice"], PARLEY_SERVER_URL=server.url, PARLEY_API_TOKEN=server.api_token)
    assert again.returncode != 0 and again.stdout == ""
    assert 'parley.errors.InvalidArgument: User "alice" already exists.' in again.stderr, again.stderr


def test_first_program_output_is_what_the_server_holds(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    alice = admin.user("alice")
    bob = admin.user("bob")
    result = run(tmp_path, "first.py", ["bob"], **session(server, "alice", alice))
    assert result.returncode == 0, result.stderr

    channels = listed(server.url, bob, "/v3/users/bob/my_group_channels", {"show_member": "true"})["channels"]
    assert len(channels) == 1
    channel = channels[0]
    assert channel["name"] == "Lunch"
    assert sorted(member["user_id"] for member in channel["members"]) == ["alice", "bob"]
    messages = listing_for(server.url, bob, channel["channel_url"])
    assert len(messages) == 1
    message = messages[0]
    assert (message["user"]["user_id"], message["message"]) == ("alice", "Lunch on Friday?")
    assert result.stdout.splitlines() == [
        f"channel {channel['channel_url']}",
        f"sent {message['message_id']} Lunch on Friday?",
        f"event message_pending {message['req_id']}",
        f"event message_sent {message['req_id']}",
        f"found {message['message_id']} Lunch on <b>Friday</b>?",
    ]


class Running:
    """A program started in the background whose output lines are read as they come."""

    def __init__(self, command: List[str], cwd: Path, env: Dict[str, str]) -> None:
        # stderr to a file: a pipe nobody reads while the program runs could fill and stop it.
        self.stderr_path = cwd / "stderr.txt"
        with open(self.stderr_path, "w") as errors:
            self.process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        self.lines: queue.Queue[Optional[str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def lines_until(self, last: Optional[str]) -> List[str]:
        """The lines printed up to `last` (None: to the end of the output)."""
        seen: List[str] = []
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no {last!r} after {seen}") from None
            if line is None:
                if last is None:
                    return seen
                raise AssertionError(f"the program ended before {last!r}: {seen}; {self.stderr()}")
            seen.append(line)
            if line == last:
                return seen

    def stderr(self) -> str:
        self.stop()
        return self.stderr_path.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def test_chat_program_shows_receives_and_answers(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    admin.user("alice")
    bob = admin.user("bob")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice", "bob"], "name": "Lunch"})["channel_url"]
    for sender, text in [("alice", "Lunch on Friday?"), ("bob", "Sure"), ("alice", "Noon at the usual place")]:
        admin.send(url, sender, text)
    before = listing_for(server.url, bob, url)

    program = Running([sys.executable, str(program_path(tmp_path, "chat.py")), url], tmp_path,
                      environment(**session(server, "bob", bob)))
    try:
        assert program.lines_until("waiting") == [f"shown {m['message_id']} {m['message']}" for m in before] + ["waiting"]
        asked = admin.send(url, "alice", "Here already?")
        rest = program.lines_until(None)
        assert program.process.wait(timeout=TIMEOUT) == 0, program.stderr()
    finally:
        program.stop()
    after = listing_for(server.url, bob, url)
    assert after[:-2] == before
    assert after[-2]["message_id"] == asked["message_id"]
    answer = after[-1]
    assert (answer["user"]["user_id"], answer["message"]) == ("bob", "On my way")
    assert rest == [f"received {asked['message_id']} Here already?", f"sent {answer['message_id']} On my way"]
