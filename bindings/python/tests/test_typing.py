"""The binding's type hints hold under a type checker (mypy, installed by scripts/setup.sh):
the package and the Python examples pass `mypy --strict`, and wrong uses of the API —
a misspelled operation, a str where an int goes, a key a channel does not have — are
reported, so the types really constrain."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Set

import pytest

from conftest import ROOT

pytest.importorskip("mypy", reason="mypy is not installed (scripts/setup.sh installs it)")

PACKAGE = ROOT / "bindings" / "python"
EXAMPLES = sorted((ROOT / "examples" / "python").glob("*.py"))


def mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    """Runs `mypy --strict` on `paths` from the repository root, the package found through MYPYPATH."""
    environment = dict(os.environ, MYPYPATH=str(PACKAGE))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes", "--no-pretty",
         *[str(path) for path in paths]],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)


def test_the_package_passes_mypy_strict() -> None:
    result = mypy(PACKAGE / "parley")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_examples_pass_mypy_strict() -> None:
    assert EXAMPLES, "no examples found"
    result = mypy(*EXAMPLES)
    assert result.returncode == 0, result.stdout + result.stderr


# Each line marked `# wrong` must be reported; no other line may be.
USES = '''\
from __future__ import annotations

from typing import List

import parley

client = parley.Client(server_url="http://127.0.0.1:1")

# Right.
channel = client.get_group_channel(channel_url="general").result()
name: str = channel["name"]
members: List[parley.Member] = channel.get("members", [])
page = client.list_messages(channel_url="general", prev_limit=10, include=True).result()
first: int = page["messages"][0]["message_id"]
created = client.create_group_channel(user_ids=["bob"], name="Team").result()
assert created.get("is_created") is not False
client.perform("get_group_channel", {"channel_url": "general"})
client.mark_all_as_read()
view = client.message_collection("general", previous_result_size=30, reverse=True,
                                 message_type_filter=parley.MessageTypeFilter.USER)
texts: List[str] = [message["message"] for message in view.messages]
pending, sent = view.send_user_message("hello", mentioned_user_ids=["bob"])
req_id: str = pending["req_id"]
channels = client.group_channel_collection(order="chronological", limit=30)
urls: List[str] = [c["channel_url"] for c in channels.load_more().result()]

# Wrong.
client.delete_mesage(channel_url="general", message_id=1)  # wrong
client.list_messages(channel_url="general", prev_limit="ten")  # wrong
client.get_group_channel()  # wrong
client.get_group_channel(chanel_url="general")  # wrong
client.invite_users(channel_url="general", user_ids="bob")  # wrong
client.set_channel_invitation_preference(auto_accept="yes")  # wrong
nickname: int = client.get_current_user().result()["nickname"]  # wrong
channel["nmae"]  # wrong
client.message_collection("general", previous_result_size="ten")  # wrong
client.group_channel_collection(limitt=30)  # wrong
view.send_user_message("hi", parent_message_id="1")  # wrong
view.messages[0]["sending_state"]  # wrong
count: str = channel["member_count"]  # wrong


async def uses(aclient: parley.AsyncClient) -> None:
    seen = await aclient.get_group_channel(channel_url="general")
    title: str = seen["name"]
    await aclient.remove_reaction(channel_url="general", message_id="7", reaction="x")  # wrong
    seen["nmae"]  # wrong
    await aclient.list_mesages(channel_url="general")  # wrong
    sent = await aclient.send_user_message("general", "hi", custom_type="greeting")
    pending_id: str = sent.pending["req_id"]
    delivered: parley.Message = await sent.delivered
    resent: parley.Send = await aclient.resend_message(sent.req_id)
    pending, result = await aclient.send_user_message("general", "hi")  # wrong
    async for event in aclient.connection_events():
        kind: str = event.kind
    async for happened in aclient.events():
        payload_category: str = happened.category
    with aclient.message_collection("general") as aview:
        viewed: parley.PendingSend = await aview.send_user_message("hello", mentioned_user_ids=["bob"])
'''


def marked(text: str) -> Set[int]:
    return {number for number, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# wrong")}


def reported(output: str, name: str) -> List[int]:
    # By file name: mypy may name the file by the path it had when it was cached.
    pattern = re.compile(rf"^(?:.*/)?{re.escape(name)}:(\d+): error:", re.MULTILINE)
    return [int(match.group(1)) for match in pattern.finditer(output)]


def test_mypy_reports_wrong_uses(tmp_path: Path) -> None:
    uses = tmp_path / "parley_typed_uses.py"
    uses.write_text(USES)
    result = mypy(uses)
    lines = reported(result.stdout, uses.name)
    expected = marked(USES)
    assert len(expected) == 17
    missed = sorted(expected - set(lines))
    unexpected = sorted(set(lines) - expected)
    assert not missed and not unexpected, (
        f"not reported: lines {missed}; reported though right: lines {unexpected}\n{result.stdout}{result.stderr}")
