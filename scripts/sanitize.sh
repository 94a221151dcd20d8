#!/usr/bin/env bash
# Runs the tests under a sanitizer (not part of scripts/test.sh: slower, and needs the
# toolchain's sanitizer runtimes):
#   bash scripts/sanitize.sh address   # Swift suite under ASan + LeakSanitizer, then the C ABI,
#                                      # session and collection tests against an ASan-built libparley
#   bash scripts/sanitize.sh thread    # Swift suite under TSan, then the same C tests built with
#                                      # -fsanitize=thread against a TSan-built libparley
# Run scripts/test.sh (or at least its builds) first: it builds parley-server and the C tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
# Its servers have no balancer in front: a stop closes the port at once (docs/SERVER.md "Stopping").
export PARLEY_SHUTDOWN_DRAIN_SECONDS="${PARLEY_SHUTDOWN_DRAIN_SECONDS:-0}"
mode=${1:-address}
case "$mode" in address|thread) ;; *) echo "usage: $0 address|thread" >&2; exit 2 ;; esac
export PARLEY_SERVER_BIN="${PARLEY_SERVER_BIN:-$root/server/.build/release/parley-server}"
[ -x "$PARLEY_SERVER_BIN" ] || swift build --package-path server -c release
# XCTest's own harness leaks two objects at exit; nothing of ours is suppressed.
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1"

echo "== Swift suite under the $mode sanitizer"
swift build --build-tests --sanitize="$mode" --build-path ".build-$mode"
swift test --skip-build --sanitize="$mode" --build-path ".build-$mode"

if [ "$mode" = address ]; then
    echo "== C tests against an ASan-built libparley"
    [ -x build/cmake/Tests/C/test_abi_errors ] || { echo "build the C tests first (scripts/test.sh)" >&2; exit 1; }
    swift build -c release --product parley --disable-local-rpath --sanitize=address --scratch-path .build-address-lib
    mkdir -p .build-address-lib/soname
    cp .build-address-lib/release/libparley.so .build-address-lib/soname/libparley.so.0
    runtime=$(ls "$(dirname "$(dirname "$(command -v swift)")")"/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so | head -1)
    for test in test_abi_errors test_dispatch test_session test_channel_collection test_message_collection test_sync_view test_search test_freshness test_many_clients test_cache_key; do
        echo "-- $test"
        env LD_LIBRARY_PATH="$root/.build-address-lib/soname" LD_PRELOAD="$runtime" ASAN_OPTIONS=detect_leaks=1 \
            PARLEY_DISPOSE_ROUNDS=300 "build/cmake/Tests/C/$test"
    done
fi
if [ "$mode" = thread ]; then
    echo "== C tests under TSan against a TSan-built libparley"
    # On the toolchain's shared runtime (Package.swift): linked statically, libdispatch's
    # calls would stay inside the library and TSan would not see the queues' ordering.
    PARLEY_SHARED_SWIFT_RUNTIME=1 swift build -c release --product parley --disable-local-rpath --sanitize=thread \
        --scratch-path .build-thread-lib
    mkdir -p .build-thread-lib/soname
    cp .build-thread-lib/release/libparley.so .build-thread-lib/soname/libparley.so.0
    toolchain=$(dirname "$(dirname "$(command -v swift)")")
    for test in test_abi_errors test_dispatch test_session test_channel_collection test_message_collection test_sync_view test_search test_freshness test_many_clients test_cache_key; do
        echo "-- $test"
        "$toolchain/bin/clang" -fsanitize=thread -g -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -ITests/C \
            -c "Tests/C/$test.c" -o ".build-thread-lib/$test.o"
        swiftc -sanitize=thread ".build-thread-lib/$test.o" -L.build-thread-lib/soname -Xlinker -l:libparley.so.0 -ljansson \
            -o ".build-thread-lib/$test"
        env LD_LIBRARY_PATH="$root/.build-thread-lib/soname:$toolchain/lib/swift/linux" PARLEY_DISPOSE_ROUNDS=300 \
            ".build-thread-lib/$test"
    done
fi
echo "SANITIZER ($mode): CLEAN"
