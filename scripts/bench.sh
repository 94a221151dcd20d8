#!/usr/bin/env bash
# Runs the benchmark programs against a local parley-server (release builds): each prints
# its measures beside what they are compared with, measured in the same run (raw libcurl,
# raw sqlite3, an empty cache, an idle client); at the end one table of the rows with their
# goals. docs/BENCHMARKS.md explains every row. The server's own rows (P7) are measured on
# both storage backends: SQLite, and PostgreSQL on a private durable cluster
# (scripts/pg-test-cluster.sh with PG_DURABLE=1; installed from Debian's packages if missing),
# stopped and removed at exit.
#   bash scripts/bench.sh            full run (about 6 minutes here once built)
#   bash scripts/bench.sh --quick    smaller sizes (a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sends=300 reads=2000 missed=10000 channels=10 cache_mb=700 live=500 members=500 viewed=1000000
fanout_seconds=5 stored_small=10000 stored=1000000 searched=1000000
if [[ "${1:-}" == "--quick" ]]; then
    sends=100 reads=500 missed=2000 cache_mb=100 live=200 members=100 viewed=20000
    fanout_seconds=2 stored=100000 searched=100000
fi
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
work=$(mktemp -d /tmp/parley-bench-server-XXXXXX)
quietly() { "$@" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }; }
echo "building (release)..."
quietly bash scripts/setup.sh
quietly cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DPARLEY_BUILD_BENCHMARKS=ON
quietly cmake --build build/cmake -j "$(nproc)" --target bench_engine bench_catchup bench_open bench_live bench_views bench_server bench_search
# Built when CMake found libpq (scripts/setup.sh installs libpq-dev).
if pkg-config --exists libpq; then quietly cmake --build build/cmake --target bench_pg_floor; fi
quietly swift build --package-path server -c release
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
server_pid="" pg_server_pid="" pg_second_pid=""
finish() {
    for pid in $server_pid $pg_server_pid $pg_second_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    pg_test_cluster stop > /dev/null 2>&1 || true
    rm -rf "$work"
}
trap finish EXIT
# PostgreSQL for the server's rows: fsync and synchronous commits on, as in production.
# (Sourced with its argument: without one, bash would hand it this script's own, --quick.)
PG_DURABLE=1 source scripts/pg-test-cluster.sh start 2> "$work/pg.log" || { cat "$work/pg.log"; exit 1; }
# Starts parley-server on a database (path or URL) in the background: its pid in $started_pid,
# its URL in $started_url. The catch-up replays every missed event: the server keeps enough.
start_server() {
    PARLEY_API_TOKEN="$token" server/.build/release/parley-server --port 0 --database "$1" \
        --event-retention $((missed * 2 + 1000)) > "$work/out-$2" 2>/dev/null &
    started_pid=$!
    for _ in $(seq 300); do grep -q "listening on" "$work/out-$2" 2>/dev/null && break; sleep 0.1; done
    started_url=$(sed -n 's/^parley-server listening on //p' "$work/out-$2")
    [ -n "$started_url" ] || { echo "parley-server did not start on $2"; exit 1; }
}
start_server "$work/server.sqlite" sqlite
server_pid=$started_pid url=$started_url

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr); $(sed -n 's/^pg-test-cluster: //p' "$work/pg.log")"
run() {
    "$@" > "$work/run.log"
    grep -v $'^ROW\t' "$work/run.log"
    grep $'^ROW\t' "$work/run.log" >> "$work/rows" || true
    echo
}
: > "$work/rows"
run "$root/build/cmake/bench_engine" "$url" "$token" "$sends" "$reads"
run "$root/build/cmake/bench_catchup" "$url" "$token" "$missed" "$channels"
# P8 and P4 again with the cache's search index removed: what keeping it costs.
run env PARLEY_BENCH_WITHOUT_SEARCH_INDEX=1 "$root/build/cmake/bench_engine" "$url" "$token" "$sends" "$reads"
run env PARLEY_BENCH_WITHOUT_SEARCH_INDEX=1 "$root/build/cmake/bench_catchup" "$url" "$token" "$missed" "$channels"
run "$root/build/cmake/bench_search" "$url" "$token" "$searched"
run "$root/build/cmake/bench_open" "$url" "$token" "$cache_mb"
run "$root/build/cmake/bench_live" "$url" "$token" "$live" "$members"
run "$root/build/cmake/bench_views" "$url" "$token" "$viewed" 1000
# The Python binding beside the platform package (scripts/setup.sh installs it from PyPI).
run env PYTHONPATH="$root/bindings/python" PARLEY_LIBRARY="$root/build/cmake/lib/libparley.so.0" \
    python3 "$root/benchmarks/bench_python.py" "$url" "$token" 15
# The server itself under fan-out, raw libcurl (last on this server: it leaves a 50-member
# channel behind), then the same on a second server on PostgreSQL, started for it alone.
run "$root/build/cmake/bench_server" fanout SQLite "$url" "$token" 5000 "$fanout_seconds"
"$PARLEY_PG_BIN/createdb" --maintenance-db="$PARLEY_TEST_PG/postgres" parley_bench_fanout
start_server "$PARLEY_TEST_PG/parley_bench_fanout" postgres
pg_server_pid=$started_pid
pg_url=$started_url
run "$root/build/cmake/bench_server" fanout PostgreSQL "$pg_url" "$token" 5000 "$fanout_seconds"
# Two servers on that database (docs/DEPLOYMENT.md): every stream on the second while the
# sends go to the first (each delivery crosses servers), then sends and streams spread over
# both. On this machine both servers, PostgreSQL and the benchmark share the same cores:
# this measures what a second server costs, not how far two machines scale.
start_server "$PARLEY_TEST_PG/parley_bench_fanout" postgres-second
pg_second_pid=$started_pid
# P3 on PostgreSQL: the receiver on the server that takes the posts, then on the other one.
run "$root/build/cmake/bench_live" "$pg_url" "$token" "$live" 3 "$pg_url" "PostgreSQL, same server"
run "$root/build/cmake/bench_live" "$pg_url" "$token" "$live" 3 "$started_url" "PostgreSQL, receiver on another server"
# The floor under that row: PostgreSQL's commit with NOTIFY and the other server's read alone.
if [ -x "$root/build/cmake/bench_pg_floor" ]; then
    run "$root/build/cmake/bench_pg_floor" "$PARLEY_TEST_PG/parley_bench_fanout" "$live"
else
    echo "bench_pg_floor: not built (libpq-dev missing), PostgreSQL's floor under P3 across servers not measured"
fi
run "$root/build/cmake/bench_server" fanout "PostgreSQL, streams on another server" "$pg_url" "$token" 5000 \
    "$fanout_seconds" "$started_url" streams-there
run "$root/build/cmake/bench_server" fanout "PostgreSQL, 2 servers" "$pg_url" "$token" 5000 "$fanout_seconds" \
    "$started_url" both
for pid in $pg_server_pid $pg_second_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
pg_server_pid="" pg_second_pid=""
# The start with stored messages on both backends: servers of its own, on databases of its own.
run "$root/build/cmake/bench_server" start "$root/server/.build/release/parley-server" "$stored_small" "$stored" "$PARLEY_TEST_PG"

# The peer: Synapse + matrix-nio from PyPI in their own virtual environment, P3 and P7 on it.
# If it cannot be installed, the rows say so and the run goes on.
peer_args=()
[[ "${1:-}" == "--quick" ]] && peer_args=(--quick)
peer_python=python3
if bash scripts/bench-peer-setup.sh "$root/build/peer-venv" > "$work/peer-setup.log" 2>&1; then
    peer_python="$root/build/peer-venv/bin/python"
else
    echo "peer: $(tail -1 "$work/peer-setup.log")"
fi
run "$peer_python" "$root/benchmarks/bench_peer_matrix.py" "${peer_args[@]}"

echo "Summary (Parley's figure | compared with, same run | goal)"
awk -F'\t' '{ printf "  %-62s %-22s %-52s %s\n", $2, $3, $4, $5 }' "$work/rows"
