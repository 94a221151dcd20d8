#!/usr/bin/env bash
# The one test command: sets up the machine, builds everything, and runs every test
# suite (Swift, C via ctest, Python binding and its wheel, reference server) against the reference server
# on SQLite, then again on PostgreSQL (a private cluster on loopback that
# scripts/pg-test-cluster.sh installs if needed, starts here and stops at the end).
# Exit code 0 = all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

bash scripts/setup.sh

# Every server the tests start checks its unread counters against the messages after each
# request (server/Sources/ParleyServer/UnreadCounters.swift).
export PARLEY_VERIFY_COUNTERS=1

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
trap 'bash scripts/pg-test-cluster.sh stop "$PARLEY_PG_DIR"' EXIT

jobs=$(nproc)
results=()
record() { results+=("$1 (at ${SECONDS} s)"); }
# Each phase's heading says when it began (seconds since the script started).
phase() { echo "== $1 (at ${SECONDS} s)"; }

phase "Reference server build"
if [ -z "${PARLEY_SERVER_BIN:-}" ]; then
    # The release build, as installed (scripts/install-server.sh): about 6 minutes from
    # scratch on 2 cores, a minute after a change.
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

phase "Python binding tests"
export PARLEY_LIBRARY="$root/build/cmake/lib/libparley.so.0"
python3 -m pip install -q --no-deps --target "$root/build/python-install" ./bindings/python 2>/dev/null \
    || python3 -m pip install -q --no-deps --break-system-packages --target "$root/build/python-install" ./bindings/python
limited 1800 python3 -m pytest -q bindings/python/tests
record "python: ok"

phase "The Python wheel (scripts/build-wheel.sh; installed alone in a fresh virtual environment)"
bash scripts/test-wheel.sh
record "wheel: ok"

phase "Reference server tests"
limited 1800 bash scripts/test-server.sh
record "server: ok"

phase "The same suites with the reference server on PostgreSQL"
export PARLEY_TEST_BACKEND=postgres
limited 1200 swift test --skip-build
# The valgrind runs exercise the library, not the server: once (above) is enough.
(cd build/cmake && ctest --output-on-failure -j "$jobs" -E valgrind)
limited 1800 python3 -m pytest -q bindings/python/tests
limited 1800 bash scripts/test-server.sh
record "postgres: swift, c, python and server ok"

printf '%s\n' "${results[@]}"
echo "ALL TESTS PASSED"
