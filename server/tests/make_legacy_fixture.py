#!/usr/bin/env python3
"""Writes the legacy fixtures of the server's on-disk format (issue 22).

    python3 server/tests/make_legacy_fixture.py [--server BIN] [--out DIR]

With the server binary BIN (default /work/legacy-server/parley-server-records: the server of
the `records` / `events` / `counters` layout, members as `member` records), it creates a
fresh database and writes a rich data set through the REST API only, stops the server
(SIGTERM) and writes into DIR (default: tests/fixtures beside this script):

- legacy-v1.sqlite (+ legacy-v1.sqlite.files/): that database, WAL checkpointed into the
  one file;
- legacy-v0.sqlite (+ .files/): the same data in the earlier layout, each channel's members
  inside the channel record (`members` map keyed by user id) and no `member` records (and
  the uploads' paths naming legacy-v0.sqlite.files/);
- legacy-v1.expected.json: the manifest of the data set and the golden reads
  (legacy_fixture.capture) of the server BIN restarted on a copy of legacy-v1.sqlite.
  The same reads from legacy-v0.sqlite, and a second capture of v1, are checked to be
  identical before anything is written.

Timestamps are the real clock of the run, so a new run writes different files; the
golden file matches the fixture it was captured from. test_migration.py reads the fixtures
with the server under test and compares.
"""
import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import legacy_fixture  # noqa: E402

DEFAULT_SERVER = "/work/legacy-server/parley-server-records"
SEP = "\x01"  # between channel url and user id in a member record's key


def start_server(db_path):
    from conftest import Server  # needs PARLEY_SERVER_BIN, set in main()
    return Server(db_path, legacy_fixture.SERVER_ARGS)


def q(segment):
    return requests.utils.quote(segment, safe="")


class Builder:
    def __init__(self, server):
        self.s = server
        self.sessions = {}

    def ok(self, method, path, **kw):
        return self.s.ok(method, path, **kw)

    def user(self, user_id, nickname, **fields):
        self.ok("POST", "/v3/users", json=dict(user_id=user_id, nickname=nickname, **fields))
        return user_id

    def send(self, channel, user_id, text, **fields):
        body = {"message_type": "MESG", "user_id": user_id, "message": text}
        if text is None:
            del body["message"]
        body.update(fields)
        return self.ok("POST", f"/v3/group_channels/{q(channel)}/messages", json=body)

    def tick(self):
        time.sleep(0.005)  # distinct milliseconds where order by time matters


def build(server):
    """Writes the data set; returns the manifest the capture reads it by.

    12 users (metadata, discovery keys, non-ASCII ids and nicknames, NFC / NFD twins, a
    right-to-left nickname, a profile_url), session keys (one expiring in 20 years, one
    expired, one never used, one of a deactivated user), 7 channels: `general` (custom_type,
    data, cover, metadata, metacounters, operators, an invitee, a ban, a ban in advance of a
    non-member, mutes: forever, 10 years and one that ended, a reset_user_history, receipts),
    a distinct channel with a generated url (hidden, prevent auto-unhide), a public channel
    (joins, an invitation, a leave, hidden allowing auto-unhide, a copied message), a super
    channel, a frozen channel without messages, a channel with a declined invitation, a
    deleted channel; messages of every kind (plain, mentions of users and of the channel,
    two in one millisecond, a thread with a reply also in the channel, reactions, pins,
    sorted_metaarray, an upload, a file by URL with thumbnails, an edit, deletions, silent,
    ADMM); reports of each kind; a deactivated and a deleted user; ~120 events.
    """
    b = Builder(server)
    ok = b.ok

    # --- users --------------------------------------------------------------------------
    alice = b.user("alice", "Alice Ångström", profile_url="https://example.com/p/alice.png",
                   metadata={"team": "core", "emoji": "🦊", "empty": ""}, discovery_keys=["alice@example.com"])
    bob = b.user("bob", "bob", metadata={"team": "ops"})
    zoe = b.user("zoë", "Zoë 🌸 Ωmega")  # non-ASCII user id
    elodie1 = b.user("elodie-nfc", "Élodie")  # precomposed É
    elodie2 = b.user("elodie-nfd", "E\u0301lodie")  # E + combining acute: same order key
    dave = b.user("dave", "Dave (invites)")
    erin = b.user("erin", "Erin")  # reset_user_history, later deactivated
    frank = b.user("frank", "Frank")  # deleted at the end
    grace = b.user("grace", "Grace")  # banned
    heidi = b.user("heidi", "Heidi \u05e9\u05dc\u05d5\u05dd")  # muted; right-to-left text
    ivan = b.user("ivan", "Ivan")  # timed mute that ends; expired session
    judy = b.user("judy", "Judy", profile_url="https://example.com/p/judy.jpg")  # never logged in
    ok("PUT", f"/v3/users/{dave}/channel_invitation_preference", json={"auto_accept": False})
    ok("PUT", f"/v3/users/{bob}", json={"preferred_languages": ["en", "de"], "nickname": "Bob Builder"})

    # --- sessions -----------------------------------------------------------------------
    far = int(time.time() * 1000) + 20 * 365 * 24 * 3600 * 1000
    for u in (alice, bob, zoe, dave, erin, heidi, elodie1):
        b.sessions[u] = server.session(u)
    b.sessions[bob] = server.session(bob, expires_at=far)  # bob's key expires in 20 years
    server.session(judy)  # stored, never used
    expiring = server.session(ivan, expires_at=int(time.time() * 1000) + 1500)
    for u, key in b.sessions.items():  # every key the capture uses has logged in once
        ok("GET", f"/v3/users/{q(u)}", session=key)
    ok("GET", f"/v3/users/{ivan}", session=expiring)

    # --- channels -----------------------------------------------------------------------
    general = server.channel([alice, bob, zoe, elodie1, elodie2, dave, erin, grace, heidi, ivan, frank],
                             channel_url="general", name="General — Общий", custom_type="team",
                             data=json.dumps({"topic": "all", "n": 1}), cover_url="https://example.com/c/general.png",
                             operator_ids=[alice], inviter_id=alice)["channel_url"]
    ok("POST", f"/v3/group_channels/{general}/metadata",
       json={"metadata": {"topic": "Ångström", "color": "blue", "ünï": "cödé"}})
    ok("POST", f"/v3/group_channels/{general}/metacounter", json={"metacounter": {"visits": 3, "likes": 0}})
    ok("PUT", f"/v3/group_channels/{general}/metacounter", json={"metacounter": {"visits": 2}, "mode": "increase"})
    dm = server.channel([alice, bob], is_distinct=True, custom_type="dm")["channel_url"]  # generated url
    again = server.channel([bob, alice], is_distinct=True, custom_type="dm")
    assert again["channel_url"] == dm and again["is_created"] is False
    lobby = server.channel([alice], channel_url="lobby", is_public=True, name="a lobby",
                           custom_type="public")["channel_url"]
    ok("POST", f"/v3/group_channels/{lobby}/metadata", json={"metadata": {"topic": "Bar"}})
    news = server.channel([alice, bob, zoe, judy], channel_url="news", is_super=True, name="Announcements",
                          operator_ids=[alice], data="super")["channel_url"]
    quiet = server.channel([alice, bob, dave], channel_url="quiet", name="E\u0301cole",
                           custom_type="team")["channel_url"]  # no messages; dave invited
    ok("PUT", f"/v3/group_channels/{quiet}/freeze", json={"freeze": True})
    named = server.channel([bob, zoe], channel_url="named", name="École", data="")["channel_url"]
    doomed = server.channel([alice, bob, zoe], channel_url="doomed", name="Doomed")["channel_url"]
    b.send(doomed, bob, "soon gone")

    # --- public channel membership ------------------------------------------------------
    for u in (bob, zoe, erin):
        ok("PUT", f"/v3/group_channels/{lobby}/join", session=b.sessions[u], json={})
    ok("PUT", f"/v3/group_channels/{lobby}/join", json={"user_id": elodie2})
    ok("POST", f"/v3/group_channels/{lobby}/invite", json={"user_ids": [dave], "inviter_id": alice})
    b.send(lobby, alice, "welcome to the lobby")
    b.tick()
    ok("PUT", f"/v3/group_channels/{lobby}/leave", session=b.sessions[erin], json={})  # tombstone
    b.send(lobby, zoe, "bye erin")

    # --- messages in general ------------------------------------------------------------
    msgs = {}
    msgs["hello"] = b.send(general, alice, "Hello, everyone! 👋", req_id="req-hello")
    b.tick()
    msgs["note"] = b.send(general, bob, "a note with data", custom_type="note", data='{"k":"v"}',
                          sorted_metaarray=[{"key": "tags", "value": ["x", "y"]}, {"key": "a", "value": []}])
    b.tick()
    msgs["mention"] = b.send(general, zoe, "@bob @Élodie look", mentioned_user_ids=[bob, elodie1, "nobody"])
    b.tick()
    msgs["channel_mention"] = b.send(general, alice, "@channel all hands", mention_type="channel")
    b.tick()
    same = msgs["channel_mention"]["created_at"]
    msgs["same_ms_1"] = b.send(general, bob, "same millisecond 1", created_at=same)
    msgs["same_ms_2"] = b.send(general, zoe, "same millisecond 2", created_at=same)
    b.tick()
    parent = b.send(general, alice, "thread parent: what shall we eat?")
    msgs["parent"] = parent
    pid = parent["message_id"]
    b.tick()
    msgs["reply1"] = b.send(general, bob, "pizza", parent_message_id=pid)
    b.tick()
    msgs["reply2"] = b.send(general, zoe, "ramen (also in channel)", parent_message_id=pid, is_reply_to_channel=True)
    b.tick()
    msgs["reply3"] = b.send(general, elodie1, "crêpes", parent_message_id=pid)
    b.tick()
    for who, key in ((bob, "👍"), (zoe, "👍"), (elodie1, "❤️"), (alice, "👍"), (heidi, "laugh")):
        ok("POST", f"/v3/group_channels/{general}/messages/{msgs['hello']['message_id']}/reactions",
           json={"user_id": who, "reaction": key})
    ok("DELETE", f"/v3/group_channels/{general}/messages/{msgs['hello']['message_id']}/reactions",
       params={"user_id": heidi, "reaction": "laugh"})
    ok("POST", f"/v3/group_channels/{general}/messages/{pid}/reactions", json={"user_id": bob, "reaction": "🍕"})
    ok("POST", f"/v3/group_channels/{general}/messages/{msgs['note']['message_id']}/pin", json={})
    ok("POST", f"/v3/group_channels/{general}/messages/{msgs['hello']['message_id']}/pin", json={})
    ok("POST", f"/v3/group_channels/{general}/messages/{msgs['hello']['message_id']}/sorted_metaarray",
       json={"sorted_metaarray": [{"key": "lang", "value": ["en"]}]})
    ok("PUT", f"/v3/group_channels/{general}/messages/{msgs['note']['message_id']}/sorted_metaarray",
       json={"sorted_metaarray": [{"key": "tags", "value": ["x"]}], "mode": "remove"})
    # A file upload (multipart) and a file message by URL.
    up = requests.post(server.url(f"/v3/group_channels/{general}/messages"),
                       headers={"Api-Token": legacy_fixture.API_TOKEN},
                       data={"message_type": "FILE", "user_id": bob, "custom_type": "note",
                             "thumbnails": json.dumps([{"url": "https://example.com/t/1.png", "width": 32,
                                                        "height": 24, "real_width": 320, "real_height": 240}])},
                       files={"file": ("hello wörld.txt", "Grüße aus der Datei\n\x00\x01binary".encode(), "text/plain")},
                       timeout=10)
    assert up.status_code == 200, up.text
    msgs["upload"] = up.json()
    b.tick()
    gone_up = requests.post(server.url(f"/v3/group_channels/{general}/messages"),
                            headers={"Api-Token": legacy_fixture.API_TOKEN},
                            data={"message_type": "FILE", "user_id": zoe},
                            files={"file": ("gone.bin", bytes(range(64)), "application/octet-stream")}, timeout=10)
    assert gone_up.status_code == 200, gone_up.text
    msgs["upload_deleted"] = gone_up.json()
    b.tick()
    msgs["file_url"] = b.send(general, alice, None, message_type="FILE", url="https://example.com/f/report.pdf",
                              file_name="report.pdf", file_size=12345, file_type="application/pdf",
                              thumbnails=["https://example.com/t/report.png"])
    b.tick()
    msgs["edited"] = b.send(general, heidi, "tpyo", mentioned_user_ids=[bob])
    b.tick()
    msgs["deleted"] = b.send(general, ivan, "regrettable")
    b.tick()
    msgs["silent"] = b.send(general, alice, "silent housekeeping", is_silent=True)
    b.tick()
    msgs["admin"] = ok("POST", f"/v3/group_channels/{general}/messages",
                       json={"message_type": "ADMM", "message": "Admin notice", "custom_type": "notice"})
    b.tick()
    ok("PUT", f"/v3/group_channels/{general}/messages/{msgs['edited']['message_id']}",
       json={"message": "typo fixed", "mentioned_user_ids": [zoe], "data": "edited"})
    ok("DELETE", f"/v3/group_channels/{general}/messages/{msgs['deleted']['message_id']}")
    ok("DELETE", f"/v3/group_channels/{general}/messages/{msgs['upload_deleted']['message_id']}")
    msgs["copy"] = ok("POST", f"/v3/group_channels/{general}/messages/{msgs['hello']['message_id']}/copy",
                      json={"dest_channel_url": lobby})

    # --- moderation ---------------------------------------------------------------------
    ok("POST", f"/v3/group_channels/{general}/operators", json={"operator_ids": [zoe]})
    ok("POST", f"/v3/group_channels/{general}/ban", json={"user_id": grace, "description": "spam ✋"})
    ok("POST", f"/v3/group_channels/{general}/ban",
       json={"user_id": judy, "seconds": 10 * 365 * 24 * 3600, "description": "in advance"})  # non-member
    ok("POST", f"/v3/group_channels/{general}/mute", json={"user_id": heidi, "description": "cool down"})
    ok("POST", f"/v3/group_channels/{general}/mute", json={"user_id": ivan, "seconds": 1, "description": "brief"})
    ok("POST", f"/v3/group_channels/{general}/mute",
       json={"user_id": elodie2, "seconds": 10 * 365 * 24 * 3600})  # remaining_duration: normalized

    # --- per-user state -----------------------------------------------------------------
    ok("PUT", f"/v3/group_channels/{general}/reset_user_history", session=b.sessions[erin], json={})
    b.tick()
    msgs["after_reset"] = b.send(general, bob, "after erin's reset", mentioned_user_ids=[erin])
    b.tick()
    ok("PUT", f"/v3/group_channels/{general}/messages/mark_as_read", session=b.sessions[zoe], json={})
    ok("PUT", f"/v3/group_channels/{general}/messages/mark_as_read", json={"user_id": elodie1})
    ok("PUT", f"/v3/group_channels/{general}/messages/mark_as_delivered", json={"user_id": heidi})
    ok("PUT", f"/v3/group_channels/{general}/messages/mark_as_delivered", json={"user_id": bob})
    # Hidden channels, both modes.
    ok("PUT", f"/v3/group_channels/{q(dm)}/hide", session=b.sessions[bob],
       json={"hide_previous_messages": True, "allow_auto_unhide": False})
    ok("PUT", f"/v3/group_channels/{lobby}/hide", session=b.sessions[zoe], json={})  # allow auto-unhide
    ok("PUT", f"/v3/group_channels/{news}/hide", json={"user_id": alice})
    ok("DELETE", f"/v3/group_channels/{news}/hide", json={"user_id": alice})  # unhidden again
    # Messages elsewhere.
    b.send(dm, alice, "psst, bob")
    b.tick()
    b.send(news, alice, "Version 2 is out", mention_type="channel")
    b.tick()
    b.send(named, zoe, "École!")
    b.tick()
    ok("PUT", f"/v3/users/{alice}/mark_as_read_all", json={})
    ok("PUT", f"/v3/users/{bob}/mark_as_read_all", json={"channel_urls": [news]})

    # --- channel settings, invitations --------------------------------------------------
    ok("PUT", f"/v3/group_channels/{general}", json={"data": json.dumps({"topic": "all", "n": 2})})
    ok("POST", f"/v3/group_channels/{news}/invite", json={"user_ids": [dave]})
    ok("POST", f"/v3/group_channels/{named}/invite", json={"user_ids": [dave, heidi], "inviter_id": zoe})
    ok("PUT", f"/v3/group_channels/{named}/decline", json={"user_id": dave})
    ok("PUT", f"/v3/group_channels/{news}/metacounter/reads", json={"value": 7, "upsert": True})

    # --- reports ------------------------------------------------------------------------
    ok("POST", f"/v3/report/group_channels/{general}/messages/{msgs['mention']['message_id']}",
       json={"report_category": "spam", "reporting_user_id": bob, "report_description": "mentions"})
    ok("POST", f"/v3/report/users/{grace}",
       json={"report_category": "harassing", "reporting_user_id": alice, "channel_url": general,
             "report_description": "rude ✋"})
    ok("POST", f"/v3/report/group_channels/{lobby}", session=b.sessions[zoe],
       json={"report_category": "inappropriate", "report_description": ""})
    ok("POST", f"/v3/report/group_channels/{general}/messages/{msgs['note']['message_id']}",
       session=b.sessions[heidi], json={"report_category": "suspicious"})

    # --- deletions, deactivation --------------------------------------------------------
    ok("DELETE", f"/v3/group_channels/{doomed}")
    ok("PUT", f"/v3/users/{erin}", json={"is_active": False})
    ok("DELETE", f"/v3/users/{frank}")
    time.sleep(1.6)  # the 1 s mute and the 1.5 s session key end
    r = server.request("GET", f"/v3/users/{ivan}", session=expiring)
    assert r.status_code == 401 and r.json()["code"] == 400302, r.text

    # --- the manifest -------------------------------------------------------------------
    erin_key = b.sessions.pop(erin)  # deactivated: its key no longer authenticates
    # The newest position of the change sequence (a changelog's `next` token is hex of "[seq]").
    changelog = server.ok("GET", f"/v3/users/{alice}/my_group_channels/changelogs", params={"change_ts": 0})
    newest_event_id = json.loads(bytes.fromhex(changelog["next"]))[0]
    general_msgs = [m["message_id"] for m in msgs.values() if m["channel_url"] == general]
    parent_ts = msgs["parent"]["created_at"]
    users = [alice, bob, zoe, elodie1, elodie2, dave, erin, frank, grace, heidi, ivan, judy]
    last = server.ok("GET", f"/v3/group_channels/{general}/messages", params={"prev_limit": 1})["messages"][0]
    first = msgs["hello"]
    manifest = {
        "users": users,
        "sessions": dict(sorted(b.sessions.items())),
        "dead_sessions": {"expired": {"user_id": ivan, "token": expiring},
                          "deactivated": {"user_id": erin, "token": erin_key}},
        # judy's key is stored but never used: using it would mark judy `has_ever_logged_in`.
        "channels": {
            general: {
                "viewers": [alice, bob, zoe, dave, erin, heidi, ivan, grace],
                "member_probe": [alice, dave, grace, frank, judy],
                "restriction_probe": [grace, judy, heidi, ivan, elodie2, bob],
                "metadata_keys": ["topic", "missing"],
                "anchors": [{"ts": same, "id": msgs["same_ms_1"]["message_id"]},
                            {"ts": parent_ts, "id": pid}],
                "parents": [pid, msgs["hello"]["message_id"]],
                "message_ids": sorted(general_msgs),
                "reacted": [msgs["hello"]["message_id"], pid],
                "gaps": [
                    {"prev_start_ts": first["created_at"], "prev_end_ts": same, "prev_cache_count": 4},
                    {"prev_start_ts": first["created_at"], "prev_end_ts": same, "prev_cache_count": 6,
                     "prev_start_id": first["message_id"], "prev_end_id": msgs["same_ms_2"]["message_id"],
                     "next_start_ts": last["created_at"], "next_end_ts": last["created_at"],
                     "next_cache_count": 1, "prev_limit": 2, "next_limit": 2},
                    {"prev_start_ts": first["created_at"], "prev_end_ts": first["created_at"],
                     "huge_gap_threshold": 3, "include_reply_type": "ALL"},
                    {"prev_start_ts": parent_ts, "prev_end_ts": parent_ts,
                     "parent_message_id": pid, "prev_cache_count": 0},
                ],
            },
            dm: {"viewers": [alice, bob], "member_probe": [bob, zoe]},
            lobby: {"viewers": [alice, zoe, erin, dave, judy], "member_probe": [erin, dave, elodie2],
                    "metadata_keys": ["topic"], "message_ids": [msgs["copy"]["message_id"]]},
            news: {"viewers": [alice, bob, dave, judy], "restriction_probe": [bob]},
            quiet: {"viewers": [bob, dave]},
            named: {"viewers": [zoe, dave, heidi]},
            doomed: {"viewers": [alice]},
            "no-such-channel": {},
        },
        "files": [{"path": path_of(msgs["upload"]["file"]["url"]), "as": [bob, zoe, heidi]},
                  {"path": path_of(msgs["upload_deleted"]["file"]["url"])},
                  {"path": "/v3/files/no-such-file"}],
        # Replays from id 0 (every event of the user), and from the middle of the log (with the
        # user's session key where there is one).
        "event_users_from_0": [alice, dave, grace],
        # Users whose channel changelogs and my_group_channels are also captured with members.
        "member_view_users": [alice, dave, erin],
        "event_users_from_mid": [bob, erin, heidi, judy],
        "event_mid": newest_event_id * 3 // 4,
    }
    return manifest


def path_of(url):
    """The path of an absolute URL of this server (its port changes from run to run)."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def rename_upload_paths(db_path, old, new):
    """Upload records hold `<database as given>.files/<id>`: the v0 copy's own directory."""
    db = sqlite3.connect(db_path)
    try:
        with db:
            rows = db.execute("SELECT key, body FROM records WHERE kind = 'file'").fetchall()
            assert rows
            for key, body in rows:
                record = json.loads(body)
                assert record["path"].startswith(old), record["path"]
                record["path"] = new + record["path"][len(old):]
                db.execute("UPDATE records SET body = ? WHERE kind = 'file' AND key = ?",
                           (json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False), key))
    finally:
        db.close()


def checkpoint(db_path):
    """Folds the WAL into the main file; closing the last connection removes -wal and -shm.

    The file stays in WAL mode (as the server left it)."""
    db = sqlite3.connect(db_path)
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "checkpoint blocked"
    finally:
        db.close()
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(db_path + suffix), db_path + suffix


def embed_members(db_path):
    """Rewrites a database into the earlier layout: members inside the channel record."""
    db = sqlite3.connect(db_path)
    try:
        with db:
            channels = {k: json.loads(b) for k, b in db.execute("SELECT key, body FROM records WHERE kind = 'channel'")}
            count = 0
            for key, body in db.execute("SELECT key, body FROM records WHERE kind = 'member'").fetchall():
                url, user = key.split(SEP, 1)
                assert not channels[url]["members"], url
                channels[url].setdefault("_embedded", {})[user] = json.loads(body)
                count += 1
            db.execute("DELETE FROM records WHERE kind = 'member'")
            for url, record in channels.items():
                record["members"] = record.pop("_embedded", {})
                db.execute("UPDATE records SET body = ? WHERE kind = 'channel' AND key = ?",
                           (json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False), url))
        db.execute("VACUUM")
    finally:
        db.close()
    return count


def capture_from(db_path, work, manifest):
    """Starts the server on a copy of db_path (same file name, in a directory of its own that
    is the server's working directory) and captures the golden reads."""
    where = os.path.join(work, str(len(os.listdir(work))))
    os.mkdir(where)
    name = os.path.basename(db_path)
    legacy_fixture.copy_fixture(db_path, os.path.join(where, name))
    with legacy_fixture.working_directory(where):
        server = start_server(name)
        try:
            t = time.time()
            reads = legacy_fixture.capture(server.base, manifest)
            print(f"  captured {len(reads)} reads from {name} in {time.time() - t:.1f}s")
            return reads
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=DEFAULT_SERVER)
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    args = ap.parse_args()
    os.environ["PARLEY_SERVER_BIN"] = os.path.abspath(args.server)
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="legacy-fixture-") as work:
        db = os.path.join(work, "legacy-v1.sqlite")
        # The database path is given relative to the server's working directory, as with the
        # server's default (`parley-server.sqlite`): the server stores each upload's path as
        # `<database as given>.files/<id>`, so a copy works wherever it is started alike.
        with legacy_fixture.working_directory(work):
            server = start_server("legacy-v1.sqlite")
            try:
                manifest = build(server)
            finally:
                server.stop()
        assert server.proc.returncode is not None
        print(f"built the data set in {time.time() - started:.1f}s (server exit {server.proc.returncode})")
        checkpoint(db)
        v0 = os.path.join(work, "legacy-v0.sqlite")
        legacy_fixture.copy_fixture(db, v0)
        moved = embed_members(v0)
        print(f"  v0: {moved} member records folded into their channels")
        rename_upload_paths(v0, "legacy-v1.sqlite.files/", "legacy-v0.sqlite.files/")
        checkpoint(v0)
        caps = os.path.join(work, "captures")
        os.mkdir(caps)
        first = capture_from(db, caps, manifest)
        second = capture_from(db, caps, manifest)
        older = capture_from(v0, caps, manifest)
        assert first["file 0 admin"]["status"] == 200, first["file 0 admin"]
        assert legacy_fixture.dumps(first) == legacy_fixture.dumps(second), \
            "capture is not deterministic:\n" + legacy_fixture.describe_differences(first, second)
        assert legacy_fixture.dumps(first) == legacy_fixture.dumps(older), \
            "v0 reads differ:\n" + legacy_fixture.describe_differences(first, older)
        for name in ("legacy-v1.sqlite", "legacy-v0.sqlite"):
            target = os.path.join(args.out, name)
            if os.path.exists(target):
                os.remove(target)
            if os.path.isdir(target + ".files"):
                shutil.rmtree(target + ".files")
            legacy_fixture.copy_fixture(os.path.join(work, name), target)
        with open(os.path.join(args.out, "legacy-v1.expected.json"), "w", encoding="utf-8") as f:
            f.write(legacy_fixture.dumps(legacy_fixture.golden(manifest, first)))
    print(f"wrote fixtures to {args.out} in {time.time() - started:.1f}s")


if __name__ == "__main__":
    main()
