"""bench_python: a page of 100 messages through the Python binding, beside the platform package.

    python bench_python.py SERVER_URL API_TOKEN [PAGES]

One channel holds 2,000 messages. Parley: a message collection (`previous_result_size`
100) has walked them once, so the cache holds them; a new collection's `load_previous`
pages are then timed (each from the cache). Beside it, in the same run and process, the
platform package's `MessageApi.list_messages` lists the same pages of the same channel from
the same server over loopback (the way an application without Parley reads them). Medians
and p99 of each, and the ratio (P2, goal: Parley at least 20 times faster). The platform
package comes from PyPI (scripts/bench.sh installs it into its own virtual environment);
without it this row says so and the rest still runs.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from typing import List

import requests

import parley

MESSAGES = 2000


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def row(measure: str, figure: str, comparison: str, goal: str) -> None:
    print(f"ROW\t{measure}\t{figure}\t{comparison}\t{goal}")


def main() -> int:
    url, token = sys.argv[1], sys.argv[2]
    pages = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    headers = {"Api-Token": token}
    run = f"{int(time.time() * 1000)}"
    user, channel = f"py-{run}", f"py-{run}"
    session = requests.Session()
    session.post(f"{url}/v3/users", json={"user_id": user}, headers=headers).raise_for_status()
    session.post(f"{url}/v3/group_channels", json={"user_ids": [user], "channel_url": channel}, headers=headers).raise_for_status()
    for index in range(MESSAGES):
        session.post(f"{url}/v3/group_channels/{channel}/messages",
                     json={"message_type": "MESG", "user_id": user, "message": f"python {index}"}, headers=headers).raise_for_status()
    user_token = session.post(f"{url}/v3/users/{user}/token", json={}, headers=headers).json()["token"]

    parley_times: List[float] = []
    with tempfile.TemporaryDirectory() as cache_dir, parley.Client(server_url=url, cache_dir=cache_dir) as client:
        client.connect(user, user_token).result(30)
        with client.message_collection(channel, previous_result_size=100) as walk:
            walk.start()[1].result(30)
            while walk.has_previous:
                walk.load_previous().result(30)
        with client.message_collection(channel, previous_result_size=100) as view:
            view.start()[1].result(30)
            for _ in range(pages):
                started = time.perf_counter()
                page = view.load_previous().result(30)
                parley_times.append((time.perf_counter() - started) * 1e6)
                assert len(page) == 100, len(page)
    parley_median = statistics.median(parley_times)
    print(f"Pages of 100 messages, {pages} each")
    print(f"  Parley, Python binding (message collection, cached)   median {parley_median:9.1f} us"
          f"   p99 {quantile(parley_times, 0.99):9.1f} us")
    try:
        import sendbird_platform_sdk
        from sendbird_platform_sdk.api import message_api
    except ImportError:
        print("  the platform package (sendbird-platform-sdk) is not installed: no comparison")
        row("P2 page of 100 through the Python binding", f"{parley_median:.0f} us", "platform package not installed", ">= 20x faster")
        return 0
    api = message_api.MessageApi(sendbird_platform_sdk.ApiClient(sendbird_platform_sdk.Configuration(host=url)))
    platform_times: List[float] = []
    ts, message_id = 2**62, 2**62
    for _ in range(pages + 1):
        started = time.perf_counter()
        answer = api.list_messages("group_channels", channel, message_ts=ts, message_id=message_id, prev_limit=100, next_limit=0,
                                   include=False, api_token=token)
        platform_times.append((time.perf_counter() - started) * 1e6)
        assert len(answer.messages) == 100, len(answer.messages)
        ts, message_id = answer.messages[0].created_at, answer.messages[0].message_id
    platform_times = platform_times[1:]  # the first page is the newest, which Parley's start loaded
    platform_median = statistics.median(platform_times)
    print(f"  platform package {sendbird_platform_sdk.__version__} (list_messages over loopback)  median {platform_median:9.1f} us"
          f"   p99 {quantile(platform_times, 0.99):9.1f} us")
    row("P2 page of 100 through the Python binding", f"{parley_median:.0f} us ({platform_median / parley_median:.1f}x faster)",
        f"platform package {platform_median:.0f} us", ">= 20x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
