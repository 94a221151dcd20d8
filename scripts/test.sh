#!/usr/bin/env bash
# The one test command: sets up the machine, builds everything, and runs every test
# suite (Swift, C via ctest, Go and Python bindings, reference server) against the reference server
# on SQLite and again on PostgreSQL (private clusters on loopback that
# scripts/pg-test-cluster.sh installs if needed, starts here and stops at the end), and the
# Python wheel installed alone. The Python and server suites run in two lanes at once (below).
# Exit code 0 = all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

# The run's temporary files in a directory of its own, removed at the end: SwiftPM leaves a
# few empty TemporaryDirectory.* in TMPDIR on every build and test run. (The lanes below, the
# PostgreSQL clusters and the Swift tests' own directories are made under /tmp by name.)
run_tmp=$(mktemp -d /tmp/parley-test.XXXXXX)
export TMPDIR="$run_tmp"
trap 'rm -rf "$run_tmp"' EXIT

bash scripts/setup.sh

# Every server the tests start checks its unread counters against the messages after each
# request (server/Sources/ParleyServer/Records/UnreadCounters.swift).
export PARLEY_VERIFY_COUNTERS=1
# The tests stop and restart servers hundreds of times, with no balancer to drain: a stop
# closes the port at once (docs/SERVER.md "Stopping"; tests of the drain set their own).
export PARLEY_SHUTDOWN_DRAIN_SECONDS=0

# A crash report names functions but skips line numbers and inlined frames: the full
# symbolication of the debug test binary takes tens of minutes on 2 cores, long enough for a
# crash to look like a hang.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,symbolicate=fast,images=mentioned}"
# Each phase gets a time limit far above its usual run (Swift under a minute, Python 4-10 min,
# server ~4-7 min): a hang then fails its phase and names it, instead of eating the run.
# pytest prints every thread's stack of a test that runs longer than 5 minutes, and each
# suite's 15 slowest tests.
limited() { timeout --kill-after=30 "$@"; }
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -o faulthandler_timeout=300 --durations=15"

source scripts/pg-test-cluster.sh start
trap 'bash scripts/pg-test-cluster.sh stop "$PARLEY_PG_DIR"; rm -rf "$run_tmp"' EXIT

jobs=$(nproc)
results=()
record() { results+=("$1 (at ${SECONDS} s)"); }
# Each phase's heading says when it began (seconds since the script started).
phase() { echo "== $1 (at ${SECONDS} s)"; }

phase "Reference server build"
if [ -z "${PARLEY_SERVER_BIN:-}" ]; then
    # The release build, as installed (scripts/install-server.sh): 9-12 minutes from scratch
    # on 2 cores (it keeps both busy), a minute or two after a change.
    swift build --package-path server -c release
    export PARLEY_SERVER_BIN="$root/server/.build/release/parley-server"
fi

phase "Swift tests (ParleyCore; they start the reference server)"
mkdir -p build
swift build --build-tests
limited 1200 swift test --skip-build
record "swift: ok"

phase "C build (CMake, release library) and C tests (ctest)"
# The tests, the examples and the benchmarks are off in a plain configure: on here (the
# benchmarks are only compiled, so that they keep building; scripts/bench.sh runs them).
cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release \
    -DPARLEY_BUILD_TESTS=ON -DPARLEY_BUILD_EXAMPLES=ON -DPARLEY_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/cmake -j "$jobs"
(cd build/cmake && ctest --output-on-failure -j "$jobs")
# Installs into a temporary prefix, moves it, and checks the moved install (pkg-config,
# find_package, the stripped library and its debug file) and a plain configure.
bash scripts/check-install.sh build/cmake
record "c: ok"

phase "The Swift and C suites with the reference server on PostgreSQL"
export PARLEY_TEST_BACKEND=postgres
limited 1200 swift test --skip-build
# The valgrind runs exercise the library, not the server: once (above) is enough.
(cd build/cmake && ctest --output-on-failure -j "$jobs" -E valgrind)
record "postgres: swift and c ok"
unset PARLEY_TEST_BACKEND

phase "Go binding (bindings/go): vet, tests on SQLite (plain and -race), tests on PostgreSQL (-race)"
# cgo finds the build tree's library through a parley.pc of its own (bindings/go/README.md).
(
    eval "$(bash bindings/go/tools/build-tree-env.sh build/cmake)"
    cd bindings/go
    unformatted=$(gofmt -l . ../../examples/go)
    [ -z "$unformatted" ] || { echo "not gofmt-formatted: $unformatted" >&2; exit 1; }
    go vet ./...
    (cd ../../examples/go && go vet ./...)
    PARLEY_TEST_BACKEND=sqlite limited 600 go test -count=1 ./...
    PARLEY_TEST_BACKEND=sqlite limited 600 go test -race -count=1 ./...
    PARLEY_TEST_BACKEND=postgres limited 600 go test -race -count=1 ./...
)
record "go: ok"

# The Python and server suites (about 20 of the suite's 37 minutes when run one after the
# other) wait on their servers and on PostgreSQL more than they compute: about 45% of the two
# cores stayed idle. They run in two lanes at once, each lane on its own PostgreSQL cluster
# (some tests stop and restart theirs), with its own TMPDIR and mypy cache; every line a lane
# prints is headed by its name. The lanes are balanced by their usual durations: about 10
# minutes each.
export PARLEY_LIBRARY="$root/build/cmake/lib/libparley.so.0"
python3 -m pip install -q --no-deps --target "$root/build/python-install" ./bindings/python 2>/dev/null \
    || python3 -m pip install -q --no-deps --break-system-packages --target "$root/build/python-install" ./bindings/python
# Two pytest runs at once must not share pytest's cache directory.
export PYTEST_ADDOPTS="$PYTEST_ADDOPTS -p no:cacheprovider"
# A process and everything it started (`timeout` puts its command in a group of its own, so
# killing the lane's process group would miss it).
kill_tree() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}
lane_one_pid="" lane_two_pid="" second_cluster_dir=""
# On any exit (a failure, Ctrl-C, a kill): the lanes still running go first, then the clusters.
stop_everything() {
    for pid in $lane_one_pid $lane_two_pid; do kill_tree "$pid"; done
    wait 2>/dev/null || true
    [ -z "$second_cluster_dir" ] || bash scripts/pg-test-cluster.sh stop "$second_cluster_dir"
    bash scripts/pg-test-cluster.sh stop "$PARLEY_PG_DIR"
    rm -rf "$run_tmp"
}
trap stop_everything EXIT
first_cluster_env=$(bash scripts/pg-test-cluster.sh env "$PARLEY_PG_DIR")
second_cluster_env=$(bash scripts/pg-test-cluster.sh start)
second_cluster_dir=$(eval "$second_cluster_env"; echo "$PARLEY_PG_DIR")

lane_one() {
    eval "$first_cluster_env"
    phase "Python binding tests on PostgreSQL"
    PARLEY_TEST_BACKEND=postgres limited 1800 python3 -m pytest -q bindings/python/tests
    echo "python on postgres: ok"
    # The suites of the cache and its views again, every client's cache encrypted with a random
    # key (conftest.py; the tests that read the cache file themselves are skipped): about 4 min.
    phase "Python cache, view, search and outbox tests with the cache encrypted"
    PARLEY_TEST_BACKEND=sqlite PARLEY_TEST_CACHE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') \
        limited 1200 python3 -m pytest -q bindings/python/tests/test_cache_encryption.py \
        bindings/python/tests/test_message_collection.py bindings/python/tests/test_channel_collection.py \
        bindings/python/tests/test_clear_with_views.py bindings/python/tests/test_send_outcomes.py \
        bindings/python/tests/test_sync_view.py bindings/python/tests/test_search.py bindings/python/tests/test_engine.py
    echo "python with the cache encrypted: ok"
    phase "Reference server tests on SQLite"
    PARLEY_TEST_BACKEND=sqlite limited 1800 bash scripts/test-server.sh
    echo "server on sqlite: ok"
}
lane_two() {
    eval "$second_cluster_env"
    phase "Reference server tests on PostgreSQL"
    PARLEY_TEST_BACKEND=postgres limited 1800 bash scripts/test-server.sh
    echo "server on postgres: ok"
    phase "Python binding tests on SQLite"
    PARLEY_TEST_BACKEND=sqlite limited 1800 python3 -m pytest -q bindings/python/tests
    echo "python on sqlite: ok"
    phase "The Python wheel (scripts/build-wheel.sh; installed alone in a fresh virtual environment)"
    limited 900 bash scripts/test-wheel.sh
    echo "wheel: ok"
}
# Runs lane function $2 in a subshell with its own TMPDIR, its output headed by "[$1] ".
# A failed lane keeps its TMPDIR (the failed tests' directories: logs, databases) and says where.
run_lane() {
    local name=$1 lane=$2
    (
        # The lane stops at its first failure (set -e holds in the subshell, and the lane is not
        # called from a condition, where bash would suspend it).
        TMPDIR=$(mktemp -d "/tmp/parley-lane-$name.XXXXXX")
        # mypy's cache (test_typing.py) is an SQLite file that two runs at once would contend for.
        export TMPDIR MYPY_CACHE_DIR="$TMPDIR/mypy-cache"
        trap 'status=$?; if [ "$status" = 0 ]; then rm -rf "$TMPDIR"; else echo "kept $TMPDIR (status $status)"; fi' EXIT
        "$lane"
    ) 2>&1 | sed -u "s/^/[$name] /"
}

phase "Python, wheel and server suites in two lanes"
run_lane lane1 lane_one &
lane_one_pid=$!
run_lane lane2 lane_two &
lane_two_pid=$!
lane_one_status=0
wait "$lane_one_pid" || lane_one_status=$?
lane_two_status=0
wait "$lane_two_pid" || lane_two_status=$?
if [ "$lane_one_status" = 0 ]; then
    record "lane1: python on postgres, server on sqlite ok"
else
    record "lane1 (python on postgres, server on sqlite): FAILED with status $lane_one_status"
fi
if [ "$lane_two_status" = 0 ]; then
    record "lane2: server on postgres, python on sqlite, wheel ok"
else
    record "lane2 (server on postgres, python on sqlite, wheel): FAILED with status $lane_two_status"
fi

printf '%s\n' "${results[@]}"
if [ "$lane_one_status" != 0 ] || [ "$lane_two_status" != 0 ]; then
    echo "TESTS FAILED (see the lanes' lines above)"
    exit 1
fi
echo "ALL TESTS PASSED"
