#!/usr/bin/env bash
# The wheel as a user gets it: builds it (scripts/build-wheel.sh), installs it with pip
# --no-index into a fresh virtual environment in a temporary directory, starts a
# parley-server on loopback, and runs scripts/test-wheel.py with that environment's python,
# from outside the repository, with PARLEY_LIBRARY unset: `parley` and its libparley must
# come from the environment's site-packages, and a message collection must show what the
# server lists.
#   bash scripts/test-wheel.sh           build the wheel, then test it
#   bash scripts/test-wheel.sh WHEEL     test that wheel file (nothing is built)
# The server is PARLEY_SERVER_BIN, else server/.build/release/parley-server.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

fail() {
    echo "test-wheel: $*" >&2
    exit 1
}

if [ $# -gt 0 ]; then
    wheel=$(readlink -f "$1")
else
    bash scripts/build-wheel.sh
    wheels=(dist/parley_chat-*.whl)
    [ ${#wheels[@]} = 1 ] && [ -f "${wheels[0]}" ] || fail "expected one dist/parley_chat-*.whl, found: ${wheels[*]}"
    wheel="$root/${wheels[0]}"
fi
[ -f "$wheel" ] || fail "no wheel at $wheel"
server_bin=${PARLEY_SERVER_BIN:-$root/server/.build/release/parley-server}
[ -x "$server_bin" ] || fail "parley-server not found at $server_bin: build it or set PARLEY_SERVER_BIN"

tmp=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "== a fresh virtual environment with $(basename "$wheel") only"
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "$wheel"

token=tok
PARLEY_API_TOKEN=$token "$server_bin" --port 0 --database "$tmp/s.sqlite" >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
prefix="parley-server listening on "
url=""
for _ in $(seq 300); do
    if [ "$(wc -l <"$tmp/server.out")" -ge 1 ]; then
        line=$(head -n 1 "$tmp/server.out")
        case "$line" in
            "$prefix"*) url=${line#"$prefix"} ;;
            *) fail "unexpected first line from parley-server: $line" ;;
        esac
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || fail "parley-server exited: $(tail -n 5 "$tmp/server.err")"
    sleep 0.1
done
[ -n "$url" ] || fail "parley-server did not start listening within 30 s"

echo "== the wheel's parley against $url (from $tmp, PARLEY_LIBRARY unset)"
# -I: no PYTHON* variables, no user site-packages, not the script's directory on sys.path.
(cd "$tmp" && env -u PARLEY_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH -u PYTHONHOME \
    timeout 120 "$tmp/venv/bin/python" -I "$root/scripts/test-wheel.py" "$url" "$token" "$root")
