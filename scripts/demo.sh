#!/usr/bin/env bash
# The demo: sets the machine up, builds libparley and parley-server, then runs, each
# against a local parley-server on its embedded defaults (SQLite storage):
# - the live view (examples/python/live_view.py): a channel list and two chat views in the
#   terminal while bob chats, alice's connection is cut and comes back (changelog, fill,
#   huge gap, a message sent offline delivered once);
# - the Python demo (two users, the cache while the server is down, the outbox);
# - the C examples: chat.c (connect, send, print events) and chat_view.c (a message
#   collection printing its events).
# Every step checks what it shows; the end is a summary of those checks, and the script
# exits non-zero when one failed.
#
#   bash scripts/demo.sh           # unattended: each frame of the live view stays a few seconds
#   bash scripts/demo.sh --step    # the live view waits for Enter after each frame
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
# Its servers have no balancer in front: a stop closes the port at once (docs/SERVER.md "Stopping").
export PARLEY_SHUTDOWN_DRAIN_SECONDS="${PARLEY_SHUTDOWN_DRAIN_SECONDS:-0}"
live_view_options=()
[ "${1:-}" = "--step" ] && live_view_options+=(--step)
demo_start=$SECONDS

# The terminal's size, also when the output goes through a pipe (`| tee log`): build lines
# are wrapped to its width and the live view's frames fit it; 80x24 without a terminal.
columns=80 rows=24
if size=$(stty size </dev/tty 2>/dev/null) && [[ "$size" =~ ^[0-9]+\ [0-9]+$ ]] \
    && [ "${size% *}" -ge 10 ] && [ "${size#* }" -ge 40 ]; then
    rows=${size% *} columns=${size#* }
fi

# "3m05s" from seconds.
duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# One line of build output, after the seconds since the step began, wrapped (not cut) to
# the terminal's width.
show_line() {
    local prefix text=${2//$'\r'/}
    prefix=$(printf '  [%3ds] ' "$(($SECONDS - $1))")
    local room=$((columns - ${#prefix}))
    [ "$room" -lt 20 ] && room=20
    printf '%s%s\n' "$prefix" "${text:0:room}"
    text=${text:room}
    while [ -n "$text" ]; do
        printf '%*s%s\n' "${#prefix}" "" "${text:0:room}"
        text=${text:room}
    done
}

# Shows a build's output as it comes. SwiftPM names a module once it is compiled, and a
# big module (ParleyCore, the server's) compiles in one go: when the build prints nothing
# for 15 s, a line says it is still at work.
show_progress() {
    local start=$1 line partial="" quiet_since=$SECONDS
    while :; do
        if IFS= read -r -t 15 line; then
            line=$partial$line partial="" quiet_since=$SECONDS
            show_line "$start" "$line"
        elif [ $? -gt 128 ]; then
            partial+=$line
            show_line "$start" "... still at work (nothing printed for $((SECONDS - quiet_since)) s)"
        else
            [ -n "$partial$line" ] && show_line "$start" "$partial$line"
            return 0
        fi
    done
}

# build_step DESCRIPTION COMMAND...: runs a build with its progress shown; stops the demo
# when it fails (nothing after it could run).
build_step() {
    local what=$1 start=$SECONDS status=0
    shift
    echo "== $what"
    "$@" 2>&1 | show_progress "$start" || status=$?
    if [ "$status" != 0 ]; then
        echo "FAILED: $what (exit status $status; its output is above)"
        exit 1
    fi
    echo "   done in $(duration $((SECONDS - start)))"
}

# The summary: one line per check a step made, "ok" or "FAILED".
summary=()
failures=0
record() {  # record ok|FAILED TEXT
    [ "$1" = ok ] || failures=$((failures + 1))
    summary+=("$(printf '%-6s  %s' "$1" "$2")")
}
# A Python step's checks: it writes one line per check to the file given with --checks,
# "ok<TAB>what" or "FAILED<TAB>what". A step that exits non-zero without saying why fails too.
record_checks() {  # record_checks NAME STATUS FILE
    local name=$1 status=$2 file=$3 mark text failed=0 count=0
    if [ -f "$file" ]; then
        while IFS=$'\t' read -r mark text; do
            record "$mark" "$text"
            count=$((count + 1))
            [ "$mark" = ok ] || failed=1
        done <"$file"
    fi
    if [ "$status" != 0 ] && [ "$failed" = 0 ]; then
        record FAILED "$name: exited with status $status"
    elif [ "$count" = 0 ]; then
        record FAILED "$name: reported no checks"
    fi
}

echo "== Checking the machine's packages (scripts/setup.sh)"
bash scripts/setup.sh

build_start=$SECONDS
echo "== Configuring the build (cmake, release, with the C examples)"
cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DPARLEY_BUILD_EXAMPLES=ON >/dev/null
if [ -e build/cmake/lib/libparley.so.0 ]; then
    note="built before: SwiftPM and make redo only what changed"
else
    note="first time: 2-8 min on 2 cores, mostly one quiet compile of ParleyCore"
fi
build_step "Building libparley (release) and the C examples"$'\n'"   ($note)" \
    cmake --build build/cmake -j "$(nproc)"
server_bin="$root/server/.build/release/parley-server"
if [ -x "$server_bin" ]; then
    note="built before: reused unless its sources changed"
else
    note="first time: 6-10 min on 2 cores"
fi
build_step "Building parley-server (release)"$'\n'"   ($note)" \
    swift build --package-path server -c release
record ok "build: libparley, the C examples and parley-server ($(duration $((SECONDS - build_start))))"
export PARLEY_LIBRARY="$root/build/cmake/lib/libparley.so.0"

work=$(mktemp -d /tmp/parley-demo-XXXXXX)
trap 'kill "${server_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT

echo
echo "== Live view (examples/python/live_view.py): alice's screen while her"
echo "   connection is cut and comes back"
sleep 2
# Through a pipe the live view cannot ask the terminal for its size: it is told.
size_env=()
[ -t 1 ] || size_env=(env COLUMNS="$columns" LINES="$rows")
status=0
"${size_env[@]}" python3 examples/python/live_view.py --server-bin "$server_bin" --workdir "$work/live" \
    --checks "$work/live.checks" "${live_view_options[@]}" || status=$?
record_checks "live view" "$status" "$work/live.checks"

echo
echo "== Python demo (examples/python/demo.py): two users, the cache, the outbox"
status=0
python3 examples/python/demo.py --server-bin "$server_bin" --workdir "$work/python" \
    --checks "$work/python.checks" || status=$?
record_checks "Python demo" "$status" "$work/python.checks"

echo
echo "== C example (examples/c/chat.c): carol connects, sends, prints what she gets"
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The token in the environment, not on the command line where ps would show it.
PARLEY_API_TOKEN="$token" "$server_bin" --port 0 --database "$work/c-server.sqlite" > "$work/server.out" 2>/dev/null &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^parley-server listening on //p' "$work/server.out")
admin() { curl -sf -X "$1" -H "Api-Token: $token" -H "Content-Type: application/json" -d "$3" "$url$2"; }
# A failure here fails the two C steps below (they cannot connect), not the whole script.
session=none
{ admin POST /v3/users '{"user_id": "carol", "nickname": "Carol"}' \
    && admin POST /v3/users '{"user_id": "dave", "nickname": "Dave"}' \
    && admin POST /v3/group_channels '{"user_ids": ["carol", "dave"], "channel_url": "c-demo"}' \
    && session=$(admin POST /v3/users/carol/token '{}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
} >/dev/null || echo "setting up carol, dave and their channel on $url failed"
# Dave writes while carol's example runs, so that it prints a received event.
(sleep 2; admin POST /v3/group_channels/c-demo/messages '{"message_type": "MESG", "user_id": "dave", "message": "hello carol"}' >/dev/null) &
status=0
(cd "$work" && "$root/build/cmake/chat" "$url" carol "$session" c-demo "hello from C" 4) | tee "$work/chat.out" || status=$?
# The checks read the example's own lines (examples/c/chat.c prints one per event).
if [ "$status" = 0 ] && grep -q '^\[send\] delivered: carol: hello from C' "$work/chat.out"; then
    record ok "C chat.c: carol's message sent and confirmed by the server"
else
    record FAILED "C chat.c: carol's message sent and confirmed (exit status $status)"
fi
if grep -q '^\[event\] message received in c-demo: dave: hello carol' "$work/chat.out"; then
    record ok "C chat.c: dave's message received as a real-time event"
else
    record FAILED "C chat.c: dave's message received as a real-time event"
fi

echo
echo "== C message collection (examples/c/chat_view.c): a view printing its events"
(sleep 2; admin POST /v3/group_channels/c-demo/messages '{"message_type": "MESG", "user_id": "dave", "message": "seen by the view"}' >/dev/null) &
status=0
(cd "$work" && "$root/build/cmake/chat_view" "$url" carol "$session" c-demo 4 "sent through the view") \
    | tee "$work/chat_view.out" || status=$?
if [ "$status" = 0 ] && grep -q '^\[view\] added .*dave: seen by the view' "$work/chat_view.out"; then
    record ok "C chat_view.c: the view added dave's message live"
else
    record FAILED "C chat_view.c: the view added dave's message live (exit status $status)"
fi
if grep -q '^\[view\] added .*pending.*carol: sent through the view' "$work/chat_view.out" \
    && grep -q '^\[view\] updated .*succeeded.*carol: sent through the view' "$work/chat_view.out"; then
    record ok "C chat_view.c: its own message shown pending, then succeeded"
else
    record FAILED "C chat_view.c: its own message shown pending, then succeeded"
fi

echo
echo "== Summary: what the demo checked ($(duration $((SECONDS - demo_start))) in all)"
for line in "${summary[@]}"; do
    echo "  $line"
done
if [ "$failures" != 0 ]; then
    echo "DEMO FAILED: $failures check(s) failed (the step's output above says more)"
    exit 1
fi
echo "DEMO FINISHED: all ${#summary[@]} checks passed"
