"""bench_channel_size: what a message costs the server that follows another one, by channel size.

    python3 bench_channel_size.py SERVER_BIN POSTGRES_URL PG_BIN_DIR PG_DATA_DIR [MESSAGES]

POSTGRES_URL names the cluster without a database (`postgres://user@host:port`), PG_DATA_DIR
its data directory; each size gets a database of its own there (made with PG_BIN_DIR/createdb,
dropped after). Two servers
on it: A takes the sends, B streams them to one member of the channel, so every message
crosses servers (B reads the events and loads the channel they changed from its copy:
docs/ARCHITECTURE.md "The record cache"). For a channel of 50 and of 1,000 members, MESSAGES
sends (default 300) one after another from 7 members in turn, after 20 to warm up; CPU per
message of A, of B and of the cluster (its postmaster and every process it started), from
/proc over the sends and their delivery. B reads what was committed when it wakes, so it may
read a few messages at once, as it would under that load. The ratio 1,000 ÷ 50 says how far
each stays flat in the channel's size.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from typing import Dict, List, Tuple

import requests

TOKEN = "bench-channel-size"
SENDERS = 7
WARM_UP = 20


def cpu_seconds(pid: int, with_children: bool = False) -> Tuple[float, int]:
    """CPU seconds of a process (and of its children it reaped), and its parent's pid."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if with_children else 0)
    return ticks / os.sysconf("SC_CLK_TCK"), int(fields[1])


def cluster_cpu(data_dir: str) -> float:
    """The cluster's CPU seconds: its postmaster, the backends it reaped, the ones alive."""
    postmaster = int(open(os.path.join(data_dir, "postmaster.pid")).readline())
    total = cpu_seconds(postmaster, with_children=True)[0]
    for path in glob.glob("/proc/[0-9]*"):
        try:
            used, parent = cpu_seconds(int(path[6:]))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if parent == postmaster:
            total += used
    return total


def start_server(binary: str, database: str, started: List[subprocess.Popen]) -> Tuple[subprocess.Popen, str]:
    server = subprocess.Popen([binary, "--port", "0", "--database", database], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PARLEY_API_TOKEN=TOKEN))
    started.append(server)
    assert server.stdout is not None
    for line in server.stdout:
        if "listening on" in line:
            return server, line.split()[-1]
    raise SystemExit(f"parley-server did not start on {database}")


class Receiver:
    """One member's event stream on a server, counting message_received frames."""

    def __init__(self, url: str, user_id: str, session_key: str):
        self.count = 0
        self.response = requests.get(f"{url}/v3/users/{user_id}/events", headers={"Session-Key": session_key},
                                     stream=True, timeout=(5, 120))
        assert self.response.status_code == 200, self.response.text[:300]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines(chunk_size=None):
                if line == b"event: message_received":
                    self.count += 1
        except Exception:  # noqa: BLE001 - the stream closed at the end, whichever way it ends
            pass

    def wait_for(self, count: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.count < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.count >= count


def measure(binary: str, cluster: str, pg_bin: str, data_dir: str, members: int, messages: int) -> Dict[str, float]:
    name = f"parley_bench_size_{members}_{os.getpid()}"
    subprocess.run([f"{pg_bin}/createdb", f"--maintenance-db={cluster}/postgres", name], check=True)
    servers: List[subprocess.Popen] = []
    receiver = None
    try:
        a, url_a = start_server(binary, f"{cluster}/{name}", servers)
        b, url_b = start_server(binary, f"{cluster}/{name}", servers)
        s = requests.Session()
        s.headers["Api-Token"] = TOKEN

        def ok(method: str, url: str, **kwargs) -> dict:
            answer = s.request(method, url, timeout=60, **kwargs)
            assert answer.status_code == 200, f"{method} {url}: {answer.status_code} {answer.text[:300]}"
            return answer.json()

        ids = [f"size{members}-{i}" for i in range(members)]
        for user_id in ids:
            ok("POST", f"{url_a}/v3/users", json={"user_id": user_id, "nickname": user_id})
        channel = ok("POST", f"{url_a}/v3/group_channels", json={"user_ids": ids, "name": "size"})["channel_url"]
        key = ok("POST", f"{url_a}/v3/users/{ids[1]}/token", json={})["token"]
        receiver = Receiver(url_b, ids[1], key)

        def send(n: int) -> None:
            ok("POST", f"{url_a}/v3/group_channels/{channel}/messages",
               json={"message_type": "MESG", "user_id": ids[n % SENDERS], "message": f"m{n}"})

        for n in range(WARM_UP):
            send(n)
        if not receiver.wait_for(WARM_UP, 60):
            raise SystemExit(f"{members} members: the other server delivered {receiver.count} of {WARM_UP}")
        before = (cpu_seconds(a.pid)[0], cpu_seconds(b.pid)[0], cluster_cpu(data_dir))
        for n in range(messages):
            send(WARM_UP + n)
        if not receiver.wait_for(WARM_UP + messages, 120):
            raise SystemExit(f"{members} members: the other server delivered {receiver.count - WARM_UP} of {messages}")
        after = (cpu_seconds(a.pid)[0], cpu_seconds(b.pid)[0], cluster_cpu(data_dir))
        per = [1e6 * (end - start) / messages for start, end in zip(before, after)]
        return {"writer": per[0], "follower": per[1], "backends": per[2]}
    finally:
        if receiver is not None:
            receiver.response.close()
        for server in servers:
            server.terminate()
            server.wait()
        subprocess.run([f"{pg_bin}/dropdb", f"--maintenance-db={cluster}/postgres", name], check=False)


def main() -> None:
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    binary, cluster, pg_bin, data_dir = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4]
    messages = int(sys.argv[5]) if len(sys.argv) > 5 else 300
    print(f"Channel size: two servers on PostgreSQL, {messages} sends to A one at a time, "
          "one stream on B; CPU per message in us (/proc, 10 ms ticks)")
    small, large = (measure(binary, cluster, pg_bin, data_dir, n, messages) for n in (50, 1000))
    for part, label in (("follower", "B, the server that follows"), ("writer", "A, the server that writes"),
                        ("backends", "PostgreSQL")):
        ratio = large[part] / small[part] if small[part] > 0 else float("nan")
        print(f"  {label:<30} 50 members {small[part]:7.0f}   1,000 members {large[part]:7.0f}   ratio {ratio:5.1f}")
        print(f"ROW\tchannel size, {label}: CPU per message, 1,000 members\t{large[part]:.0f} us = {ratio:.1f}x 50's"
              f"\t50 members {small[part]:.0f} us\t—", flush=True)


if __name__ == "__main__":
    main()
