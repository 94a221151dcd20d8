#!/usr/bin/env bash
# Runs the benchmark programs against a local parley-server (release builds), printing the
# engine's numbers beside the floor (raw libcurl, raw sqlite3) measured in the same run.
#   bash scripts/bench.sh [MESSAGES] [READS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
work=$(mktemp -d /tmp/parley-bench-server-XXXXXX)
quietly() { "$@" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }; }
echo "building (release)..."
quietly bash scripts/setup.sh
quietly cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release
quietly cmake --build build/cmake -j "$(nproc)" --target bench_engine
quietly swift build --package-path server -c release
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
server/.build/release/parley-server --port 0 --database "$work/server.sqlite" --api-token "$token" > "$work/out" 2>/dev/null &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$work/out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^parley-server listening on //p' "$work/out")
"$root/build/cmake/bench_engine" "$url" "$token" "${1:-300}" "${2:-2000}"
