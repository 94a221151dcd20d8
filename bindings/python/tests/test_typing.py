"""The binding's type hints are accepted by a type checker (mypy, installed by scripts/setup.sh)."""
from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_mypy_accepts_the_binding() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "parley"], cwd=ROOT / "bindings" / "python",
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
