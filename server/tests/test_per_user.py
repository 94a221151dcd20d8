"""What each user receives is what that user sees: events carry the channel rendered for
their recipient, changelogs list every channel that changed for the user, messages_gap
bounds are exact (created_at, message_id) pairs, and the permission rules of PROTOCOL.md."""
import copy
import json
import time

from conftest import EventReader, assert_error, metric, wait_until

FULL = {"show_member": "true", "show_metadata": "true", "show_metacounter": "true"}
# Presence fields change without events (PROTOCOL.md §4.2).
PRESENCE = ("is_online", "last_seen_at")
# Live, these events carry the channel without `members`, and `changed_members` beside it (§9.1).
MEMBERLESS = {"message_received", "message_updated", "message_deleted", "mention", "reaction_updated",
              "thread_info_updated", "read_status", "delivery_status", "typing_status"}


def member_without_presence(member):
    return {k: v for k, v in member.items() if k not in PRESENCE}


def without_presence(channel):
    c = copy.deepcopy(channel)
    for m in c.get("members", []):
        for k in PRESENCE:
            m.pop(k, None)
    return c


def full_get(server, url, session):
    return server.ok("GET", f"/v3/group_channels/{url}", session=session, params=FULL)


def assert_same_as_get(server, channel, session):
    """The channel from an event equals, field by field, what GET returns to its recipient now."""
    assert without_presence(channel) == without_presence(full_get(server, channel["channel_url"], session))


def reader(server, user, session, **kw):
    r = EventReader(server, user, session=session, **kw)
    assert r.next()["event"] == "connected"
    return r


def wait_for_delivery(server):
    """Until the hub has delivered every event written: a replay ends where delivery stands."""
    assert wait_until(lambda: metric(server, "parley_events_delivered_through_id")
                      >= metric(server, "parley_event_log_last_id"), timeout=10, step=0.02), \
        "the hub did not deliver the events written"


def channel_of(event):
    return event["json"]["channel"]


def payload(event):
    """An event's data as the server wrote it: EventReader decodes the stream as Latin-1 (no
    charset), the frame is UTF-8 (the same as event["json"] for ASCII-only data)."""
    return json.loads(event["data"].encode("latin-1").decode("utf-8"))


def apply_event(held, data):
    """The channel a client holds after the event `data`, given `held`, what it held before (a
    full render, members included, or None): a full render replaces it; a memberless one brings
    the channel without `members`, and the members it lists in `changed_members` replace theirs
    in the held member list (by user_id, in their place), the others kept; an event without
    `channel` (a later replayed event of the channel) changes nothing."""
    if "channel" not in data:
        return held
    channel = copy.deepcopy(data["channel"])
    if "changed_members" in data:
        assert "members" not in channel and held is not None and "members" in held
        changed = {m["user_id"]: m for m in data["changed_members"]}
        assert len(changed) == len(data["changed_members"])
        assert set(changed) <= {m["user_id"] for m in held["members"]}
        channel["members"] = [copy.deepcopy(changed.get(m["user_id"], m)) for m in held["members"]]
    else:
        assert "members" in channel or channel.get("member_state") == "none"
    return channel


def follow(held, events):
    """Apply events the test does not check to what the client holds (`held`: channel url ->
    channel), as a client would."""
    for e in events:
        if "data" not in e:
            continue
        data = payload(e)
        if "channel_url" in data:
            held[data["channel_url"]] = apply_event(held.get(data["channel_url"]), data)


def until(r, category, held):
    """The next `category` event of `r`, the events before it applied to `held`."""
    e, seen = r.until(category)
    follow(held, seen[:-1])
    return e


def check_event(server, event, session, held=None, changed=None):
    """Check a live event's channel against what GET returns its recipient now, field by field
    except the presence fields, and record in `held` (channel url -> channel) what the client
    holds after it. A memberless event (MEMBERLESS) carries the channel without `members` and
    lists in `changed_members` exactly the members `changed` (user ids, in order), each as GET
    shows it; applied to the member list held from earlier events they give GET's members. Any
    other event carries the full render, `members` included, and no `changed_members`.
    Returns the event's channel."""
    held = {} if held is None else held
    data = payload(event)
    c = data["channel"]
    url = c["channel_url"]
    truth = without_presence(full_get(server, url, session))
    if data["category"] in MEMBERLESS:
        assert "members" not in c
        assert without_presence(c) == {k: v for k, v in truth.items() if k != "members"}
        assert [m["user_id"] for m in data["changed_members"]] == changed
        by_id = {m["user_id"]: m for m in truth["members"]}
        assert [member_without_presence(m) for m in data["changed_members"]] == [by_id[u] for u in changed]
    else:
        assert changed is None, "only a memberless event lists changed members"
        assert "changed_members" not in data and "members" in c
        assert without_presence(c) == truth
    held[url] = apply_event(held.get(url), data)
    assert without_presence(held[url]) == truth
    return c


def test_event_channel_is_rendered_for_each_recipient(server):
    a, b = server.user(), server.user()
    sa, sb = server.session(a), server.session(b)
    url = server.channel([a, b])["channel_url"]
    ra, rb = reader(server, a, sa), reader(server, b, sb)
    # what each client holds of the channel: a full render (GET), then as its events change it
    held_a, held_b = {url: full_get(server, url, sa)}, {url: full_get(server, url, sb)}
    try:
        sent = []
        for i in range(3):
            sent.append(server.send(url, a, f"m{i}"))
            eb = until(rb, "message_received", held_b)
            ea = until(ra, "message_received", held_a)
            # sending marks the sender read: the sender's member object changed, for every recipient
            cb = check_event(server, eb, sb, held_b, changed=[a])
            ca = check_event(server, ea, sa, held_a, changed=[a])
            assert cb["unread_message_count"] == i + 1
            assert ca["unread_message_count"] == 0
            for e in (ea, eb):
                assert e["json"]["changed_members"][0]["read_ts"] == sent[-1]["created_at"]
        # the view, with the per-user fields of the recipient (the members are in what the
        # client holds, not in the message's event)
        assert cb["member_state"] == "joined" and cb["my_role"] == "" and cb["hidden_state"] == "unhidden"
        assert cb["is_hidden"] is False and cb["is_muted"] is False and cb["ts_message_offset"] == 0
        assert cb["user_last_read"] == 0 and isinstance(cb["joined_ts"], int)
        assert ca["user_last_read"] == sent[-1]["created_at"]
        assert {m["user_id"] for m in held_b[url]["members"]} == {a, b}
        assert [m["read_ts"] for m in held_b[url]["members"] if m["user_id"] == b] == [0]
        assert cb["metadata"] == {} and cb["metacounter"] == {}
        assert cb["last_message"]["message_id"] == sent[-1]["message_id"]

        # b resets their history: the next events' last_message respects b's offset only
        server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sb, json={})
        e = until(rb, "channel_changed", held_b)
        c = check_event(server, e, sb, held_b)
        assert c["ts_message_offset"] == sent[-1]["created_at"]
        assert "last_message" not in c and c["unread_message_count"] == 0
        ts = server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", session=sa, json={})["ts"]
        eb = until(rb, "read_status", held_b)
        ea = until(ra, "read_status", held_a)
        # the reader's member object, with its new read_ts, to every member
        assert "last_message" not in check_event(server, eb, sb, held_b, changed=[a])
        assert check_event(server, ea, sa, held_a, changed=[a])["last_message"]["message_id"] == sent[-1]["message_id"]
        for e in (ea, eb):
            assert e["json"]["read_ts"] == ts and e["json"]["changed_members"][0]["read_ts"] == ts
        new = server.send(url, a, "after reset")
        eb = until(rb, "message_received", held_b)
        ea = until(ra, "message_received", held_a)
        cb = check_event(server, eb, sb, held_b, changed=[a])
        check_event(server, ea, sa, held_a, changed=[a])
        assert cb["last_message"]["message_id"] == new["message_id"]
        assert cb["unread_message_count"] == 1

        # hiding shows in b's copy of the channel, not in a's
        server.ok("PUT", f"/v3/group_channels/{url}/hide", session=sb, json={})
        eb = until(rb, "channel_hidden", held_b)
        cb = check_event(server, eb, sb, held_b)
        assert cb["hidden_state"] == "hidden_allow_auto_unhide" and cb["is_hidden"] is True
        server.ok("PUT", f"/v3/group_channels/{url}/hide", session=sb,
                  json={"hide_previous_messages": True, "allow_auto_unhide": False})
        eb = until(rb, "channel_hidden", held_b)
        cb = check_event(server, eb, sb, held_b)
        assert cb["hidden_state"] == "hidden_prevent_auto_unhide"
        assert cb["ts_message_offset"] == new["created_at"] and "last_message" not in cb
        assert cb["unread_message_count"] == 0
        follow(held_a, ra.drain(0.3))
        server.send(url, a, "still hidden")
        eb = until(rb, "message_received", held_b)
        ea = until(ra, "message_received", held_a)
        assert check_event(server, eb, sb, held_b, changed=[a])["hidden_state"] == "hidden_prevent_auto_unhide"
        assert check_event(server, ea, sa, held_a, changed=[a])["hidden_state"] == "unhidden"
    finally:
        ra.close()
        rb.close()


def test_events_carry_roles_mutes_metadata_metacounters_and_invitations(server):
    a, b, c = server.user(), server.user(), server.user()
    server.ok("PUT", f"/v3/users/{c}/channel_invitation_preference", json={"auto_accept": False})
    sa, sb, sc = server.session(a), server.session(b), server.session(c)
    url = server.channel([a, b], operator_ids=[a])["channel_url"]
    ra, rb, rc = reader(server, a, sa), reader(server, b, sb), reader(server, c, sc)
    # these events change no message: each carries the full render, members included (check_event)
    try:
        server.ok("POST", f"/v3/group_channels/{url}/metadata", session=sb, json={"metadata": {"k": "v"}})
        e, _ = rb.until("metadata_created")
        assert check_event(server, e, sb)["metadata"] == {"k": "v"}
        server.ok("POST", f"/v3/group_channels/{url}/metacounter", session=sb, json={"metacounter": {"n": 1}})
        e, _ = rb.until("metacounter_created")
        assert channel_of(e)["metacounter"] == {"n": 1}
        server.ok("PUT", f"/v3/group_channels/{url}/metacounter/n", session=sb, json={"value": 2, "mode": "increase"})
        e, _ = rb.until("metacounter_updated")
        assert check_event(server, e, sb)["metacounter"] == {"n": 3}

        server.ok("POST", f"/v3/group_channels/{url}/operators", session=sa, json={"operator_ids": [b]})
        eb, _ = rb.until("operator_updated")
        cb = check_event(server, eb, sb)
        assert cb["my_role"] == "operator"
        assert [m["role"] for m in cb["members"] if m["user_id"] == b] == ["operator"]
        server.ok("DELETE", f"/v3/group_channels/{url}/operators", session=sa, params={"operator_ids": b})
        eb, _ = rb.until("operator_updated")
        cb = check_event(server, eb, sb)
        assert cb["my_role"] == ""
        assert [m["role"] for m in cb["members"] if m["user_id"] == b] == [""]

        server.ok("POST", f"/v3/group_channels/{url}/mute", session=sa, json={"user_id": b, "description": "calm"})
        eb, _ = rb.until("user_muted")
        ea, _ = ra.until("user_muted")
        cb, ca = check_event(server, eb, sb), check_event(server, ea, sa)
        assert cb["is_muted"] is True and ca["is_muted"] is False
        for ch in (ca, cb):
            assert [(m["is_muted"], m.get("muted_description")) for m in ch["members"] if m["user_id"] == b] == [(True, "calm")]
        server.ok("DELETE", f"/v3/group_channels/{url}/mute/{b}", session=sa)
        eb, _ = rb.until("user_unmuted")
        cb = check_event(server, eb, sb)
        assert cb["is_muted"] is False
        assert [m["is_muted"] for m in cb["members"] if m["user_id"] == b] == [False]

        # an invitee sees the channel: channel-level events reach them, rendered for them
        server.ok("POST", f"/v3/group_channels/{url}/invite", session=sa, json={"user_ids": [c]})
        ec, _ = rc.until("invitation_received")
        cc = check_event(server, ec, sc)
        assert cc["member_state"] == "invited" and cc["inviter"]["user_id"] == a and isinstance(cc["invited_at"], int)
        assert "joined_ts" not in cc
        assert [m["state"] for m in cc["members"] if m["user_id"] == c] == ["invited"]
        server.ok("PUT", f"/v3/group_channels/{url}", session=sa, json={"name": "renamed"})
        ec, _ = rc.until("channel_changed")
        assert check_event(server, ec, sc)["name"] == "renamed"
        # a message is not sent to the invitee, but the channel as they see it changed
        m = server.send(url, b, "hello")
        ec, seen = rc.until("channel_changed")
        assert "message_received" not in [x["event"] for x in seen]
        assert check_event(server, ec, sc)["last_message"]["message_id"] == m["message_id"]
        server.ok("PUT", f"/v3/group_channels/{url}/accept", session=sc, json={})
        ec, _ = rc.until("user_joined")
        cc = check_event(server, ec, sc)
        assert cc["member_state"] == "joined" and isinstance(cc["joined_ts"], int)
        for r, s in ((rb, sb), (ra, sa)):
            e, _ = r.until("user_joined")
            ch = check_event(server, e, s)
            assert ch["joined_member_count"] == 3 and ch["member_count"] == 3
            assert {m["user_id"]: m["state"] for m in ch["members"]} == {a: "joined", b: "joined", c: "joined"}
    finally:
        ra.close()
        rb.close()
        rc.close()


def test_changes_of_counts_reach_the_affected_user(server):
    a, b = server.user(), server.user()
    sa, sb = server.session(a), server.session(b)
    c1 = server.channel([a, b])["channel_url"]
    c2 = server.channel([a, b])["channel_url"]
    rb = reader(server, b, sb)
    # what b's client holds of its channels: a full render (GET), then as its events change it
    held = {url: full_get(server, url, sb) for url in (c1, c2)}
    try:
        server.send(c1, a, "one")
        server.send(c2, a, "two")
        follow(held, rb.drain(0.3))
        # mark_as_read_all tells b of each channel whose counts changed, with b's member object
        server.ok("PUT", f"/v3/users/{b}/mark_as_read_all", session=sb, json={})
        got = {}
        for _ in range(2):
            e = until(rb, "read_status", held)
            got[e["json"]["channel_url"]] = check_event(server, e, sb, held, changed=[b])
            assert e["json"]["user"]["user_id"] == b
            assert e["json"]["changed_members"][0]["read_ts"] == e["json"]["read_ts"] > 0
        assert set(got) == {c1, c2} and all(c["unread_message_count"] == 0 for c in got.values())

        # a deletion changes b's unread count and last_message, and no member
        m1 = server.send(c1, a, "m1")
        m2 = server.send(c1, a, "m2", mentioned_user_ids=[b])
        follow(held, rb.drain(0.3))
        server.ok("DELETE", f"/v3/group_channels/{c1}/messages/{m2['message_id']}", session=sa)
        e = until(rb, "message_deleted", held)
        c = check_event(server, e, sb, held, changed=[])
        assert c["unread_message_count"] == 1 and c["unread_mention_count"] == 0
        assert c["last_message"]["message_id"] == m1["message_id"]

        # an edit that adds a mention to an older message changes b's mention count
        server.send(c1, a, "m3")
        follow(held, rb.drain(0.3))
        server.ok("PUT", f"/v3/group_channels/{c1}/messages/{m1['message_id']}", json={"mentioned_user_ids": [b]})
        e = until(rb, "message_updated", held)
        assert check_event(server, e, sb, held, changed=[])["unread_mention_count"] == 1

        # a message hidden by b's offset: its edit does not reach b (a still hears of it)
        ra = reader(server, a, sa)
        try:
            server.ok("PUT", f"/v3/group_channels/{c1}/reset_user_history", session=sb, json={})
            check_event(server, until(rb, "channel_changed", held), sb, held)
            server.ok("PUT", f"/v3/group_channels/{c1}/messages/{m1['message_id']}", json={"message": "edited"})
            ra.until("message_updated")
            rest = rb.drain(0.5)
            assert "message_updated" not in [x["event"] for x in rest]
            follow(held, rest)
        finally:
            ra.close()

        # a's profile shows in b's channels: a change of it reaches b, with the members
        server.ok("PUT", f"/v3/users/{a}", session=sa, json={"nickname": "Ann the Second"})
        seen = {}
        for _ in range(2):
            e = until(rb, "channel_changed", held)
            seen[e["json"]["channel_url"]] = check_event(server, e, sb, held)
        assert set(seen) == {c1, c2}
        for c in seen.values():
            assert [m["nickname"] for m in c["members"] if m["user_id"] == a] == ["Ann the Second"]
    finally:
        rb.close()


def test_replay_renders_the_channel_for_the_recipient(server):
    a, b = server.user(), server.user()
    sb = server.session(b)
    url = server.channel([a, b])["channel_url"]
    rb = reader(server, b, sb)
    server.send(url, a, "first")
    first, _ = rb.until("message_received")
    rb.close()
    time.sleep(0.2)
    server.send(url, a, "second")
    server.send(url, a, "third")
    # Both come in the replay only once the hub has delivered them: a replay ends where
    # delivery stands, and an event delivered later comes live, with its channel.
    wait_for_delivery(server)
    rb = reader(server, b, sb, last_event_id=first["id"])
    try:
        first_two = [rb.until("message_received")[0] for _ in range(2)]
        replayed = first_two + [e for e in rb.drain(0.3) if e["event"] == "message_received"]
        assert [e["json"]["message"]["message"] for e in replayed] == ["second", "third"]
        # the current state, the truth the client converges to, in the channel's first
        # replayed event only (the same rendering would repeat in every later one)
        # (without members: messages change none but their sender's, listed beside it)
        first_replayed = channel_of(replayed[0])
        assert first_replayed["unread_message_count"] == 3 and first_replayed["member_state"] == "joined"
        truth = without_presence(full_get(server, url, sb))
        assert without_presence(first_replayed) == {k: v for k, v in truth.items() if k != "members"}
        assert [member_without_presence(m) for m in replayed[0]["json"]["changed_members"]] == \
            [m for m in truth["members"] if m["user_id"] == a]
        assert "channel" not in replayed[1]["json"] and replayed[1]["json"]["channel_url"] == url
    finally:
        rb.close()


def test_replay_carries_each_channel_once_and_live_receipts_their_reader(server):
    """A replay gives the first replayed event of each channel the channel as it is now and
    the channel's later events only its url. Where every replayed event of the channel changes
    no membership, that render leaves out `members` and lists the members those events changed
    (each once, rendered now); where one changes the membership, it is the full render, members
    included, whatever its category, and no event lists changed members. Live again, a read
    receipt carries the reader's member object with the new read_ts, and a message its
    sender's, beside the channel without members."""
    a, b, d = server.user(), server.user(), server.user()
    sa, sb = server.session(a), server.session(b)
    url = server.channel([a, b])["channel_url"]
    other = server.channel([a, b])["channel_url"]
    joined = server.channel([a, b])["channel_url"]
    rb = reader(server, b, sb)
    server.send(url, a, "before")
    mark, _ = rb.until("message_received")
    rb.close()
    # what the client holds at its last event: each channel as it was then
    held = {c: full_get(server, c, sb) for c in (url, other, joined)}
    time.sleep(0.2)
    server.send(url, a, "r0")
    server.send(other, a, "o0")
    server.send(joined, a, "j0")
    mine = server.send(url, b, "r1")
    server.send(url, a, "r2")
    server.ok("POST", f"/v3/group_channels/{joined}/invite", json={"user_ids": [d]})  # accepted at once: user_joined
    # Else the replay can come in two parts (PROTOCOL.md §9.1): the invitation in the second,
    # the channel rendered again there, its first part's render without members.
    wait_for_delivery(server)
    rb = reader(server, b, sb, last_event_id=mark["id"])
    try:
        _, replayed = rb.until("user_joined")
        replayed += rb.drain(0.3)
        assert [e["event"] for e in replayed] == ["message_received"] * 5 + ["user_joined"]
        assert [(e["json"]["channel_url"], e["json"]["message"]["message"]) for e in replayed[:5]] == \
            [(url, "r0"), (other, "o0"), (joined, "j0"), (url, "r1"), (url, "r2")]
        # memberless: the channel without members, the senders of its messages as changed
        for e, s, changed in ((replayed[0], url, [a, b]), (replayed[1], other, [a])):
            c = channel_of(e)
            assert c["channel_url"] == s and "members" not in c
            assert [m["user_id"] for m in e["json"]["changed_members"]] == changed
            truth = without_presence(full_get(server, s, sb))
            assert without_presence(c) == {k: v for k, v in truth.items() if k != "members"}
            by_id = {m["user_id"]: m for m in truth["members"]}
            assert [member_without_presence(m) for m in e["json"]["changed_members"]] == [by_id[u] for u in changed]
        assert channel_of(replayed[0])["unread_message_count"] == 1  # r2: sending r1 marked b read
        assert [m["read_ts"] for m in replayed[0]["json"]["changed_members"] if m["user_id"] == b] == [mine["created_at"]]
        # a membership change among them: the full render on the channel's first event
        c = channel_of(replayed[2])
        assert c["channel_url"] == joined and {m["user_id"] for m in c["members"]} == {a, b, d}
        assert "changed_members" not in replayed[2]["json"]
        assert_same_as_get(server, c, sb)
        assert all("channel" not in e["json"] for e in replayed[3:])
        assert all("changed_members" not in e["json"] for e in replayed[2:])
        # what the client holds after the replay is what GET shows, presence aside
        follow(held, replayed)
        for s in (url, other, joined):
            assert without_presence(held[s]) == without_presence(full_get(server, s, sb))

        # live: b reads the channel; the receipt carries b's member object, read_ts moved
        ts = server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", session=sb, json={})["ts"]
        e = until(rb, "read_status", held)
        assert e["json"]["user"]["user_id"] == b and e["json"]["read_ts"] == ts
        c = check_event(server, e, sb, held, changed=[b])
        assert c["unread_message_count"] == 0 and c["user_last_read"] == ts
        assert [m["read_ts"] for m in e["json"]["changed_members"]] == [ts] and ts > mine["created_at"]
        assert [m["read_ts"] for m in held[url]["members"] if m["user_id"] == b] == [ts]
        # and a message carries its sender's
        live = server.send(url, a, "live")
        e = until(rb, "message_received", held)
        c = check_event(server, e, sb, held, changed=[a])
        assert c["unread_message_count"] == 1 and c["last_message"]["message_id"] == live["message_id"]
        assert {m["user_id"]: m["read_ts"] for m in held[url]["members"]} == {a: live["created_at"], b: ts}
    finally:
        rb.close()


def test_someone_who_cannot_view_the_channel_learns_only_that(server):
    a, b = server.user(), server.user()
    sb = server.session(b)
    url = server.channel([a, b], operator_ids=[a])["channel_url"]
    server.ok("POST", f"/v3/group_channels/{url}/metadata", json={"metadata": {"secret": "x"}})
    server.send(url, a, "hello")
    rb = reader(server, b, sb)
    try:
        server.ok("POST", f"/v3/group_channels/{url}/ban", json={"user_id": b})
        e, _ = rb.until("user_banned")
        c = channel_of(e)
        assert c["member_state"] == "none"
        assert "members" not in c and "metadata" not in c and "last_message" not in c
        assert_error(server.request("GET", f"/v3/group_channels/{url}", session=sb), 403, 400108)
    finally:
        rb.close()


def drain_changelogs(server, user, start, session=None, **extra):
    updated, deleted, params = [], [], dict(start)
    while True:
        params.update(extra)
        params["limit"] = 3
        kw = {"session": session} if session else {}
        page = server.ok("GET", f"/v3/users/{user}/my_group_channels/changelogs", params=params, **kw)
        updated += page["updated"]
        deleted += page["deleted"]
        if not page["has_more"]:
            return updated, deleted, page["next"]
        params = {"token": page["next"]}


def test_channel_changelogs_list_every_change_seen_by_the_user_past_retention(fresh_server):
    server = fresh_server(["--event-retention", "3"])
    a, b = server.user(), server.user()
    sa, sb = server.session(a), server.session(b)
    chans = [server.channel([a, b], operator_ids=[a])["channel_url"] for _ in range(11)]
    for url in chans:
        server.send(url, b, "seed")
    old = server.send(chans[7], a, "old")  # unread for b, not the last message
    server.send(chans[7], a, "newer")
    rb = reader(server, b, sb)
    server.ok("PUT", f"/v3/group_channels/{chans[0]}/messages/mark_as_read", session=sb, json={})
    last, _ = rb.until("read_status")
    rb.close()
    _, _, token = drain_changelogs(server, b, {"change_ts": 0}, session=sb)

    # while b is away (longer than events are kept)
    server.send(chans[0], a, "unread for b")                                        # unread count, last_message
    server.ok("POST", f"/v3/group_channels/{chans[1]}/metadata", session=sa, json={"metadata": {"k": "v"}})
    server.ok("POST", f"/v3/group_channels/{chans[2]}/metacounter", session=sa, json={"metacounter": {"n": 5}})
    server.ok("PUT", f"/v3/group_channels/{chans[3]}/messages/mark_as_read", session=sa, json={})  # a's read receipt
    server.ok("PUT", f"/v3/group_channels/{chans[4]}/hide", json={"user_id": b})          # b's other device
    server.ok("PUT", f"/v3/group_channels/{chans[5]}/reset_user_history", json={"user_id": b})
    seed6 = server.ok("GET", f"/v3/group_channels/{chans[6]}/messages", session=sb)["messages"][-1]
    server.ok("DELETE", f"/v3/group_channels/{chans[6]}/messages/{seed6['message_id']}")     # last_message gone
    server.ok("PUT", f"/v3/group_channels/{chans[7]}/messages/{old['message_id']}",
              json={"mentioned_user_ids": [b]})                                               # b's mention count
    server.ok("POST", f"/v3/group_channels/{chans[8]}/mute", session=sa, json={"user_id": b})  # b's is_muted
    server.ok("PUT", f"/v3/group_channels/{chans[9]}/messages/mark_as_delivered", session=sa, json={})
    # chans[10] does not change

    rb = EventReader(server, b, session=sb, last_event_id=last["id"])
    try:
        rb.next()
        e = rb.next()
        assert e["event"] == "resync" and e["json"]["reason"] == "retention"
    finally:
        rb.close()
    updated, deleted, _ = drain_changelogs(server, b, {"token": token}, session=sb, **FULL)
    assert sorted(c["channel_url"] for c in updated) == sorted(chans[:10]) and deleted == []
    for c in updated:
        assert "metacounter" in c and "metadata" in c and "members" in c
        assert_same_as_get(server, c, sb)
    by_url = {c["channel_url"]: c for c in updated}
    assert by_url[chans[0]]["unread_message_count"] == 1
    assert by_url[chans[2]]["metacounter"] == {"n": 5}
    assert by_url[chans[4]]["hidden_state"] == "hidden_allow_auto_unhide"
    assert "last_message" not in by_url[chans[5]] and "last_message" not in by_url[chans[6]]
    assert by_url[chans[7]]["unread_message_count"] == 2 and by_url[chans[7]]["unread_mention_count"] == 1
    assert by_url[chans[8]]["is_muted"] is True


def test_show_metacounter_option(server):
    a = server.user()
    sa = server.session(a)
    url = server.channel([a])["channel_url"]
    server.ok("POST", f"/v3/group_channels/{url}/metacounter", json={"metacounter": {"likes": 7}})
    on = {"show_metacounter": "true"}
    assert "metacounter" not in server.ok("GET", f"/v3/group_channels/{url}", session=sa)
    assert server.ok("GET", f"/v3/group_channels/{url}", session=sa, params=on)["metacounter"] == {"likes": 7}
    mine = server.ok("GET", f"/v3/users/{a}/my_group_channels", session=sa, params={"show_empty": "true", **on})["channels"]
    assert [c["metacounter"] for c in mine if c["channel_url"] == url] == [{"likes": 7}]
    mine = server.ok("GET", f"/v3/users/{a}/my_group_channels", session=sa, params={"show_empty": "true"})["channels"]
    assert [c["channel_url"] for c in mine] == [url] and "metacounter" not in mine[0]
    listed = server.ok("GET", "/v3/group_channels", session=sa, params=on)["channels"]
    assert [c["metacounter"] for c in listed if c["channel_url"] == url] == [{"likes": 7}]
    log = server.ok("GET", f"/v3/users/{a}/my_group_channels/changelogs", session=sa, params={"change_ts": 0, **FULL})
    c = [c for c in log["updated"] if c["channel_url"] == url][0]
    assert c["metacounter"] == {"likes": 7} and c["metadata"] == {} and [m["user_id"] for m in c["members"]] == [a]
    assert_error(server.request("GET", f"/v3/group_channels/{url}", params={"show_metacounter": "maybe"}),
                 400, 400100, "show_metacounter")


def gap(server, url, session=None, **params):
    kw = {"session": session} if session else {}
    return server.ok("GET", f"/v3/group_channels/{url}/messages_gap", params=params, **kw)


def test_messages_gap_bounds_are_created_at_and_message_id_pairs(server):
    a, b = server.user(), server.user()
    sb = server.session(b)
    url = server.channel([a, b])["channel_url"]
    before = [server.send(url, a, f"b{i}", custom_type="even" if i % 2 == 0 else "odd") for i in range(2)]
    # ten messages sharing one millisecond (test hook: admin-only created_at)
    same = [server.send(url, a, "s0", custom_type="even")]
    t = same[0]["created_at"]
    for i in range(1, 10):
        same.append(server.send(url, a, f"s{i}", created_at=t, custom_type="even" if i % 2 == 0 else "odd"))
    assert {m["created_at"] for m in same} == {t}
    assert [m["message_id"] for m in same] == sorted(m["message_id"] for m in same)
    time.sleep(0.005)
    after = server.send(url, a, "after", custom_type="even")
    assert after["created_at"] > t
    held_prev = before + same[:4]   # the client holds b0..s3
    held_next = same[7:] + [after]  # and s7..after
    bounds = {
        "prev_start_ts": before[0]["created_at"], "prev_start_id": before[0]["message_id"],
        "prev_end_ts": t, "prev_end_id": same[3]["message_id"],
        "next_start_ts": t, "next_start_id": same[7]["message_id"],
        "next_end_ts": after["created_at"], "next_end_id": after["message_id"],
    }
    r = gap(server, url, prev_cache_count=len(held_prev), next_cache_count=len(held_next), **bounds)
    assert r["is_huge_gap"] is False and r["gap_count"] == 3
    assert [m["message"] for m in r["prev_messages"]] == ["s4", "s5", "s6"] and r["next_messages"] == []
    r = gap(server, url, prev_limit=1, next_limit=1, **bounds)
    assert [m["message"] for m in r["prev_messages"]] == ["s4"] and [m["message"] for m in r["next_messages"]] == ["s6"]
    assert r["prev_has_more"] is True and r["next_has_more"] is True
    # a count that differs refills that range too, exactly from its start / up to its end
    r = gap(server, url, prev_cache_count=len(held_prev) - 1, next_cache_count=len(held_next), **bounds)
    assert [m["message"] for m in r["prev_messages"]] == ["b0", "b1", "s0", "s1", "s2", "s3", "s4", "s5", "s6"]
    r = gap(server, url, prev_cache_count=len(held_prev), next_cache_count=len(held_next) + 1, **bounds)
    assert [m["message"] for m in r["prev_messages"]] == ["s4", "s5", "s6", "s7", "s8", "s9", "after"]
    # the filters of the message list apply to counts and region
    even = [m for m in held_prev if m["custom_type"] == "even"]
    r = gap(server, url, custom_types="even", prev_cache_count=len(even), **bounds)
    assert [m["message"] for m in r["prev_messages"]] == ["s4", "s6"]
    r = gap(server, url, custom_types="even", prev_cache_count=len(held_prev), **bounds)  # all held: mismatch
    assert [m["message"] for m in r["prev_messages"]] == ["b0", "s0", "s2", "s4", "s6"]
    # without ids a bound covers its whole millisecond (start from its first, end through its last)
    r = gap(server, url, prev_start_ts=before[0]["created_at"], prev_end_ts=t)
    assert [m["message"] for m in r["prev_messages"]] == ["after"]
    r = gap(server, url, prev_start_ts=before[0]["created_at"], prev_end_ts=t, prev_end_id=0,
            prev_cache_count=len(before) + len(same))
    assert r["gap_count"] == 1
    r = gap(server, url, prev_start_ts=t, prev_start_id=same[5]["message_id"], prev_end_ts=t,
            prev_end_id=same[5]["message_id"], prev_cache_count=0, next_start_ts=t, next_end_ts=t,
            next_start_id=same[8]["message_id"], next_end_id=same[8]["message_id"], next_cache_count=1)
    assert [m["message"] for m in r["prev_messages"]] == ["s5", "s6", "s7"]
    base = f"/v3/group_channels/{url}/messages_gap"
    assert_error(server.request("GET", base, params={"prev_start_ts": t, "prev_end_ts": t, "next_start_ts": t, "next_end_ts": t}),
                 400, 400100, "next_start_ts")
    assert_error(server.request("GET", base, params={"prev_start_ts": t, "prev_start_id": same[5]["message_id"],
                                                     "prev_end_ts": t, "prev_end_id": same[4]["message_id"]}),
                 400, 400100, "prev_end_ts")
    assert_error(server.request("GET", base, params={"prev_start_ts": t, "prev_end_ts": t, "prev_end_id": -1}),
                 400, 400100, "prev_end_id")
    # the reader's history offset hides messages from counts and region
    server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", session=sb, json={})
    time.sleep(0.005)  # a message in the offset's millisecond would be hidden too
    later = server.send(url, a, "later")
    r = gap(server, url, session=sb, prev_cache_count=0, **{k: v for k, v in bounds.items() if k.startswith("prev")})
    assert [m["message"] for m in r["prev_messages"]] == ["later"] and r["gap_count"] == 1
    assert later["created_at"] > after["created_at"]


def test_created_at_hook_is_admin_only_and_bounded(server):
    a = server.user()
    sa = server.session(a)
    url = server.channel([a])["channel_url"]
    m = server.send(url, a, "x")
    body = {"message_type": "MESG", "message": "y", "user_id": a}
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages", json={**body, "created_at": m["created_at"] - 1}),
                 400, 400100, "created_at")
    assert_error(server.request("POST", f"/v3/group_channels/{url}/messages",
                                json={**body, "created_at": int(time.time() * 1000) + 60_000}), 400, 400100, "created_at")
    # a session user's created_at is ignored: the server's clock decides
    early = server.ok("POST", f"/v3/group_channels/{url}/messages", session=sa,
                      json={"message_type": "MESG", "message": "z", "created_at": 1})
    assert early["created_at"] >= m["created_at"]


def test_ban_and_mute_lists_are_for_operators(server):
    op, m1, m2, outsider = server.user(), server.user(), server.user(), server.user()
    url = server.channel([op, m1, m2], operator_ids=[op])["channel_url"]
    so, s1 = server.session(op), server.session(m1)
    server.ok("POST", f"/v3/group_channels/{url}/mute", session=so, json={"user_id": m2})
    server.ok("POST", f"/v3/group_channels/{url}/ban", session=so, json={"user_id": outsider})
    for path, key, who in [("ban", "banned_list", outsider), ("mute", "muted_list", m2)]:
        body = assert_error(server.request("GET", f"/v3/group_channels/{url}/{path}", session=s1), 403, 400108)
        assert "operator" in body["message"]
        assert [x["user"]["user_id"] for x in server.ok("GET", f"/v3/group_channels/{url}/{path}", session=so)[key]] == [who]
        assert [x["user"]["user_id"] for x in server.ok("GET", f"/v3/group_channels/{url}/{path}")[key]] == [who]
    # an operator who left is no longer one
    server.ok("PUT", f"/v3/group_channels/{url}/leave", session=so, json={})
    assert_error(server.request("GET", f"/v3/group_channels/{url}/ban", session=so), 403, 400108)


def test_only_the_sender_copies_a_message(server):
    a, b = server.user(), server.user()
    sa, sb = server.session(a), server.session(b)
    src = server.channel([a, b])["channel_url"]
    dest = server.channel([a, b])["channel_url"]
    m = server.send(src, a, "mine")
    path = f"/v3/group_channels/{src}/messages/{m['message_id']}/copy"
    body = assert_error(server.request("POST", path, session=sb, json={"dest_channel_url": dest}), 403, 400108)
    assert "sender" in body["message"]
    copied = server.ok("POST", path, session=sa, json={"dest_channel_url": dest})
    assert copied["user"]["user_id"] == a and copied["channel_url"] == dest
    by_admin = server.ok("POST", path, json={"dest_channel_url": dest, "user_id": b})
    assert by_admin["user"]["user_id"] == b


def test_users_can_list_users(server):
    tag = f"lister{time.time_ns() % 10**9}"
    made = [server.user(prefix=tag, nickname=f"{tag}-{i}", discovery_keys=[f"k{i}"]) for i in range(5)]
    ids = sorted(made)
    me = made[0]
    s = server.session(me)
    got, params = [], {"user_ids": ",".join(ids), "limit": 2}
    for _ in range(5):
        page = server.ok("GET", "/v3/users", session=s, params=params)
        got += page["users"]
        if page["next"] == "":
            break
        params = {"user_ids": ",".join(ids), "limit": 2, "token": page["next"]}
    assert [u["user_id"] for u in got] == ids
    # contact keys for finding friends are private: only the user themself (and admins) see them
    assert [u["discovery_keys"] for u in got if u["user_id"] == me] == [["k0"]]
    assert all("discovery_keys" not in u for u in got if u["user_id"] != me)
    assert "discovery_keys" not in server.ok("GET", f"/v3/users/{made[1]}", session=s)
    assert server.ok("GET", f"/v3/users/{made[1]}")["discovery_keys"] == ["k1"]
    assert [u["user_id"] for u in server.ok("GET", "/v3/users", session=s, params={"nickname": f"{tag}-3"})["users"]] == [made[3]]
    assert [u["user_id"] for u in server.ok("GET", "/v3/users", session=s, params={"nickname_startswith": tag, "limit": 100})["users"]] == ids
    assert_error(server.request("POST", "/v3/users", session=s, json={"user_id": f"{tag}-x", "nickname": "x"}), 403, 400108)


def test_event_channel_of_many_members_with_strings_to_escape(server):
    """Frames are spliced from parts rendered once per event (members, last message) and per
    recipient (their fields): each recipient still gets what GET returns them, with every
    string intact through JSON escaping, and the members in the default order — in full in an
    event that carries them, and as the changed members of a message's event."""
    nicks = ['q"uote', "back\\slash", "ctl\x01\t\n\r", '"\u0301', "é", "e\u0301", "😀", "", "same", "same"]
    users = [server.user(nickname=n, metadata={'k"': "v\\\x1f"}) for n in nicks]
    sessions = [server.session(u) for u in users]
    url = server.channel(users, name='n"\\', data="d\n")["channel_url"]
    server.ok("POST", f"/v3/group_channels/{url}/mute", json={"user_id": users[1], "description": 'lo"ud'})
    readers = [reader(server, u, s) for u, s in zip(users, sessions)]
    # what each client holds of the channel: a full render (GET), then as its events change it
    held = [{url: full_get(server, url, s)} for s in sessions]
    try:
        text = 'te"xt \\ \x02 😀'
        for sender in (0, 2):
            server.send(url, users[sender], text)
            for u, s, r, h in zip(users, sessions, readers, held):
                e = until(r, "message_received", h)
                c = check_event(server, e, s, h, changed=[users[sender]])
                data = payload(e)
                assert data["message"]["message"] == text and c["last_message"]["message"] == text
                assert c["name"] == 'n"\\' and c["data"] == "d\n"
                [m] = data["changed_members"]
                assert m["nickname"] == nicks[sender] and m["metadata"] == {'k"': "v\\\x1f"} and m["is_online"]
                assert c["unread_message_count"] == (0 if u == users[sender] else 1 + (sender == 2 and u != users[0]))
                assert [m["nickname"] for m in h[url]["members"]] == [m["nickname"] for m in full_get(server, url, s)["members"]]

        # an event that carries the members: all of them, in the default order, strings intact
        server.ok("PUT", f"/v3/group_channels/{url}", json={"name": 'n"\\\x03 é'})
        for u, s, r, h in zip(users, sessions, readers, held):
            e = until(r, "channel_changed", h)
            check_event(server, e, s, h)
            c = payload(e)["channel"]
            assert c["name"] == 'n"\\\x03 é'
            assert [m["nickname"] for m in c["members"]] == [m["nickname"] for m in full_get(server, url, s)["members"]]
            assert sorted(m["nickname"] for m in c["members"]) == sorted(nicks)
            assert all(m["metadata"] == {'k"': "v\\\x1f"} for m in c["members"])
            assert [m["muted_description"] for m in c["members"] if m.get("is_muted")] == ['lo"ud']
            assert all(m["is_online"] for m in c["members"])
            assert c["unread_message_count"] == {users[0]: 1, users[2]: 0}.get(u, 2)
    finally:
        for r in readers:
            r.close()
