"""Exports a Parley client's metrics to Prometheus, from the service that embeds it.

    python3 examples/python/metrics_exporter.py --server-url http://127.0.0.1:8080 \\
        --user-id alice --session-token TOKEN --port 9464

Connects as the user, then serves ``http://127.0.0.1:PORT/metrics``. Each scrape reads
``client.metrics()`` once (docs/C-API.md "Metrics" lists every name) and maps it onto metric
families: names ending in ``_total`` become counters, ``connection_state`` a state set (one
sample per state, 1 for the current one), every other number a gauge; each name gets the
``parley_`` prefix. A service with several clients registers one collector per client with a
``client`` label of its own (``const_labels``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, Mapping, Optional, get_args

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "bindings" / "python"))
import parley  # noqa: E402
from prometheus_client import start_http_server  # noqa: E402
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric, StateSetMetricFamily  # noqa: E402

CONNECTION_STATES = get_args(parley.ConnectionStateName)


class ParleyCollector:
    """A custom collector: the client's metrics, read at each scrape."""

    def __init__(self, client: parley.Client, namespace: str = "parley",
                 const_labels: Optional[Mapping[str, str]] = None) -> None:
        self.client = client
        self.namespace = namespace
        self.label_names = list(const_labels or {})
        self.label_values = list((const_labels or {}).values())

    def collect(self) -> Iterator[Metric]:
        if self.client.closed:
            return
        metrics: Mapping[str, object] = self.client.metrics()
        for name, value in metrics.items():
            full_name = f"{self.namespace}_{name}"
            help_text = f"Parley client: {name} (docs/C-API.md, Metrics)"
            if name == "connection_state":
                states = StateSetMetricFamily(full_name, help_text, labels=self.label_names)
                states.add_metric(self.label_values, {state: state == value for state in CONNECTION_STATES})
                yield states
            elif isinstance(value, (int, float)):
                family = (CounterMetricFamily(full_name, help_text, labels=self.label_names) if name.endswith("_total")
                          else GaugeMetricFamily(full_name, help_text, labels=self.label_names))
                family.add_metric(self.label_values, float(value))
                yield family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-url", required=True)
    parser.add_argument("--user-id", required=True)
    parser.add_argument("--session-token", required=True)
    parser.add_argument("--port", type=int, default=9464, help="where /metrics is served (default 9464)")
    parser.add_argument("--cache-dir", help="the client's cache directory (default: the library's)")
    arguments = parser.parse_args()

    settings: Dict[str, object] = {"server_url": arguments.server_url}
    if arguments.cache_dir:
        settings["cache_dir"] = arguments.cache_dir
    with parley.Client(settings) as client:
        client.connect(arguments.user_id, arguments.session_token).result(30)
        REGISTRY.register(ParleyCollector(client))
        start_http_server(arguments.port)
        print(f"serving http://127.0.0.1:{arguments.port}/metrics (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
