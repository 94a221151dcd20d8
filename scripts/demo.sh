#!/usr/bin/env bash
# The main job: sets the machine up, builds libparley and parley-server, then runs, each
# against a local parley-server on its embedded defaults (SQLite storage):
# - the live view (examples/python/live_view.py): a channel list and two chat views in the
#   terminal while bob chats, alice's connection is cut and comes back (changelog, fill,
#   huge gap, a message sent offline delivered once);
# - the Python demo (two users, the cache while the server is down, the outbox);
# - the C examples: chat.c (connect, send, print events) and chat_view.c (a message
#   collection printing its events).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

bash scripts/setup.sh

echo "== Building libparley (release) and the C examples"
cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DPARLEY_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/cmake -j "$(nproc)"
echo "== Building parley-server (release; about 6 minutes the first time on 2 cores)"
swift build --package-path server -c release
server_bin="$root/server/.build/release/parley-server"
export PARLEY_LIBRARY="$root/build/cmake/lib/libparley.so.0"

work=$(mktemp -d /tmp/parley-demo-XXXXXX)
trap 'kill "${server_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT

echo
echo "== Live view (examples/python/live_view.py)"
python3 examples/python/live_view.py --server-bin "$server_bin" --workdir "$work/live"

echo
echo "== Python demo"
python3 examples/python/demo.py --server-bin "$server_bin" --workdir "$work/python"

echo
echo "== C example (examples/c/chat.c)"
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The token in the environment, not on the command line where ps would show it.
PARLEY_API_TOKEN="$token" "$server_bin" --port 0 --database "$work/c-server.sqlite" > "$work/server.out" 2>/dev/null &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^parley-server listening on //p' "$work/server.out")
admin() { curl -sf -X "$1" -H "Api-Token: $token" -H "Content-Type: application/json" -d "$3" "$url$2"; }
admin POST /v3/users '{"user_id": "carol", "nickname": "Carol"}' >/dev/null
admin POST /v3/users '{"user_id": "dave", "nickname": "Dave"}' >/dev/null
admin POST /v3/group_channels '{"user_ids": ["carol", "dave"], "channel_url": "c-demo"}' >/dev/null
session=$(admin POST /v3/users/carol/token '{}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
# Dave writes while carol's example runs, so that it prints a received event.
(sleep 2; admin POST /v3/group_channels/c-demo/messages '{"message_type": "MESG", "user_id": "dave", "message": "hello carol"}' >/dev/null) &
(cd "$work" && "$root/build/cmake/chat" "$url" carol "$session" c-demo "hello from C" 4)
echo
echo "== C message collection (examples/c/chat_view.c)"
(sleep 2; admin POST /v3/group_channels/c-demo/messages '{"message_type": "MESG", "user_id": "dave", "message": "seen by the view"}' >/dev/null) &
(cd "$work" && "$root/build/cmake/chat_view" "$url" carol "$session" c-demo 4 "sent through the view")
echo
echo "DEMO FINISHED"
