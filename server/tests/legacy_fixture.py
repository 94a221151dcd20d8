"""Golden reads of the legacy fixtures (tests/fixtures/legacy-v*.sqlite): the capture, its
normalization and the comparison, shared by make_legacy_fixture.py (which writes the golden
file from the server that wrote the fixture) and test_migration.py (which reads a fixture
with the server under test and compares).

The capture is driven by the fixture's manifest (stored in the golden file beside the reads):
the user ids, channel urls, message ids and session keys the data set holds. It only reads
(GET), except that opening an event stream records presence (`last_seen_at`) and a session
key marks its user `has_ever_logged_in` — the manifest only lists session keys that were
already used when the fixture was written, so that a second capture on the same database
sees the same thing.

Normalized away (each a field that legitimately differs between two runs on one file):
- `is_online`, `last_seen_at` (everywhere): presence. Opening an event stream marks its
  user online and closing it sets `last_seen_at` to the clock; a closed stream is only
  noticed at its next write, so another user's stream may still count as open.
- `ts` at the top level of channel lists (`GET /v3/group_channels`, `my_group_channels`):
  the time of the request.
- `remaining_duration` of `GET .../mute/{user_id}`: the end of a timed mute minus now.
- the server's base URL (`http://127.0.0.1:<ephemeral port>`) at the start of any string
  (uploaded files' `file.url`) becomes `{base}`.
- event streams: heartbeat comments (the clock) are not captured; the capture stops at the
  first one (every replayed frame is written before it).
Not normalized: the `ts` of replayed events (stored with the event at write time, so fixed
in the file; only live events carry the clock, and none are captured), `created_at` /
`updated_at` / `*_ts` of records (fixed in the file), pagination and changelog tokens
(clients hold them across an upgrade), ban / mute `end_at` (absolute; the timed ones end
in 2036 or ended before the fixture was written).

To keep the golden file small, the reads that test an order or a filter keep only the ids
in order (`_channel_urls`, `_changelog_urls`, `_message_ids`); the objects themselves are
compared in full by other reads of the same data.
"""
import base64
import contextlib
import hashlib
import json
import os
import queue
import shutil
import threading
import time

import requests

API_TOKEN = "test-admin-token"  # conftest.API_TOKEN
SERVER_ARGS = ["--heartbeat-seconds", "0.3"]  # beside conftest.Server's own arguments
VOLATILE_EVERYWHERE = {"is_online", "last_seen_at"}
FORMAT = 1
TOKEN_ZERO = "5b305d"  # the changelog token of position 0 (hex of the JSON array "[0]")


# ---------------------------------------------------------------------------------------
# normalization

def normalize(value, base):
    if isinstance(value, dict):
        return {k: normalize(v, base) for k, v in value.items() if k not in VOLATILE_EVERYWHERE}
    if isinstance(value, list):
        return [normalize(v, base) for v in value]
    if isinstance(value, str) and base and value.startswith(base):
        return "{base}" + value[len(base):]
    return value


def dumps(obj):
    """The golden file's serialization: stable key order, readable non-ASCII; a dict of reads
    is written one read a line (a changed read is a changed line)."""
    def compact(v):
        return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if isinstance(obj, dict) and "reads" in obj:
        head = {k: v for k, v in obj.items() if k != "reads"}
        text = json.dumps(head, sort_keys=True, indent=1, ensure_ascii=False)
        reads = ",\n".join(f"  {compact(k)}: {compact(v)}" for k, v in sorted(obj["reads"].items()))
        return text[:-2] + ',\n "reads": {\n' + reads + "\n }\n}\n"
    if isinstance(obj, dict):
        return "{\n" + ",\n".join(f"  {compact(k)}: {compact(v)}" for k, v in sorted(obj.items())) + "\n}\n"
    return compact(obj) + "\n"


# ---------------------------------------------------------------------------------------
# comparison

def first_difference(expected, actual, path="$"):
    """The path and both values of the first field where the two differ, or None."""
    if type(expected) is not type(actual):
        return path, expected, actual
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(actual)):
            sub = f"{path}[{json.dumps(key, ensure_ascii=False)}]"
            if key not in actual:
                return sub, expected[key], "<missing>"
            if key not in expected:
                return sub, "<absent in golden>", actual[key]
            found = first_difference(expected[key], actual[key], sub)
            if found:
                return found
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}.length", len(expected), len(actual)
        return None
    return None if expected == actual else (path, expected, actual)


def short(value, limit=600):
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def describe_differences(expected, actual, max_reads=15):
    """A readable report: per differing read, the path of its first differing field."""
    lines = []
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    for key in missing:
        lines.append(f"read not captured: {key}")
    for key in extra:
        lines.append(f"read not in golden file: {key}")
    differing = 0
    for key in sorted(set(expected) & set(actual)):
        found = first_difference(expected[key], actual[key], "$")
        if found:
            differing += 1
            if differing <= max_reads:
                path, e, a = found
                lines.append(f"{key}\n    first difference at {path}\n    golden: {short(e)}\n    actual: {short(a)}")
    if differing > max_reads:
        lines.append(f"... and {differing - max_reads} more differing reads")
    if lines:
        lines.insert(0, f"{differing} of {len(expected)} reads differ, {len(missing)} missing, {len(extra)} extra")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# capture

class Reader:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.out = {}
        self.http = requests.Session()

    def get(self, name, path, params=None, session=None, keep=None):
        """GET, normalize and record the read under `name` (unique); returns the parsed body."""
        assert name not in self.out, f"duplicate read {name}"
        headers = {"Session-Key": session} if session else {"Api-Token": API_TOKEN}
        r = self.http.get(self.base + path, params=params, headers=headers, timeout=30)
        try:
            body = r.json()
        except ValueError:
            body = {"non_json_body": r.text}
        raw = body
        body = normalize(body, self.base)
        if keep is not None:
            body = keep(body)
        self.out[name] = {"status": r.status_code, "body": body}
        return raw if r.status_code == 200 else None

    def pages(self, name, path, params, session=None, item_key=None, max_pages=20, keep=None):
        """Follows `next` tokens; each page is its own read."""
        params = dict(params)
        for n in range(max_pages):
            body = self.get(f"{name} page={n}", path, params, session=session, keep=keep)
            if not body or not body.get("next") or (item_key == "changelog" and not body.get("has_more")):
                return
            params["token"] = body["next"]

    def raw(self, name, path, session=None):
        """Bytes of a download: status, content type, size, sha256 and base64."""
        headers = {"Session-Key": session} if session else {"Api-Token": API_TOKEN}
        r = self.http.get(self.base + path, headers=headers, timeout=30)
        entry = {"status": r.status_code, "content_type": r.headers.get("Content-Type", "")}
        if r.status_code == 200:
            entry.update(size=len(r.content), sha256=hashlib.sha256(r.content).hexdigest(),
                         base64=base64.b64encode(r.content).decode())
        else:
            entry["body"] = normalize(r.json(), self.base)
        self.out[name] = entry

    def events(self, name, user_id, last_event_id, session=None, timeout=5.0):
        """An event stream resumed at `last_event_id`: every frame before the first heartbeat."""
        headers = {"Session-Key": session} if session else {"Api-Token": API_TOKEN}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        resp = requests.get(f"{self.base}/v3/users/{requests.utils.quote(user_id, safe='')}/events",
                            headers=headers, stream=True, timeout=(5, timeout))
        if resp.status_code != 200:
            self.out[name] = {"status": resp.status_code, "body": normalize(resp.json(), self.base)}
            resp.close()
            return
        lines = queue.Queue()

        def pump():
            # Split on b"\n" only: requests' iter_lines splits on every Unicode line break
            # (str.splitlines: U+2028, U+0085, ...), which JSON strings may hold unescaped.
            buffer = b""
            try:
                for chunk in resp.iter_content(chunk_size=None):
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        lines.put(line.rstrip(b"\r").decode("utf-8"))
            except Exception as e:  # the stream closed under us
                lines.put(e)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        frames, frame, ended = [], {}, "timeout"
        deadline = time.time() + timeout
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.01, deadline - time.time()))
                except queue.Empty:
                    break
                if line is None or isinstance(line, Exception):
                    ended = "closed"
                    break
                if line.startswith(":"):
                    ended = "heartbeat"
                    break
                if line == "":
                    if frame:
                        frames.append(frame)
                    frame = {}
                    continue
                key, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if key == "data":
                    value = normalize(json.loads(value), self.base)
                frame[key] = value
        finally:
            resp.close()
        entry = {"status": 200, "frames": frames}
        if ended == "closed":  # else a heartbeat (or a silent stream): every replayed frame is in
            entry["closed"] = True
        self.out[name] = entry


def _q(segment):
    return requests.utils.quote(segment, safe="")


# Projections that keep the golden file small: the reads that test an order or a filter keep
# the ids in order (the objects themselves are compared in full by other reads).

def _without_ts(body):
    return {k: v for k, v in body.items() if k != "ts"} if isinstance(body, dict) else body


def _channel_urls(body):
    if not isinstance(body, dict) or "channels" not in body:
        return body
    return dict(_without_ts(body), channels=[c["channel_url"] for c in body["channels"]])


def _changelog_urls(body):
    if not isinstance(body, dict) or "updated" not in body:
        return body
    return dict(body, updated=[c["channel_url"] for c in body["updated"]])


def _message_ids(body):
    if not isinstance(body, dict) or "messages" not in body:
        return body
    return dict(body, messages=[m["message_id"] for m in body["messages"]])


MY_CHANNEL_VARIANTS = [  # (label, params, full objects?)
    ("default", {}, False),
    ("all-full", dict(show_empty="true", hidden_mode="all", show_metadata="true",
                      show_metacounter="true", show_read_receipt="true", show_delivery_receipt="true", limit=100), True),
    ("latest-last-message", dict(order="latest_last_message", show_empty="true", hidden_mode="all", limit=3), False),
    ("name-alphabetical", dict(order="channel_name_alphabetical", show_empty="true", hidden_mode="all", limit=100), False),
    ("metadata-alphabetical", dict(order="metadata_value_alphabetical", metadata_order_key="topic",
                                   show_empty="true", hidden_mode="all", limit=100), False),
    ("hidden-only", dict(hidden_mode="hidden_only", show_empty="true"), False),
    ("hidden-allow", dict(hidden_mode="hidden_allow_auto_unhide", show_empty="true"), False),
    ("hidden-prevent", dict(hidden_mode="hidden_prevent_auto_unhide", show_empty="true"), False),
    ("invited-only", dict(member_state_filter="invited_only", show_empty="true", hidden_mode="all"), False),
    ("joined-only", dict(member_state_filter="joined_only", show_empty="true", hidden_mode="all"), False),
    ("unread", dict(unread_filter="unread_message", show_empty="true", hidden_mode="all"), False),
    ("super-public", dict(super_mode="super", show_empty="true", hidden_mode="all"), False),
    ("public", dict(public_mode="public", show_empty="true", hidden_mode="all"), False),
    ("distinct", dict(distinct_mode="distinct", show_empty="true", hidden_mode="all"), False),
    ("custom-type", dict(custom_types="team,dm", show_empty="true", hidden_mode="all"), False),
]

ALL_CHANNEL_VARIANTS = [
    ("chronological", dict(limit=4, show_member="true"), True),
    ("latest-last-message", dict(order="latest_last_message", limit=100, show_metadata="true", show_metacounter="true"), True),
    ("name-alphabetical", dict(order="channel_name_alphabetical", limit=100), False),
    ("metadata-alphabetical", dict(order="metadata_value_alphabetical", metadata_order_key="topic", limit=100), False),
    ("frozen-hidden", dict(show_frozen="false", limit=100), False),
    ("members-include", dict(members_include_in="bob,dave", query_type="AND", limit=100), False),
    ("name-contains", dict(name_contains="É", limit=100), False),
]

FULL = dict(show_member="true", show_read_receipt="true", show_delivery_receipt="true",
            show_metadata="true", show_metacounter="true")
NO_MEMBERS = dict(FULL, show_member="false")  # members are the same for every viewer
INCLUDES = dict(include_reactions="true", include_thread_info="true", include_parent_message_info="true",
                with_sorted_meta_array="true")


def capture(base, manifest, rest=True, events=True):
    """Every golden read of the manifest's data, normalized: {read name: {status, body}}.

    `rest`: the REST reads; `events`: the event stream replays (they write presence, so they
    come last)."""
    rd = Reader(base)
    if rest:
        _capture_rest(rd, manifest)
    if events:
        _capture_events(rd, manifest)
    return rd.out


def _capture_rest(rd, manifest):
    users = manifest["users"]
    sessions = manifest["sessions"]  # used session keys: user -> key
    channels = manifest["channels"]

    # Users.
    rd.get("GET /v3/users", "/v3/users", {"limit": 100})
    rd.pages("GET /v3/users active_mode=all limit=3", "/v3/users", {"active_mode": "all", "limit": 3})
    rd.get("GET /v3/users deactivated", "/v3/users", {"active_mode": "deactivated"})
    rd.get("GET /v3/users nickname_startswith", "/v3/users", {"nickname_startswith": "É", "active_mode": "all"})
    rd.get("GET /v3/users metadata", "/v3/users", {"metadatakey": "team", "metadatavalues_in": "core,ops"})
    for u in users:
        p = f"/v3/users/{_q(u)}"
        rd.get(f"GET user {u}", p, {"include_unread_count": "true"})
        rd.get(f"unread_message_count {u}", p + "/unread_message_count")
        rd.get(f"unread_message_count super {u}", p + "/unread_message_count", {"super_mode": "super"})
        rd.get(f"unread_message_count custom {u}", p + "/unread_message_count", {"custom_types": "team"})
        rd.get(f"unread_channel_count {u}", p + "/unread_channel_count")
        rd.get(f"channel_invitation_preference {u}", p + "/channel_invitation_preference")
        if u in manifest["member_view_users"]:
            rd.get(f"my_group_channels {u} with members", p + "/my_group_channels",
                   dict(FULL, show_empty="true", hidden_mode="all", limit=100), keep=_without_ts)
        for label, params, full in MY_CHANNEL_VARIANTS:
            rd.get(f"my_group_channels {u} {label}", p + "/my_group_channels", params,
                   keep=_without_ts if full else _channel_urls)
        rd.pages(f"channel changelogs {u} token0", p + "/my_group_channels/changelogs",
                 dict(FULL if u in manifest["member_view_users"] else NO_MEMBERS, token=TOKEN_ZERO, limit=3),
                 item_key="changelog", keep=None if u in manifest["member_view_users"] else _changelog_urls)
        rd.get(f"channel changelogs {u} change_ts0", p + "/my_group_channels/changelogs", dict(change_ts=0),
               keep=_changelog_urls)
    for u, key in sorted(sessions.items()):
        p = f"/v3/users/{_q(u)}"
        rd.get(f"as {u}: GET self", p, {"include_unread_count": "true"}, session=key)
        other = users[0] if users[0] != u else users[1]
        rd.get(f"as {u}: GET {other}", f"/v3/users/{_q(other)}", session=key)
        rd.get(f"as {u}: my_group_channels", p + "/my_group_channels",
               dict(show_empty="true", hidden_mode="all", limit=100), session=key,
               keep=_channel_urls)
        rd.get(f"as {u}: group_channels", "/v3/group_channels", dict(limit=100), session=key, keep=_channel_urls)
        rd.get(f"as {u}: unread_message_count", p + "/unread_message_count", session=key)
    for label, key in sorted(manifest["dead_sessions"].items()):
        u = key["user_id"]
        rd.get(f"dead session {label}: GET self", f"/v3/users/{_q(u)}", session=key["token"])

    # All channels (admin).
    for label, params, full in ALL_CHANNEL_VARIANTS:
        rd.pages(f"GET /v3/group_channels {label}", "/v3/group_channels", params,
                 keep=_without_ts if full else _channel_urls)

    # Per channel.
    for url, info in sorted(channels.items()):
        c = f"/v3/group_channels/{_q(url)}"
        rd.get(f"channel {url}", c, FULL)
        rd.get(f"channel {url} show_member=false", c, {"show_member": "false"})
        for u in info.get("viewers", []):
            rd.get(f"channel {url} as {u}", c, dict(NO_MEMBERS, user_id=u))
        for u, key in sorted(sessions.items()):
            if u in info.get("viewers", []):
                rd.get(f"channel {url} session {u}", c, {"show_member": "true"}, session=key)
        rd.pages(f"members {url}", c + "/members", {"limit": 4})
        rd.get(f"members {url} operator_then_member", c + "/members",
               {"order": "operator_then_member_alphabetical", "limit": 100})
        rd.get(f"members {url} invited muted", c + "/members",
               {"member_state_filter": "invited_only", "limit": 100})
        rd.get(f"members {url} muted", c + "/members", {"muted_member_filter": "muted", "limit": 100})
        rd.get(f"members {url} nickname E", c + "/members", {"nickname_startswith": "E", "limit": 100})
        for u in info.get("member_probe", []):
            rd.get(f"is_member {url} {u}", c + f"/members/{_q(u)}")
        rd.get(f"operators {url}", c + "/operators", {"limit": 100})
        rd.get(f"ban list {url}", c + "/ban", {"limit": 100})
        rd.get(f"mute list {url}", c + "/mute", {"limit": 100})
        for u in info.get("restriction_probe", []):
            rd.get(f"ban {url} {u}", c + f"/ban/{_q(u)}")
            rd.get(f"mute {url} {u}", c + f"/mute/{_q(u)}",
                   keep=lambda b: {k: v for k, v in b.items() if k != "remaining_duration"} if isinstance(b, dict) else b)
        rd.get(f"metadata {url}", c + "/metadata")
        rd.get(f"metacounter {url}", c + "/metacounter")
        for key in info.get("metadata_keys", []):
            rd.get(f"metadata {url} {key}", c + f"/metadata/{_q(key)}")
        rd.get(f"total_count {url}", c + "/messages/total_count")
        # Message lists (§7.2).
        m = c + "/messages"
        rd.get(f"messages {url} newest all", m, dict(INCLUDES, prev_limit=200, include_reply_type="ALL"))
        rd.get(f"messages {url} newest none", m, dict(prev_limit=200), keep=_message_ids)
        rd.get(f"messages {url} reply_to_channel", m,
               dict(INCLUDES, prev_limit=200, include_reply_type="only_reply_to_channel"), keep=_message_ids)
        rd.get(f"messages {url} oldest", m, dict(message_ts=0, next_limit=5, prev_limit=0, include_reactions="true"), keep=_message_ids)
        for n, a in enumerate(info.get("anchors", [])):
            rd.get(f"messages {url} around ts {n}", m,
                   dict(message_ts=a["ts"], prev_limit=3, next_limit=3, include_reply_type="ALL"), keep=_message_ids)
            rd.get(f"messages {url} around ts {n} exclusive reverse", m,
                   dict(message_ts=a["ts"], prev_limit=2, next_limit=2, include="false", reverse="true"), keep=_message_ids)
            rd.get(f"messages {url} around id {n}", m,
                   dict(INCLUDES, message_ts=a["ts"], message_id=a["id"], prev_limit=2, next_limit=2))
        rd.get(f"messages {url} FILE", m, dict(message_type="FILE", prev_limit=50), keep=_message_ids)
        rd.get(f"messages {url} custom_types", m, dict(custom_types="note", prev_limit=50), keep=_message_ids)
        rd.get(f"messages {url} sender bob", m, dict(sender_ids="bob", prev_limit=50, include_reply_type="ALL"), keep=_message_ids)
        for u in info.get("viewers", []):
            rd.get(f"messages {url} for {u}", m, dict(user_id=u, prev_limit=50, include_reply_type="ALL"), keep=_message_ids)
        for u, key in sorted(sessions.items()):
            if u in info.get("viewers", []):
                rd.get(f"messages {url} session {u}", m, dict(prev_limit=50, include_thread_info="true"), session=key,
                       keep=_message_ids)
        for pid in info.get("parents", []):
            rd.get(f"thread {url} {pid}", m, dict(INCLUDES, parent_message_id=pid, message_ts=0, next_limit=50))
        for mid in info.get("message_ids", []):
            rd.get(f"message {url} {mid}", m + f"/{mid}")
        for mid in info.get("reacted", []):
            rd.get(f"reactions {url} {mid}", m + f"/{mid}/reactions")
        rd.pages(f"message changelogs {url} token0", m + "/changelogs",
                 dict(INCLUDES, token=TOKEN_ZERO, limit=4), item_key="changelog")
        rd.get(f"message changelogs {url} change_ts0 NONE", m + "/changelogs",
               dict(change_ts=0, include_reply_type="NONE"))
        for u in info.get("viewers", [])[:2]:
            rd.get(f"message changelogs {url} for {u}", m + "/changelogs", dict(token=TOKEN_ZERO, user_id=u))
        for n, g in enumerate(info.get("gaps", [])):
            rd.get(f"messages_gap {url} {n}", c + "/messages_gap", dict(INCLUDES, **g))

    # Files.
    for n, f in enumerate(manifest["files"]):
        rd.raw(f"file {n} admin", f["path"])
        for u in f.get("as", []):
            rd.raw(f"file {n} as {u}", f["path"], session=sessions[u])

    # Reports.
    rd.pages("GET /v3/report", "/v3/report", {"limit": 2})



def _capture_events(rd, manifest):
    """Event streams: they mark users online (normalized) and write last_seen_at."""
    sessions = manifest["sessions"]
    mid = manifest["event_mid"]
    for u in manifest["event_users_from_0"]:
        rd.events(f"events {u} from 0", u, 0)
    for u in manifest["event_users_from_mid"]:
        rd.events(f"events {u} from {mid}", u, mid, session=sessions.get(u))
    u = manifest["event_users_from_0"][0]
    rd.events(f"events {u} no resume", u, None)
    rd.events(f"events {u} unknown id", u, 10 ** 9)


@contextlib.contextmanager
def working_directory(path):
    """The server stores an upload's path as `<--database as given>.files/<id>`; the fixtures
    were written with a relative `--database`, so a server reading a copy runs in its
    directory (conftest.Server starts the server in the current directory)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def copy_fixture(src_db, dst_db):
    """A database file and its upload directory (`<database>.files/`)."""
    shutil.copyfile(src_db, dst_db)
    if os.path.isdir(src_db + ".files"):
        shutil.copytree(src_db + ".files", dst_db + ".files")


def golden(manifest, reads):
    return {"format": FORMAT, "manifest": manifest, "reads": reads}
