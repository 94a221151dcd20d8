#!/usr/bin/env bash
# Runs the benchmark programs against a local parley-server (release builds): each prints
# its measures beside what they are compared with, measured in the same run (raw libcurl,
# raw sqlite3, an empty cache, an idle client); at the end one table of the rows with their
# goals. docs/BENCHMARKS.md explains every row. The server's own rows (P7) are measured on
# both storage backends: SQLite, and PostgreSQL on a private durable cluster
# (scripts/pg-test-cluster.sh with PG_DURABLE=1; installed from Debian's packages if missing),
# stopped and removed at exit. The scale-out rows put PostgreSQL 1 ms away from the servers
# (benchmarks/delay_proxy.c, 1 ms each way) and count accepted msg/s at 1 to 16 requests in
# flight, on one server and on two: what a write's waits on the database allow, which this
# machine's busy cores would otherwise hide.
#   bash scripts/bench.sh               full run (about 20 minutes once built, bench_many's 12-14 among them)
#   bash scripts/bench.sh --quick       smaller sizes (a few minutes, bench_many's 2 among them)
#   bash scripts/bench.sh --scale-out   the scale-out rows alone (about 1 minute once built)
#   bash scripts/bench.sh --server      the server's rows alone, both backends (about 7 minutes)
# Environment (both optional):
#   PARLEY_SERVER_BIN=PATH       a release parley-server already built: `swift build` of the
#                                server is skipped and this binary is run
#   PARLEY_BENCH_BUILD_DIR=DIR   the CMake build directory of the benchmarks (default build/cmake)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sends=300 reads=2000 missed=10000 channels=10 cache_mb=700 live=500 members=500 viewed=1000000
fanout_seconds=5 stored_small=10000 stored=1000000 searched=1000000 inflight_seconds=5
mode=full
case "${1:-}" in
    "") ;;
    --quick)
        mode=quick
        sends=100 reads=500 missed=2000 cache_mb=100 live=200 members=100 viewed=20000
        fanout_seconds=2 stored=100000 searched=100000 inflight_seconds=2
        ;;
    --scale-out) mode=scale-out ;;
    --server) mode=server ;;
    *) echo "usage: bash scripts/bench.sh [--quick | --scale-out | --server]" >&2; exit 2 ;;
esac
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
# Its servers have no balancer in front: a stop closes the port at once (docs/SERVER.md "Stopping").
export PARLEY_SHUTDOWN_DRAIN_SECONDS="${PARLEY_SHUTDOWN_DRAIN_SECONDS:-0}"
build_dir=${PARLEY_BENCH_BUILD_DIR:-build/cmake}
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
server_bin=${PARLEY_SERVER_BIN:-$root/server/.build/release/parley-server}
if [ -n "${PARLEY_SERVER_BIN:-}" ] && [ ! -x "$server_bin" ]; then
    echo "PARLEY_SERVER_BIN=$server_bin is not an executable file" >&2
    exit 2
fi
work=$(mktemp -d /tmp/parley-bench-server-XXXXXX)
quietly() { "$@" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }; }
echo "building (release)..."
quietly bash scripts/setup.sh
quietly cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DPARLEY_BUILD_BENCHMARKS=ON
if [ "$mode" = scale-out ]; then
    quietly cmake --build "$build_dir" -j "$(nproc)" --target bench_server delay_proxy
else
    quietly cmake --build "$build_dir" -j "$(nproc)" --target bench_engine bench_catchup bench_open bench_live bench_views \
        bench_server bench_search bench_many delay_proxy
    # Built when CMake found libpq (scripts/setup.sh installs libpq-dev).
    if pkg-config --exists libpq; then quietly cmake --build "$build_dir" --target bench_pg_floor bench_pg_writer; fi
fi
[ -n "${PARLEY_SERVER_BIN:-}" ] || quietly swift build --package-path server -c release
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
server_pid="" pg_server_pid="" pg_second_pid="" proxy_pid="" scale_pid="" scale_second_pid=""
finish() {
    for pid in $server_pid $pg_server_pid $pg_second_pid $scale_pid $scale_second_pid $proxy_pid; do
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
    PARLEY_API_TOKEN="$token" "$server_bin" --port 0 --database "$1" \
        --event-retention $((missed * 2 + 1000)) > "$work/out-$2" 2>/dev/null &
    started_pid=$!
    for _ in $(seq 300); do grep -q "listening on" "$work/out-$2" 2>/dev/null && break; sleep 0.1; done
    started_url=$(sed -n 's/^parley-server listening on //p' "$work/out-$2")
    [ -n "$started_url" ] || { echo "parley-server did not start on $2"; exit 1; }
}
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr); $(sed -n 's/^pg-test-cluster: //p' "$work/pg.log")"
run() {
    "$@" > "$work/run.log"
    grep -v $'^ROW\t' "$work/run.log"
    grep $'^ROW\t' "$work/run.log" >> "$work/rows" || true
    echo
}
: > "$work/rows"
summary() {
    echo "Summary (Parley's figure | compared with, same run | goal)"
    awk -F'\t' '{ printf "  %-62s %-22s %-52s %s\n", $2, $3, $4, $5 }' "$work/rows"
}

# The scale-out rows. On this machine the servers, PostgreSQL and the benchmark share the same
# cores, so a write's wait on the database is CPU time that more requests in flight cannot
# overlap; with PostgreSQL 1 ms away (delay_proxy, 1 ms each way, as a database on another
# machine is) that wait is a network hop, which requests in flight do overlap unless the server
# serializes them. The proxy runs at real-time priority (as root; else it says so), so that it
# does not wait behind the servers and PostgreSQL for the cores: a network hop would not. First
# the proxy's own cost (delay 0 against a direct connection), then on a fresh database through
# the proxy: one server, then a second one beside it.
scale_out() {
    run "$build_dir/delay_proxy" --overhead --realtime 1
    "$build_dir/delay_proxy" --delay 1 --realtime 0 "127.0.0.1:$PARLEY_PG_PORT" > "$work/proxy.out" 2> "$work/proxy.err" &
    proxy_pid=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/proxy.out" 2>/dev/null && break; sleep 0.1; done
    local proxy_port
    proxy_port=$(sed -n 's/^delay_proxy listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$work/proxy.out")
    [ -n "$proxy_port" ] || { echo "delay_proxy did not start:"; cat "$work/proxy.err"; exit 1; }
    "$PARLEY_PG_BIN/createdb" --maintenance-db="$PARLEY_TEST_PG/postgres" parley_bench_scale_out
    # $PARLEY_TEST_PG with the proxy's port in place of the cluster's.
    local database="${PARLEY_TEST_PG%:*}:$proxy_port/parley_bench_scale_out"
    start_server "$database" scale-out
    scale_pid=$started_pid
    local scale_url=$started_url
    run "$build_dir/bench_server" inflight "PostgreSQL 1 ms away" "$scale_url" "$token" "$inflight_seconds"
    start_server "$database" scale-out-second
    scale_second_pid=$started_pid
    run "$build_dir/bench_server" inflight "PostgreSQL 1 ms away" "$scale_url" "$token" "$inflight_seconds" "$started_url"
    for pid in $scale_pid $scale_second_pid $proxy_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    scale_pid="" scale_second_pid="" proxy_pid=""
    sed 's/^delay_proxy: /delay_proxy, for the scale-out rows: /' "$work/proxy.err"
    echo
}
if [ "$mode" = scale-out ]; then
    scale_out
    summary
    exit 0
fi

start_server "$work/server.sqlite" sqlite
server_pid=$started_pid url=$started_url
if [ "$mode" != server ]; then
run "$build_dir/bench_engine" "$url" "$token" "$sends" "$reads"
run "$build_dir/bench_catchup" "$url" "$token" "$missed" "$channels"
# P8 and P4 again with the cache's search index removed: what keeping it costs.
run env PARLEY_BENCH_WITHOUT_SEARCH_INDEX=1 "$build_dir/bench_engine" "$url" "$token" "$sends" "$reads"
run env PARLEY_BENCH_WITHOUT_SEARCH_INDEX=1 "$build_dir/bench_catchup" "$url" "$token" "$missed" "$channels"
# P8, the cached reads and P4 again with every measured cache encrypted (a random key);
# bench_search and bench_views, given the key, also time their first pages on an encrypted
# copy of their (plain) cache beside a plain copy.
cache_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
run env PARLEY_BENCH_CACHE_KEY="$cache_key" "$build_dir/bench_engine" "$url" "$token" "$sends" "$reads"
run env PARLEY_BENCH_CACHE_KEY="$cache_key" "$build_dir/bench_catchup" "$url" "$token" "$missed" "$channels"
run env PARLEY_BENCH_CACHE_KEY="$cache_key" "$build_dir/bench_search" "$url" "$token" "$searched"
run "$build_dir/bench_open" "$url" "$token" "$cache_mb"
run "$build_dir/bench_live" "$url" "$token" "$live" "$members"
run env PARLEY_BENCH_CACHE_KEY="$cache_key" "$build_dir/bench_views" "$url" "$token" "$viewed" 1000
# The Python binding beside the platform package (scripts/setup.sh installs it from PyPI).
run env PYTHONPATH="$root/bindings/python" PARLEY_LIBRARY="$build_dir/lib/libparley.so.0" \
    python3 "$root/benchmarks/bench_python.py" "$url" "$token" 15
# Many clients in one process: it runs a server of its own (its reconnect storm kills and
# restarts it), and each size in a process of its own.
many_args=()
[ "$mode" = quick ] && many_args=(--quick)
run "$build_dir/bench_many" "$server_bin" "${many_args[@]}"
else
    # P3 on SQLite, beside the PostgreSQL rows below.
    run "$build_dir/bench_live" "$url" "$token" "$live" 3 "$url" "SQLite"
fi
# The server itself under fan-out, raw libcurl (last on this server: it leaves a 50-member
# channel behind), then the same on a second server on PostgreSQL, started for it alone.
run "$build_dir/bench_server" fanout SQLite "$url" "$token" 5000 "$fanout_seconds"
# The PostgreSQL runs count the cluster's CPU too, and show the SQLite run's CPU per message beside theirs.
sqlite_cpu=$(awk -F'\t' '$2 ~ /SQLite: CPU per accepted message/ { print $3 }' "$work/rows")
export PARLEY_BENCH_POSTGRES_DIR="$PARLEY_PG_DIR/data" PARLEY_BENCH_CPU_BESIDE="SQLite ${sqlite_cpu:-not measured}"
"$PARLEY_PG_BIN/createdb" --maintenance-db="$PARLEY_TEST_PG/postgres" parley_bench_fanout
start_server "$PARLEY_TEST_PG/parley_bench_fanout" postgres
pg_server_pid=$started_pid
pg_url=$started_url
run "$build_dir/bench_server" fanout PostgreSQL "$pg_url" "$token" 5000 "$fanout_seconds"
# PostgreSQL's CPU per call of the writer's functions, on the channels that run left, its
# server idle.
if [ -x "$build_dir/bench_pg_writer" ]; then
    run "$build_dir/bench_pg_writer" "$PARLEY_TEST_PG/parley_bench_fanout"
else
    echo "bench_pg_writer: not built (libpq-dev missing), the writer's functions not measured"
fi
# Two servers on that database (docs/DEPLOYMENT.md): every stream on the second while the
# sends go to the first (each delivery crosses servers), then sends and streams spread over
# both, then each channel's sends to one of them (a balancer hashing by channel). On this machine both servers, PostgreSQL and the benchmark share the same cores:
# this measures what a second server costs, not how far two machines scale.
start_server "$PARLEY_TEST_PG/parley_bench_fanout" postgres-second
pg_second_pid=$started_pid
# P3 on PostgreSQL: the receiver on the server that takes the posts, then on the other one.
run "$build_dir/bench_live" "$pg_url" "$token" "$live" 3 "$pg_url" "PostgreSQL, same server"
run "$build_dir/bench_live" "$pg_url" "$token" "$live" 3 "$started_url" "PostgreSQL, receiver on another server"
# The floor under that row: PostgreSQL's commit with NOTIFY and the other server's read alone.
if [ -x "$build_dir/bench_pg_floor" ]; then
    run "$build_dir/bench_pg_floor" "$PARLEY_TEST_PG/parley_bench_fanout" "$live"
else
    echo "bench_pg_floor: not built (libpq-dev missing), PostgreSQL's floor under P3 across servers not measured"
fi
run "$build_dir/bench_server" fanout "PostgreSQL, streams on another server" "$pg_url" "$token" 5000 \
    "$fanout_seconds" "$started_url" streams-there
run "$build_dir/bench_server" fanout "PostgreSQL, 2 servers" "$pg_url" "$token" 5000 "$fanout_seconds" \
    "$started_url" both
run "$build_dir/bench_server" fanout "PostgreSQL, 2 servers, by channel" "$pg_url" "$token" 5000 "$fanout_seconds" \
    "$started_url" by-channel
unset PARLEY_BENCH_POSTGRES_DIR PARLEY_BENCH_CPU_BESIDE
for pid in $pg_server_pid $pg_second_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
pg_server_pid="" pg_second_pid=""
# What a message crossing servers costs by channel size: 50 members against 1,000, servers
# and databases of its own.
run python3 "$root/benchmarks/bench_channel_size.py" "$server_bin" "${PARLEY_TEST_PG%/}" "$PARLEY_PG_BIN" \
    "$PARLEY_PG_DIR/data"
# The scale-out rows, PostgreSQL 1 ms away (scale_out above): servers and a database of their own.
scale_out
# The start with stored messages on both backends: servers of its own, on databases of its own.
run "$build_dir/bench_server" start "$server_bin" "$stored_small" "$stored" "$PARLEY_TEST_PG"

if [ "$mode" = server ]; then
    summary
    exit 0
fi

# The peer: Synapse + matrix-nio from PyPI in their own virtual environment, P3 and P7 on it.
# If it cannot be installed, the rows say so and the run goes on.
peer_args=()
[ "$mode" = quick ] && peer_args=(--quick)
peer_python=python3
if bash scripts/bench-peer-setup.sh "$root/build/peer-venv" > "$work/peer-setup.log" 2>&1; then
    peer_python="$root/build/peer-venv/bin/python"
else
    echo "peer: $(tail -1 "$work/peer-setup.log")"
fi
run "$peer_python" "$root/benchmarks/bench_peer_matrix.py" "${peer_args[@]}"

summary
