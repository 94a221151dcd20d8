"""Ending the processes a test started (servers, the balancer)."""

from __future__ import annotations

import subprocess
from typing import Optional


def stop_process(process: Optional[subprocess.Popen], grace_seconds: float = 10) -> None:
    """Asks `process` to stop (SIGTERM), and kills it if it has not exited within
    `grace_seconds`. Does nothing for None or a process that has already exited; always
    reaps it, so no zombie outlives the test."""
    if process is None:
        return
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_seconds)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()
