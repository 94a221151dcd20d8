"""The process-wide runtime's settings, in a process of its own (they hold until it ends)."""
import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import parley
parley.configure_runtime(network_threads=3, callback_threads=2)
assert parley.runtime_info()["network_threads"] == 0
client = parley.Client()
info = parley.runtime_info()
assert info["network_threads"] == 3 and info["callback_threads"] == 2, info
parley.configure_runtime(network_threads=3)
try:
    parley.configure_runtime(network_threads=2)
except parley.ParleyError as error:
    assert "before the first client" in str(error), error
else:
    raise AssertionError("a different number was accepted")
try:
    parley.configure_runtime(network_threads=0)
except parley.ParleyError as error:
    assert "network_threads" in str(error), error
else:
    raise AssertionError("0 network threads were accepted")
client.close()
print("ok")
"""


def test_the_runtime_is_set_before_the_first_client_and_fixed_after() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    result = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
