#!/usr/bin/env bash
# Builds the reference server (unless PARLEY_SERVER_BIN names a binary) and runs its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

if [[ -z "${PARLEY_SERVER_BIN:-}" ]]; then
    swift build --package-path server -c release
    export PARLEY_SERVER_BIN="$PWD/server/.build/release/parley-server"
fi
if [[ ! -x "$PARLEY_SERVER_BIN" ]]; then
    echo "test-server.sh: $PARLEY_SERVER_BIN is not an executable" >&2
    exit 1
fi
python3 -m pytest -q server/tests "$@"
