#!/usr/bin/env bash
# Where a live message delivered across two servers spends its time, step by step: two
# release servers on one durable PostgreSQL (scripts/pg-test-cluster.sh with PG_DURABLE=1),
# `bench_live` posting to the first with its receiver streaming from the second, while
# tcpdump captures the loopback interface; benchmarks/trace_delivery.py then reads each
# step's first packet (docs/BENCHMARKS.md "Planned once: the other server's read").
#   bash scripts/trace-delivery.sh [MESSAGES] [FILLER]
# PARLEY_SERVER_BIN=path traces that server binary instead of building server/ (to compare
# two builds).
# MESSAGES (default 300) go at 50 and at 200 per second; FILLER messages (default 4000) are
# stored first, so that the event log is as long as on a server that has run a while.
# Needs root for the capture; installs tcpdump from Debian's packages when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${1:-300} filler=${2:-4000}
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
# Its servers have no balancer in front: a stop closes the port at once (docs/SERVER.md "Stopping").
export PARLEY_SHUTDOWN_DRAIN_SECONDS="${PARLEY_SHUTDOWN_DRAIN_SECONDS:-0}"
work=$(mktemp -d /tmp/parley-trace-XXXXXX)
quietly() { "$@" > "$work/step.log" 2>&1 || { cat "$work/step.log"; exit 1; }; }
if ! command -v tcpdump > /dev/null; then
    echo "installing tcpdump..."
    quietly apt-get install -y -q tcpdump
fi
echo "building (release)..."
quietly bash scripts/setup.sh
quietly cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DPARLEY_BUILD_BENCHMARKS=ON
quietly cmake --build build/cmake -j "$(nproc)" --target bench_live
server_bin=${PARLEY_SERVER_BIN:-}
if [ -z "$server_bin" ]; then
    quietly swift build --package-path server -c release
    server_bin=server/.build/release/parley-server
fi
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
pids=()
finish() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    pg_test_cluster stop > /dev/null 2>&1 || true
    rm -rf "$work"
}
trap finish EXIT
PG_DURABLE=1 source scripts/pg-test-cluster.sh start 2> "$work/pg.log" || { cat "$work/pg.log"; exit 1; }
"$PARLEY_PG_BIN/createdb" --maintenance-db="$PARLEY_TEST_PG/postgres" parley_trace
# Starts a server on the database: its URL in $started_url, its pid in $started_pid.
start_server() {
    PARLEY_API_TOKEN="$token" "$server_bin" --port 0 \
        --database "$PARLEY_TEST_PG/parley_trace" > "$work/out-$1" 2>/dev/null &
    started_pid=$!
    pids+=("$started_pid")
    for _ in $(seq 300); do grep -q "listening on" "$work/out-$1" 2>/dev/null && break; sleep 0.1; done
    started_url=$(sed -n 's/^parley-server listening on //p' "$work/out-$1")
    [ -n "$started_url" ] || { echo "parley-server did not start ($1)"; exit 1; }
}
start_server sender
sender=$started_url sender_pid=$started_pid
start_server receiver
receiver=$started_url receiver_pid=$started_pid
echo "storing $filler messages first..."
python3 - "$sender" "$token" "$filler" <<'EOF'
import http.client, json, sys, urllib.parse
url, token, count = urllib.parse.urlsplit(sys.argv[1]), sys.argv[2], int(sys.argv[3])
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
headers = {"Api-Token": token, "Content-Type": "application/json"}
def call(method, path, body):
    connection.request(method, path, json.dumps(body), headers)
    response = connection.getresponse()
    text = response.read()
    if response.status != 200:
        raise SystemExit(f"{method} {path}: {response.status} {text[:200]!r}")
call("POST", "/v3/users", {"user_id": "trace-filler", "nickname": "filler", "profile_url": ""})
call("POST", "/v3/group_channels", {"channel_url": "trace-filler", "user_ids": ["trace-filler"]})
for n in range(count):
    call("POST", "/v3/group_channels/trace-filler/messages",
         {"message_type": "MESG", "user_id": "trace-filler", "message": f"filler {n}"})
EOF
tcpdump -i lo -n -s 256 -w "$work/capture.pcap" tcp > "$work/tcpdump.log" 2>&1 &
capture=$!
pids+=($capture)
sleep 1
build/cmake/bench_live "$sender" "$token" "$messages" 3 "$receiver" "trace, receiver on the other server" | grep -v '^ROW'
# Each server's connections to PostgreSQL, while they are still open.
pg_ports() {
    ss -tnp | awk -v pid="pid=$1," -v pg=":$PARLEY_PG_PORT" 'index($0, pid) && $5 ~ pg"$" {n = split($4, a, ":"); print a[n]}' | paste -sd,
}
a_pg=$(pg_ports "$sender_pid") b_pg=$(pg_ports "$receiver_pid")
sleep 0.5
kill "$capture" 2>/dev/null || true
wait "$capture" 2>/dev/null || true
# The receiving server's own timing of the same deliveries (docs/SERVER.md "Metrics"), means
# over every read since it started (the filler's included); read once the capture stopped.
echo "The receiving server's reads of the other's events (/metrics, means):"
python3 - "$receiver" <<'EOF'
import sys, urllib.request
values = {}
for line in urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode().splitlines():
    name, _, value = line.partition(" ")
    if name.startswith("parley_event_log_read_"):
        values[name] = float(value)
for step in ("read_wait", "read_duration", "read_delivery_duration"):
    count = values.get(f"parley_event_log_{step}_seconds_count", 0)
    if count:
        mean = 1000 * values[f"parley_event_log_{step}_seconds_sum"] / count
        print(f"  {step:<24} {mean:.3f} ms over {int(count)} reads")
EOF
echo
python3 benchmarks/trace_delivery.py "$work/capture.pcap" "${sender##*:}" "${receiver##*:}" "$PARLEY_PG_PORT" "$a_pg" "$b_pg"
