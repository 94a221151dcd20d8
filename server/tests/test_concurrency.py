"""Properties the server must keep under concurrent requests (issue 22: the storage rebuild
removes the global request lock; these tests hold the rebuild to what the lock gave).

Real server, real threads, one HTTP session per thread. PROTOCOL.md: idempotent send by
req_id (§7.1), list order (created_at, message_id) (§7.2), distinct channels (§6.1),
membership and counts (§4.2, §6.3), changelogs (§8), event streams (§9)."""
import random
import threading
from urllib.parse import urlsplit

import pytest

from conftest import Server, metric, wait_for_a_held_request
from tests_support import databases

from concurrency_support import (Client, Countdown, EventCollector, all_messages, count_event, describe_ids, member_list,
                                 message_key, now_ts, run_threads)

CLIENTS = 8
SENDS_PER_CLIENT = 200
CHANNELS = 4


def test_send_burst_stores_orders_and_streams_every_message_once(server):
    users = [server.user("burst") for _ in range(CLIENTS)]
    sessions = {u: server.session(u) for u in users}
    channels = [server.channel(users, name=f"burst-{i}")["channel_url"] for i in range(CHANNELS)]
    admin = Client(server)

    # One stream per client user, live before the burst starts.
    streams = {u: EventCollector(server, u, session_key=sessions[u]) for u in users}
    for u, s in streams.items():
        assert s.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10), f"no connected frame for {u}"
    watcher = users[0]
    changelog_start = now_ts(admin)

    # Client k sends its i-th message to channel (k + i) % CHANNELS.
    plan = {u: [(channels[(k + i) % CHANNELS], f"{u}#{i:03d}", f"{u}-r{i}") for i in range(SENDS_PER_CLIENT)]
            for k, u in enumerate(users)}
    answers = {u: [] for u in users}  # per sender, in send order: (channel, text, req_id, status, body)
    burst_done = Countdown(len(users))  # set once every sender is done (or failed)
    scans = []  # (channel, [message ids]) full listings made during the burst
    changelog_views = {}  # channel -> newest last_message id seen through the changelog chain
    changelog_calls = [0]

    def sender(u):
        def run(gate):
            client = Client(server, sessions[u])
            gate.wait()
            for url, text, req_id in plan[u]:
                r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                   json={"message_type": "MESG", "message": text, "req_id": req_id})
                answers[u].append((url, text, req_id, r.status_code, r.json() if r.status_code == 200 else r.text))
        return run

    def lister(gate):
        client = Client(server, sessions[users[1]])
        gate.wait()
        while not burst_done.is_set():
            for url in channels:
                scans.append((url, [m["message_id"] for m in all_messages(client, url, page=100)]))

    def changelog_follower(gate):
        client = Client(server, sessions[watcher])
        gate.wait()
        token = None
        msg_tokens = {}
        while True:
            finished = burst_done.is_set()  # read before the call: the last round sees the final state
            params = {"token": token} if token else {"change_ts": changelog_start}
            body = client.ok("GET", f"/v3/users/{watcher}/my_group_channels/changelogs", params=params)
            urls = [c["channel_url"] for c in body["updated"]]
            assert len(urls) == len(set(urls)), f"a channel twice in one changelog page: {urls}"
            assert body["deleted"] == [], body["deleted"]
            for c in body["updated"]:
                if "last_message" in c:
                    changelog_views[c["channel_url"]] = c["last_message"]["message_id"]
            token = body["next"]
            changelog_calls[0] += 1
            # New messages are not message changelog entries (§8.2): nothing was edited or deleted.
            url = channels[changelog_calls[0] % CHANNELS]
            params = {"token": msg_tokens[url]} if url in msg_tokens else {"change_ts": changelog_start}
            page = client.ok("GET", f"/v3/group_channels/{url}/messages/changelogs", params=params)
            assert page["updated"] == [] and page["deleted"] == [], f"message changelog of {url}: {page}"
            msg_tokens[url] = page["next"]
            if finished and not body["has_more"]:
                return

    def counted(fn):
        """The readers stop once every sender is done (or failed)."""
        def run(gate):
            try:
                fn(gate)
            finally:
                burst_done.done()
        return run

    # Senders and readers are released together by one barrier.
    targets = [(f"send-{u}", counted(sender(u))) for u in users] + [("lister", lister), ("changelogs", changelog_follower)]
    try:
        run_threads(targets, timeout=180, barrier=True)  # a hang, not slowness: debug builds on 2 cores

        # Every send was acknowledged.
        failed = [(u, a[2], a[3], a[4]) for u in users for a in answers[u] if a[3] != 200]
        assert not failed, f"{len(failed)} sends not acknowledged, first: {failed[:3]}"

        listed = {url: all_messages(admin, url) for url in channels}
        everything = [m for url in channels for m in listed[url]]
        assert len(everything) == CLIENTS * SENDS_PER_CLIENT, \
            f"{len(everything)} messages listed, {CLIENTS * SENDS_PER_CLIENT} sent: " + \
            ", ".join(f"{url}: {len(listed[url])}" for url in channels)
        ids = [m["message_id"] for m in everything]
        assert len(set(ids)) == len(ids), f"duplicate message ids: {describe_ids({i for i in ids if ids.count(i) > 1})}"
        texts = [m["message"] for m in everything]
        assert len(set(texts)) == len(texts), f"duplicate texts: {sorted({t for t in texts if texts.count(t) > 1})[:10]}"

        # Each acknowledged send is stored with exactly the answered id, text, sender and req_id.
        by_id = {m["message_id"]: m for m in everything}
        for u in users:
            for url, text, req_id, _, body in answers[u]:
                stored = by_id.get(body["message_id"])
                assert stored is not None, f"acknowledged message {body['message_id']} ({text}) is not listed"
                got = (stored["channel_url"], stored["message"], stored["user"]["user_id"], stored["req_id"])
                assert got == (url, text, u, req_id), f"message {body['message_id']}: stored {got}, answered {(url, text, u, req_id)}"

        for url in channels:
            msgs = listed[url]
            keys = [message_key(m) for m in msgs]
            assert keys == sorted(keys), f"{url}: listing not in (created_at, message_id) order"
            ids = [m["message_id"] for m in msgs]
            inversions = [(a, b) for a, b in zip(msgs, msgs[1:]) if b["message_id"] <= a["message_id"]]
            assert not inversions, "message ids do not increase with created_at in " + url + ": " + \
                str([(message_key(a), message_key(b)) for a, b in inversions[:3]])
            for u in users:
                mine = [m["message"] for m in msgs if m["user"]["user_id"] == u]
                sent = [text for c, text, _ in plan[u] if c == url]
                assert mine == sent, f"{url}: {u}'s messages listed out of send order: {mine[:5]}... vs {sent[:5]}..."
            # A listing taken mid-burst never skips: paging a channel while others write to it
            # yields a prefix of the final list (no message appears later before a listed one).
            for scan_url, scan in scans:
                if scan_url == url:
                    assert scan == ids[:len(scan)], \
                        f"{url}: a mid-burst listing of {len(scan)} messages is not a prefix of the final list; " \
                        f"first difference at {next(i for i, (a, b) in enumerate(zip(scan, ids)) if a != b)}"
        assert scans, "the lister made no listing during the burst"

        # The channel changelog chain converges on each channel's newest message.
        for url in channels:
            assert changelog_views.get(url) == listed[url][-1]["message_id"], \
                f"changelog of {watcher}: last_message of {url} is {changelog_views.get(url)}, " \
                f"the newest message is {listed[url][-1]['message_id']}"

        # Every stream got every message of its channels, once, ids strictly increasing.
        expected = set(by_id)
        total = len(expected)
        for u, stream in streams.items():
            reached = stream.wait_for(lambda fs: count_event("message_received")(fs) >= total, 40)
            frames = stream.snapshot()
            got = stream.message_frames()
            got_ids = [m for _, m, _, _ in got]
            missing = expected - set(got_ids)
            dups = {m for m in got_ids if got_ids.count(m) > 1} if len(got_ids) != len(set(got_ids)) else set()
            assert reached and not missing and not dups, \
                f"stream of {u}: {len(got_ids)} message_received frames of {total} (ended: {stream.ended}, " \
                f"error: {stream.error}); missing {describe_ids(missing)}; duplicated {describe_ids(dups)}; " \
                f"unexpected {describe_ids(set(got_ids) - expected)}"
            event_ids = [f["id"] for f in frames if f["id"] is not None]
            assert all(a < b for a, b in zip(event_ids, event_ids[1:])), f"stream of {u}: event ids not strictly increasing"
            for url in channels:
                in_channel = [m for _, m, c, _ in got if c == url]
                assert in_channel == [m["message_id"] for m in listed[url]], \
                    f"stream of {u}: message events of {url} not in message order"
    finally:
        for s in streams.values():
            s.close()


def test_failed_requests_among_concurrent_sends_undo_only_themselves(server):
    """Writers that queue behind one another share one commit, each in a savepoint of its own
    (on SQLite every writer: SQLiteWriters.write; on PostgreSQL the writers of one channel:
    Writers/ChannelBatch.swift): a request that fails in such a group must leave the others
    of its group stored and acknowledged, and leave nothing of its own."""
    members = [server.user("grp") for _ in range(4)]
    outsider = server.user("grp-out")
    sessions = {u: server.session(u) for u in members + [outsider]}
    url = server.channel(members, name="group-commit")["channel_url"]
    rounds = 60
    answers = {}  # thread name -> [(kind, text, status)]

    def good(u):
        def run(gate):
            client = Client(server, sessions[u])
            gate.wait()
            out = answers.setdefault(f"good-{u}", [])
            for i in range(rounds):
                text = f"{u}#{i:03d}"
                r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                   json={"message_type": "MESG", "message": text, "req_id": f"{u}-{i}"})
                out.append(("good", text, r.status_code))
        return run

    def bad(kind):
        def run(gate):
            client = Client(server, sessions[outsider] if kind == "outsider" else sessions[members[0]])
            admin = Client(server)
            gate.wait()
            out = answers.setdefault(f"bad-{kind}", [])
            for i in range(rounds):
                text = f"bad-{kind}#{i:03d}"
                if kind == "outsider":  # not a member: refused
                    r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                       json={"message_type": "MESG", "message": text})
                elif kind == "parent":  # a reply to a message that does not exist
                    r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                       json={"message_type": "MESG", "message": text, "parent_message_id": 10 ** 15 + i})
                else:  # the administrator removes someone who is not a member
                    r = admin.request("PUT", f"/v3/group_channels/{url}/leave", json={"user_ids": [outsider]})
                out.append(("bad", text, r.status_code))
        return run

    targets = [(f"good-{u}", good(u)) for u in members] + [(f"bad-{k}", bad(k)) for k in ("outsider", "parent", "leave")]
    batched_before = metric(server, "parley_writes_batched_total") if databases.backend() != "sqlite" else 0
    run_threads(targets, timeout=180, barrier=True)
    if databases.backend() != "sqlite":
        # Seven writers of one channel at once: most find others queued behind them.
        batched = metric(server, "parley_writes_batched_total") - batched_before
        assert batched > rounds, f"only {batched} of {len(members) * rounds} sends joined a batch"

    for name, got in answers.items():
        statuses = {status for _, _, status in got}
        if name.startswith("good"):
            assert statuses == {200}, f"{name}: answers {sorted(statuses)}"
        else:
            assert 200 not in statuses and all(400 <= s < 500 for s in statuses), f"{name}: answers {sorted(statuses)}"
    admin = Client(server)
    listed = all_messages(admin, url)
    texts = [m["message"] for m in listed]
    assert not [t for t in texts if t.startswith("bad-")], "a refused request left a message"
    for u in members:
        mine = [m["message"] for m in listed if m["user"]["user_id"] == u]
        assert mine == [f"{u}#{i:03d}" for i in range(rounds)], f"{u}: {len(mine)} of {rounds} stored, or out of order"
    assert len(listed) == len(members) * rounds
    # Each member's unread count is what the messages say: sending marks the channel read up
    # to one's own message, so the others' messages after a member's last one are unread.
    for u in members:
        read_up_to = max(m["created_at"] for m in listed if m["user"]["user_id"] == u)
        expected = sum(1 for m in listed if m["user"]["user_id"] != u and m["created_at"] > read_up_to)
        unread = server.ok("GET", f"/v3/users/{u}/unread_message_count")["unread_count"]
        assert unread == expected, f"{u}: unread {unread}, the messages say {expected}"
    assert outsider not in [m["user_id"] for m in member_list(admin, url)]


def test_same_req_id_raced_stores_one_message(server):
    sender, other = server.user("rq"), server.user("rq")
    url = server.channel([sender, other])["channel_url"]
    session = server.session(sender)
    stream = EventCollector(server, other, session_key=server.session(other))
    rounds = [f"race-{i}" for i in range(20)]
    answers = {req_id: [None] * 4 for req_id in rounds}
    gates = [threading.Barrier(4) for _ in rounds]

    def racer(k):
        def run():
            client = Client(server, session)
            for req_id, gate in zip(rounds, gates):
                gate.wait(timeout=20)
                r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                   json={"message_type": "MESG", "message": f"{req_id} from {k}", "req_id": req_id})
                answers[req_id][k] = (r.status_code, r.json())
        return run

    try:
        assert stream.wait_for(lambda fs: len(fs) >= 1, 10)
        run_threads([(f"racer-{k}", racer(k)) for k in range(4)], timeout=50)
        stored = all_messages(Client(server), url)
        by_req = {}
        for m in stored:
            by_req.setdefault(m["req_id"], []).append(m)
        for req_id in rounds:
            statuses = [a[0] for a in answers[req_id]]
            assert statuses == [200] * 4, f"{req_id}: answers {statuses}: {[a[1] for a in answers[req_id]]}"
            bodies = [a[1] for a in answers[req_id]]
            assert len({b["message_id"] for b in bodies}) == 1, \
                f"{req_id}: 4 concurrent sends answered different messages {[b['message_id'] for b in bodies]}"
            assert all(b == bodies[0] for b in bodies), f"{req_id}: the 4 answers differ: {bodies}"
            rows = by_req.get(req_id, [])
            assert [m["message_id"] for m in rows] == [bodies[0]["message_id"]], \
                f"{req_id}: stored {[(m['message_id'], m['message']) for m in rows]}, answered {bodies[0]['message_id']}"
            assert rows[0]["message"] == bodies[0]["message"]
        assert len(stored) == len(rounds), f"{len(stored)} messages stored for {len(rounds)} req_ids"
        # One message, one event (a repeated req_id sends none, §7.1). A sentinel bounds the wait.
        sentinel = server.send(url, sender, "sentinel")["message_id"]
        assert stream.wait_for(lambda fs: any(f["event"] == "message_received" and
                                              f["data"]["message"]["message_id"] == sentinel for f in fs), 20)
        got = [m for _, m, _, _ in stream.message_frames()]
        assert got == [m["message_id"] for m in stored] + [sentinel], \
            f"message events {got} for stored {[m['message_id'] for m in stored]} + sentinel {sentinel}"
    finally:
        stream.close()


def test_distinct_channel_create_raced_yields_one_channel(server):
    distinct_creates_race_to_one_channel(server)


@pytest.mark.postgres_only
def test_a_database_defaulting_to_repeatable_read_changes_no_writers_reads(tmp_path):
    """A writer's named lock goes out with the read it guards, in one round trip, and that
    read must see what was committed while it waited for the lock: its snapshot is its own
    statement's (READ COMMITTED). The server's sessions ask for that whatever the database's
    default, so the distinct-channel race still makes one channel where the default is
    REPEATABLE READ (one snapshot for the round trip, taken before the lock)."""
    database = databases.new_database(tmp_path, "db.sqlite")
    name = urlsplit(database).path.lstrip("/")
    databases.psql(database, f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'")
    assert databases.psql(database, "SHOW default_transaction_isolation").strip() == "repeatable read"
    server = Server(database)
    try:
        distinct_creates_race_to_one_channel(server)
    finally:
        server.stop()
        databases.drop_database(database)


def distinct_creates_race_to_one_channel(server):
    admin = Client(server)
    for round_no in range(10):
        members = sorted(server.user(f"d{round_no}") for _ in range(3))
        answers = [None] * 4

        def creator(k):
            def run(gate):
                client = Client(server)
                gate.wait()
                r = client.request("POST", "/v3/group_channels",
                                   json={"user_ids": members[k % 3:] + members[:k % 3], "is_distinct": True,
                                         "custom_type": "dm"})
                answers[k] = (r.status_code, r.json())
            return run

        run_threads([(f"create-{k}", creator(k)) for k in range(4)], timeout=30, barrier=True)
        assert [a[0] for a in answers] == [200] * 4, answers
        urls = {a[1]["channel_url"] for a in answers}
        assert len(urls) == 1, f"round {round_no}: 4 concurrent distinct creates made {len(urls)} channels: {urls}"
        created = [a[1]["is_created"] for a in answers]
        assert created.count(True) == 1, f"round {round_no}: is_created of the 4 answers: {created}"
        listed = admin.ok("GET", "/v3/group_channels", params={"members_exactly_in": ",".join(members),
                                                              "distinct_mode": "distinct", "limit": 100})["channels"]
        assert [c["channel_url"] for c in listed] == list(urls), \
            f"round {round_no}: the list shows {[c['channel_url'] for c in listed]} for one distinct member set"
        for u in members:
            mine = admin.ok("GET", f"/v3/users/{u}/my_group_channels",
                            params={"show_empty": "true", "distinct_mode": "distinct", "limit": 100})["channels"]
            assert [c["channel_url"] for c in mine] == list(urls), f"round {round_no}: {u} has {mine}"


def test_join_leave_invite_races_keep_counts_and_lists_consistent(server):
    owner = server.user("own")
    modeled = [server.user("mm") for _ in range(10)]
    contested = [server.user("mc") for _ in range(2)]
    admin = Client(server)
    for u in modeled[::2]:  # half of them keep invitations pending until they accept or decline
        admin.ok("PUT", f"/v3/users/{u}/channel_invitation_preference", json={"auto_accept": False})
    public = server.channel([owner], is_public=True, name="open")["channel_url"]
    private = server.channel([owner], name="closed")["channel_url"]
    auto_accept = {u: u not in modeled[::2] for u in modeled}
    sessions = {u: server.session(u) for u in modeled + contested}
    expected = {}  # (user, channel) -> "joined" / "invited" / "none" after the user's own sequence

    def modeled_user(k, u):
        def run(gate):
            rng = random.Random(1000 + k)
            me, adm = Client(server, sessions[u]), Client(server)
            state = {public: "none", private: "none"}
            gate.wait()
            for _ in range(16):
                url = rng.choice([public, private])
                if state[url] == "none":
                    if url == public and rng.random() < 0.5:
                        me.ok("PUT", f"/v3/group_channels/{url}/join", json={})
                        state[url] = "joined"
                    else:
                        adm.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [u]})
                        state[url] = "joined" if auto_accept[u] else "invited"
                elif state[url] == "invited":
                    if rng.random() < 0.5:
                        me.ok("PUT", f"/v3/group_channels/{url}/accept", json={})
                        state[url] = "joined"
                    else:
                        me.ok("PUT", f"/v3/group_channels/{url}/decline", json={})
                        state[url] = "none"
                else:
                    me.ok("PUT", f"/v3/group_channels/{url}/leave", json={})
                    state[url] = "none"
            for url, s in state.items():
                expected[(u, url)] = s
        return run

    def contester(k, u):
        def run(gate):
            rng = random.Random(2000 + k)
            me, adm = Client(server, sessions[u]), Client(server)
            gate.wait()
            for _ in range(20):
                op = rng.choice(["join", "leave-public", "invite", "leave-private"])
                if op == "join":
                    r = me.request("PUT", f"/v3/group_channels/{public}/join", json={})
                elif op == "invite":
                    r = adm.request("POST", f"/v3/group_channels/{private}/invite", json={"user_ids": [u]})
                else:
                    r = me.request("PUT", f"/v3/group_channels/{public if op == 'leave-public' else private}/leave", json={})
                # Leaving a channel one is not in may be refused; nothing else may fail.
                assert r.status_code == 200 or (r.status_code in (400, 403, 404) and r.json()["error"] is True), \
                    f"{op} by {u}: {r.status_code} {r.text[:300]}"
        return run

    targets = [(f"user-{k}", modeled_user(k, u)) for k, u in enumerate(modeled)]
    targets += [(f"contest-{k}", contester(k, contested[k % 2])) for k in range(6)]
    run_threads(targets, timeout=50, barrier=True)

    everyone = [owner] + modeled + contested
    members = {}
    for url in (public, private):
        listed = member_list(admin, url)
        states = {m["user_id"]: m["state"] for m in listed}
        assert len(states) == len(listed), f"{url}: a user twice in the member list"
        members[url] = states
        channel = admin.ok("GET", f"/v3/group_channels/{url}", params={"show_member": "true"})
        joined = sum(1 for s in states.values() if s == "joined")
        assert (channel["member_count"], channel["joined_member_count"]) == (len(states), joined), \
            f"{url}: member_count {channel['member_count']}, joined_member_count {channel['joined_member_count']}; " \
            f"the member list has {len(states)} members, {joined} joined"
        assert {m["user_id"]: m["state"] for m in channel["members"]} == states, \
            f"{url}: the channel's members differ from its member list"
        assert states.get(owner) == "joined"
        for u in modeled:
            assert states.get(u, "none") == expected[(u, url)], \
                f"{url}: {u} is {states.get(u, 'none')}, its own requests left it {expected[(u, url)]}"
    for u in everyone:
        mine = admin.ok("GET", f"/v3/users/{u}/my_group_channels",
                        params={"show_empty": "true", "hidden_mode": "all", "limit": 100,
                                "channel_urls": f"{public},{private}"})["channels"]
        seen = {c["channel_url"]: c["member_state"] for c in mine}
        should = {url: members[url][u] for url in (public, private) if u in members[url]}
        assert seen == should, f"{u}: my_group_channels shows {seen}, the channels' member lists say {should}"


def test_read_your_writes_across_clients(server):
    users = [server.user("ryw") for _ in range(4)]
    url = server.channel(users)["channel_url"]
    sessions = {u: server.session(u) for u in users}

    def pair(k):
        def run(gate):
            writer = Client(server, sessions[users[k]])
            reader = Client(server, sessions[users[(k + 1) % 4]])
            gate.wait()
            for i in range(40):
                sent = writer.ok("POST", f"/v3/group_channels/{url}/messages",
                                 json={"message_type": "MESG", "message": f"ryw {k}/{i}"})
                got = reader.request("GET", f"/v3/group_channels/{url}/messages/{sent['message_id']}")
                assert got.status_code == 200 and got.json()["message"] == sent["message"], \
                    f"right after its 200, message {sent['message_id']} reads as {got.status_code} {got.text[:200]}"
                page = reader.ok("GET", f"/v3/group_channels/{url}/messages",
                                 params={"message_ts": sent["created_at"], "message_id": sent["message_id"],
                                         "prev_limit": 1, "next_limit": 0, "include": "true"})
                assert sent["message_id"] in [m["message_id"] for m in page["messages"]], \
                    f"right after its 200, message {sent['message_id']} is not in a listing anchored on it: " \
                    f"{[m['message_id'] for m in page['messages']]}"
        return run

    run_threads([(f"pair-{k}", pair(k)) for k in range(4)], timeout=50, barrier=True)


def test_streams_resumed_mid_burst_get_every_event_once_in_order(server):
    """A stream that opens while writers commit replays up to where the live events begin:
    reconnecting over and over with Last-Event-ID during a burst yields, joined together,
    exactly the events of one stream that stayed open (§9), and stream opens do not stop
    the senders (they run on the event queue, not under the writers' lock)."""
    senders = [server.user("resume") for _ in range(3)]
    watcher = server.user("resume-watch")
    everyone = senders + [watcher]
    sessions = {u: server.session(u) for u in everyone}
    channels = [server.channel(everyone, name=f"resume-{i}")["channel_url"] for i in range(2)]
    steady = EventCollector(server, watcher, session_key=sessions[watcher])
    assert steady.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    # Where the steady stream starts: the reconnecting one starts there too (a first
    # connection without Last-Event-ID would miss what was delivered before it opened).
    start_id = next(f["data"]["last_event_id"] for f in steady.snapshot() if f["event"] == "connected")
    sends = 60
    burst_done = Countdown(3)
    segments = []  # the frames of each reconnected stream, in order
    sent_ids = []
    lock = threading.Lock()

    def sender(k):
        def run(gate):
            client = Client(server, sessions[senders[k]])
            gate.wait()
            try:
                for i in range(sends):
                    body = client.ok("POST", f"/v3/group_channels/{channels[i % 2]}/messages",
                                     json={"message_type": "MESG", "message": f"{k}/{i}"})
                    with lock:
                        sent_ids.append(body["message_id"])
            finally:
                burst_done.done()
        return run

    def reconnecting(gate):
        gate.wait()
        last = start_id
        while True:
            finished = burst_done.is_set()
            stream = EventCollector(server, watcher, session_key=sessions[watcher], last_event_id=last)
            # Read a few events (or whatever is left), then drop the connection.
            enough = random.randint(1, 12)
            stream.wait_for(lambda fs: count_event("message_received")(fs) >= enough, 1.5)
            stream.close()
            stream.thread.join(5)
            frames = stream.snapshot()
            segments.append(frames)
            ids = [f["id"] for f in frames if f["id"] is not None]
            if ids:
                last = ids[-1]
            if finished and not ids:
                return

    run_threads([(f"send-{k}", sender(k)) for k in range(3)] + [("reconnecting", reconnecting)],
                timeout=180, barrier=True)
    try:
        assert len(sent_ids) == 3 * sends
        assert steady.wait_for(lambda fs: count_event("message_received")(fs) >= 3 * sends, 30), \
            f"the steady stream got {count_event('message_received')(steady.snapshot())} of {3 * sends} messages"
        reference = [(f["id"], f["event"]) for f in steady.snapshot() if f["id"] is not None]
        joined = [(f["id"], f["event"]) for seg in segments for f in seg if f["id"] is not None]
        resyncs = [f for seg in segments for f in seg if f["event"] == "resync"]
        assert not resyncs, f"a resume inside the retention asked for a resync: {resyncs[:2]}"
        assert len(segments) > 3, f"only {len(segments)} connections: the test did not reconnect mid-burst"
        assert joined == reference, \
            "the resumed streams, joined, differ from one open stream: " + \
            next((f"at {i}: {a} vs {b}" for i, (a, b) in enumerate(zip(joined, reference)) if a != b),
                 f"lengths {len(joined)} vs {len(reference)}")
        received = [f["data"]["message"]["message_id"] for seg in segments for f in seg if f["event"] == "message_received"]
        assert sorted(received) == sorted(sent_ids), \
            f"resumed streams got {len(received)} messages of {len(sent_ids)}; " \
            f"missing {describe_ids(set(sent_ids) - set(received))}"
    finally:
        steady.close()


def test_stream_opened_while_its_user_is_deactivated_does_not_stay_open(server):
    """A stream whose open races its user's deactivation either is refused, or opens and is
    ended with an error frame: in no order does it stay open and keep receiving (§9). The
    stream's credentials are checked again on the event queue, after every delivered commit."""
    import requests

    rounds = 12
    for r in range(rounds):
        user, other = server.user("deact"), server.user("deact-peer")
        key = server.session(user)
        url = server.channel([user, other])["channel_url"]
        outcome = {}

        def opener(gate):
            gate.wait()
            try:
                resp = requests.get(server.url(f"/v3/users/{user}/events"), headers={"Session-Key": key},
                                    stream=True, timeout=(5, 5))
            except requests.RequestException as e:
                outcome["error"] = repr(e)
                return
            outcome["status"] = resp.status_code
            outcome["resp"] = resp

        def deactivator(gate):
            gate.wait()
            Client(server).ok("PUT", f"/v3/users/{user}", json={"is_active": False})

        run_threads([("open", opener), ("deactivate", deactivator)], timeout=30, barrier=True)
        assert "error" not in outcome, outcome.get("error")
        if outcome["status"] != 200:
            assert outcome["status"] == 401, f"round {r}: stream open answered {outcome['status']}"
            continue
        # Opened: whatever the order, the stream must end with the deactivation's error frame
        # and carry no message sent after it.
        Client(server).ok("POST", f"/v3/group_channels/{url}/messages",
                          json={"message_type": "MESG", "message": "after deactivation", "user_id": other})
        text = ""
        try:
            for chunk in outcome["resp"].iter_content(chunk_size=None, decode_unicode=True):
                text += chunk
                if "event: error" in text:
                    break
        except requests.RequestException:
            pass
        finally:
            outcome["resp"].close()
        assert "event: error" in text and "400301" in text, \
            f"round {r}: the stream of a deactivated user stayed open; it got {text[-400:]!r}"
        assert "after deactivation" not in text, f"round {r}: a deactivated user's stream got a later message"


HOLD_MS = 2000


def test_a_writer_held_open_keeps_event_order(server):
    """A send into channel X holds its transaction open for HOLD_MS after taking its message id
    and event id (test hook). Meanwhile a send into channel Y is made, with later ids: on SQLite
    writers take turns, so it commits after X; on PostgreSQL writers of different channels run
    side by side, so it is answered while X is held. Either way a stream receives X's message
    before Y's, each once; a changelog token taken while X is held does not pass X; a resume
    from X's event id gives exactly Y's."""
    import time
    sender, watcher = server.user("held"), server.user("held")
    x = server.channel([sender, watcher], name="held-x")["channel_url"]
    y = server.channel([sender, watcher], name="held-y")["channel_url"]
    watcher_key = server.session(watcher)
    stream = EventCollector(server, watcher, session_key=watcher_key)
    assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10)
    watcher_client = Client(server, watcher_key)
    token_before = watcher_client.ok("GET", f"/v3/users/{watcher}/my_group_channels/changelogs",
                                     params={"change_ts": now_ts(watcher_client)})["next"]
    results = {}

    def held_send():
        started = time.monotonic()
        r = server.request("POST", f"/v3/group_channels/{x}/messages", headers={"Parley-Test-Hold-Ms": str(HOLD_MS)},
                           json={"message_type": "MESG", "user_id": sender, "message": "held in x"})
        results["x"] = (r.status_code, r.json(), time.monotonic() - started, time.monotonic())

    thread = threading.Thread(target=held_send)
    thread.start()
    wait_for_a_held_request(server, margin=0.3)  # X has taken its numbers and is holding
    started = time.monotonic()
    y_message = server.send(y, sender, "free in y")
    y_took = time.monotonic() - started
    y_done = time.monotonic()
    # A changelog now: its token must not pass X's numbers, whatever it lists.
    mid = watcher_client.ok("GET", f"/v3/users/{watcher}/my_group_channels/changelogs", params={"token": token_before})
    thread.join(15)
    status, x_message, x_took, x_done = results["x"]
    assert status == 200, x_message
    assert x_message["message_id"] < y_message["message_id"], (x_message["message_id"], y_message["message_id"])
    if databases.backend() == "sqlite":
        assert y_done >= x_done - 0.05, f"a second writer did not wait for the first (it took {y_took:.2f} s)"
    else:
        assert y_done < x_done - HOLD_MS / 2000, f"a writer of another channel waited for the held one ({y_took:.2f} s)"
    # The stream: X's message first, then Y's, each once, in event id order.
    assert stream.wait_for(lambda fs: sum(1 for f in fs if f["event"] == "message_received") >= 2, 10)
    time.sleep(0.3)
    frames = stream.message_frames()
    assert [f[3] for f in frames] == ["held in x", "free in y"], frames
    assert frames[0][0] < frames[1][0], frames
    # The changelog chain from the token taken meanwhile lists X's change.
    after = watcher_client.ok("GET", f"/v3/users/{watcher}/my_group_channels/changelogs", params={"token": mid["next"]})
    listed = {c["channel_url"]: c.get("last_message", {}).get("message_id") for c in mid["updated"] + after["updated"]}
    assert listed.get(x) == x_message["message_id"], (mid, after)
    assert listed.get(y) == y_message["message_id"], (mid, after)
    # A resume from X's event gives exactly Y's.
    resumed = EventCollector(server, watcher, session_key=watcher_key, last_event_id=frames[0][0])
    assert resumed.wait_for(lambda fs: any(f["event"] == "message_received" for f in fs), 10)
    time.sleep(0.3)
    assert [f[3] for f in resumed.message_frames()] == ["free in y"], resumed.message_frames()
    resumed.close()
    stream.close()


def test_user_creates_and_updates_raced_lose_nothing(server):
    """Writers that change one user at once (PostgreSQL runs them side by side): four creates
    of one user id make one user (the others are told it exists); five updates of different
    fields of one user all stay (none overwrites another with what it read before)."""
    for round_no in range(5):
        uid = f"race-user-{round_no}-{random.randrange(1 << 30)}"
        answers = [None] * 4

        def creator(k):
            def run(gate):
                client = Client(server)
                gate.wait()
                r = client.request("POST", "/v3/users", json={"user_id": uid, "nickname": f"n{k}"})
                answers[k] = (r.status_code, r.json())
            return run

        run_threads([(f"create-{k}", creator(k)) for k in range(4)], timeout=30, barrier=True)
        statuses = sorted(a[0] for a in answers)
        assert statuses == [200, 400, 400, 400], answers
        winner = next(a[1] for a in answers if a[0] == 200)
        assert Client(server).ok("GET", f"/v3/users/{uid}")["nickname"] == winner["nickname"]

        # Each writer changes one field and writes the whole user back: one that overwrote
        # another's field with what it had read before would lose that change.
        changes = [("PUT", f"/v3/users/{uid}", {"nickname": "renamed"}),
                   ("PUT", f"/v3/users/{uid}", {"profile_url": "https://example.org/p.png"}),
                   ("PUT", f"/v3/users/{uid}", {"metadata": {"k": "v"}}),
                   ("PUT", f"/v3/users/{uid}", {"preferred_languages": ["de"]}),
                   ("PUT", f"/v3/users/{uid}/channel_invitation_preference", {"auto_accept": False})]

        def updater(k):
            def run(gate):
                client = Client(server)
                gate.wait()
                method, path, body = changes[k]
                client.ok(method, path, json=body)
            return run

        run_threads([(f"update-{k}", updater(k)) for k in range(len(changes))], timeout=30, barrier=True)
        stored = Client(server).ok("GET", f"/v3/users/{uid}")
        assert (stored["nickname"], stored["profile_url"], stored["metadata"], stored["preferred_languages"]) == \
            ("renamed", "https://example.org/p.png", {"k": "v"}, ["de"]), f"round {round_no}: {stored}"
        assert Client(server).ok("GET", f"/v3/users/{uid}/channel_invitation_preference")["auto_accept"] is False


@pytest.mark.parametrize("where", ["1", "last", "commit"])
def test_a_write_failing_in_the_database_inside_a_shared_transaction_undoes_only_itself(server, where):
    """A statement the database refuses aborts the transaction it runs in (on PostgreSQL every
    later statement fails until a rollback). A writer that fails so inside a transaction it
    shares with others (SQLite's commit group, PostgreSQL's channel batch), after its handler
    (`1`) or in its last statement, which on PostgreSQL may carry the batch's COMMIT
    (`last`, Writers/ChannelBatch.swift), is undone back to its savepoint and answers its
    error; the others stay stored and answered. A failure at the COMMIT itself (`commit`, a
    deferred check) loses the whole transaction: the writers in it answer errors. Every write
    answered 200 is stored, in order, and no other."""
    if where == "commit":
        if databases.backend() == "sqlite":
            pytest.skip("a check deferred to the commit is made here with PostgreSQL's psql")
        databases.psql(server.db_path, "CREATE TABLE IF NOT EXISTS parley_test_refs (id BIGINT PRIMARY KEY); "
                                       "CREATE TABLE IF NOT EXISTS parley_test_fails_at_commit (ref BIGINT "
                                       "REFERENCES parley_test_refs (id) DEFERRABLE INITIALLY DEFERRED)")
    members = [server.user("endfail") for _ in range(3)]
    sessions = {u: server.session(u) for u in members}
    url = server.channel(members, name=f"db-failure-{where}")["channel_url"]
    rounds = 40
    answers: dict[str, list[tuple[str, int]]] = {}

    def good(u):
        def run(gate):
            client = Client(server, sessions[u])
            gate.wait()
            for i in range(rounds):
                text = f"{u}#{i:03d}"
                r = client.request("POST", f"/v3/group_channels/{url}/messages",
                                   json={"message_type": "MESG", "message": text, "req_id": f"{u}-{i}"})
                answers.setdefault(u, []).append((text, r.status_code))
        return run

    def failing(gate):
        admin = Client(server)
        gate.wait()
        for i in range(rounds):
            r = admin.request("POST", f"/v3/group_channels/{url}/messages", headers={"Parley-Test-Fail-Statement": where},
                              json={"message_type": "MESG", "user_id": members[0], "message": f"failed#{i:03d}"})
            answers.setdefault("failing", []).append((f"failed#{i:03d}", r.status_code))

    run_threads([(u, good(u)) for u in members] + [("failing", failing)], timeout=180, barrier=True)
    assert {status for _, status in answers["failing"]} == {500}, answers["failing"]
    listed = all_messages(Client(server), url)
    assert not [m for m in listed if m["message"].startswith("failed#")], "a write that failed left its message"
    lost = 0
    for u in members:
        mine = [m["message"] for m in listed if m["user"]["user_id"] == u]
        answered = [text for text, status in answers[u] if status == 200]
        assert mine == answered, f"{u}: {len(answered)} answered 200, {len(mine)} stored, or out of order"
        assert {status for _, status in answers[u]} <= {200, 500}, answers[u]
        lost += rounds - len(answered)
    if where != "commit":
        assert lost == 0, f"{lost} writes failed beside a failing one"
    elif databases.backend() != "sqlite":
        # Writers that shared a transaction with a failing one: each lost it with it.
        assert lost > 0, "no write shared a transaction with one failing at its commit"
