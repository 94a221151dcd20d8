"""Channel listings (queried with keyset SQL) checked against the truth: each channel's own
render for the viewer. Random channels with names and metadata in NFC and NFD, messages,
hidden and reset histories; every order with a set of filters, paged three at a time, must
equal the channels sorted and filtered here by the rules of docs/PROTOCOL.md."""
import random
import unicodedata
import uuid

from conftest import assert_error

NAMES = ["alpha", "Alpha", "beta", "\u00e9clair", "e\u0301clair", "\u00c9clair", "zeta", "", "z\u00fcrich", "zu\u0308rich",
         "\U0001F600 smile", "mid alpha", "Beta"]
RANKS = ["a", "b", "\u00e9", "e\u0301", "B", "", "zz"]


def nfc_bytes(text):
    return unicodedata.normalize("NFC", text).encode()


def name_key(text):
    """PROTOCOL.md "Sort orders": the NFC text case-folded (lowercased, NFC again), U+0001, the NFC text."""
    exact = unicodedata.normalize("NFC", text)
    return unicodedata.normalize("NFC", exact.lower()).encode() + b"\x01" + exact.encode()


def sort_key(order, c):
    url = c["channel_url"].encode()
    if order == "latest_last_message":
        last = c.get("last_message")
        if last:
            return (0, -last["created_at"], -c["created_at"], url)
        return (1, -c["created_at"], -c["created_at"], url)
    if order == "channel_name_alphabetical":
        return (name_key(c["name"]), url)
    if order == "metadata_value_alphabetical":
        value = c.get("metadata", {}).get("rank")
        return (0, nfc_bytes(value), url) if value is not None else (1, b"", url)
    return (-c["created_at"], url)


def member_ids(c):
    return {m["user_id"] for m in c["members"]}


def build(server, rng):
    viewer, others = server.user(), [server.user() for _ in range(3)]
    tag = uuid.uuid4().hex[:6]
    urls = []
    for i in range(22):
        members = [viewer] + rng.sample(others, rng.randint(0, 3)) if i % 5 else rng.sample(others, rng.randint(1, 3))
        fields = {"name": rng.choice(NAMES), "custom_type": tag + rng.choice("abc"), "is_public": i % 5 == 0 or rng.random() < 0.3}
        url = server.channel(members, **fields)["channel_url"]
        urls.append((url, members))
        if rng.random() < 0.6:
            server.ok("POST", f"/v3/group_channels/{url}/metadata", json={"metadata": {"rank": rng.choice(RANKS)}})
    for _ in range(30):
        url, members = rng.choice(urls)
        server.send(url, rng.choice(members))
    for url, members in urls:
        if viewer not in members:
            continue
        roll = rng.random()
        if roll < 0.15:
            server.ok("PUT", f"/v3/group_channels/{url}/reset_user_history", json={"user_id": viewer})
        elif roll < 0.3:
            server.ok("PUT", f"/v3/group_channels/{url}/hide", json={"user_id": viewer})
        elif roll < 0.45:
            server.ok("PUT", f"/v3/group_channels/{url}/messages/mark_as_read", json={"user_id": viewer})
    return viewer, others, tag, [u for u, _ in urls]


def truth(server, viewer, urls):
    """Each channel as the viewer's own render shows it."""
    out = {}
    for url in urls:
        out[url] = server.ok("GET", f"/v3/group_channels/{url}", params={
            "user_id": viewer, "show_member": "true", "show_metadata": "true"})
    return out


def listed(server, path, session, params):
    seen, token = [], None
    while True:
        query = dict(params, limit=3)
        if token:
            query["token"] = token
        page = server.ok("GET", path, session=session, params=query)
        seen += [c["channel_url"] for c in page["channels"]]
        token = page["next"]
        if not token:
            return seen
        assert len(seen) < 200


def expected(channels, order, keep):
    return [c["channel_url"] for c in sorted((c for c in channels if keep(c)), key=lambda c: sort_key(order, c))]


def test_listings_equal_the_channels_sorted_and_filtered(server):
    rng = random.Random(20261124)
    viewer, others, tag, urls = build(server, rng)
    renders = truth(server, viewer, urls)
    mine = [c for c in renders.values() if c["member_state"] != "none"]
    session = server.session(viewer)
    types = f"{tag}a,{tag}b,{tag}c"

    def has_last(c):
        return "last_message" in c

    # (parameters, the rule they keep) for the viewer's own list.
    mine_filters = [
        ({}, lambda c: has_last(c) and c["hidden_state"] == "unhidden"),
        ({"show_empty": "true", "hidden_mode": "all"}, lambda c: True),
        ({"show_empty": "true", "hidden_mode": "hidden_only"}, lambda c: c["hidden_state"] != "unhidden"),
        ({"show_empty": "true", "hidden_mode": "all", "unread_filter": "unread_message"},
         lambda c: c["unread_message_count"] > 0),
        ({"show_empty": "true", "hidden_mode": "all", "name_contains": "ALP"}, lambda c: "alp" in c["name"].lower()),
        ({"show_empty": "true", "hidden_mode": "all", "metadata_key": "rank", "metadata_values": "\u00e9,B"},
         lambda c: c.get("metadata", {}).get("rank") is not None
         and nfc_bytes(c["metadata"]["rank"]) in (nfc_bytes("\u00e9"), b"B")),
        ({"show_empty": "true", "hidden_mode": "all", "members_include_in": f"{others[0]},{others[1]}"},
         lambda c: bool(member_ids(c) & {others[0], others[1]})),
        ({"show_empty": "true", "hidden_mode": "all", "members_include_in": f"{others[0]},{others[1]}", "query_type": "AND"},
         lambda c: {others[0], others[1]} <= member_ids(c)),
        ({"show_empty": "true", "hidden_mode": "all", "members_exactly_in": others[2]},
         lambda c: member_ids(c) == {viewer, others[2]}),
        ({"show_empty": "true", "hidden_mode": "all", "public_mode": "private", "name": "\u00e9clair"},
         lambda c: not c["is_public"] and nfc_bytes(c["name"]) == nfc_bytes("\u00e9clair")),
    ]
    for order in ["chronological", "latest_last_message", "channel_name_alphabetical", "metadata_value_alphabetical"]:
        extra = {"order": order, "custom_types": types}
        if order == "metadata_value_alphabetical":
            extra["metadata_order_key"] = "rank"
        for params, keep in mine_filters:
            got = listed(server, f"/v3/users/{viewer}/my_group_channels", session, {**extra, **params})
            assert got == expected(mine, order, keep), (order, params)
        # The public list: public channels and the viewer's own; the viewer's member filters
        # apply to channels they are a member of only.
        visible = [c for c in renders.values() if c["is_public"] or c["member_state"] != "none"]
        got = listed(server, "/v3/group_channels", session, {**extra, "show_empty": "true"})
        assert got == expected(visible, order, lambda c: True), order
        got = listed(server, "/v3/group_channels", session, {**extra, "show_empty": "false", "public_mode": "public"})
        assert got == expected(visible, order, lambda c: c["is_public"] and has_last(c)), order
        # A token of one order is refused by another.
        page = server.ok("GET", f"/v3/users/{viewer}/my_group_channels", session=session,
                         params={**extra, "show_empty": "true", "hidden_mode": "all", "limit": 1})
        if page["next"]:
            other = "chronological" if order == "channel_name_alphabetical" else "channel_name_alphabetical"
            assert_error(server.request("GET", f"/v3/users/{viewer}/my_group_channels", session=session,
                                        params={"order": other, "token": page["next"]}), 400, 400110)


def test_channel_changelogs_and_unread_totals_equal_the_channels(server):
    rng = random.Random(1124)
    viewer, others, tag, urls = build(server, rng)
    renders = truth(server, viewer, urls)
    mine = {url: c for url, c in renders.items() if c["member_state"] != "none"}
    # Every channel of the viewer appears once in a changelog from the start, in change order.
    seen, token = [], "5b305d"  # [0]
    while True:
        page = server.ok("GET", f"/v3/users/{viewer}/my_group_channels/changelogs",
                         params={"token": token, "limit": 4, "custom_types": f"{tag}a,{tag}b,{tag}c"})
        seen += [c["channel_url"] for c in page["updated"]]
        token = page["next"]
        if not page["has_more"]:
            break
    assert sorted(seen) == sorted(mine) and len(seen) == len(set(seen))
    # Leaving shows as deleted afterwards.
    left = sorted(mine)[0]
    server.ok("PUT", f"/v3/group_channels/{left}/leave", json={"user_ids": [viewer]})
    page = server.ok("GET", f"/v3/users/{viewer}/my_group_channels/changelogs", params={"token": token})
    assert page["deleted"] == [left] and page["updated"] == []
    del mine[left]
    # Unread totals equal the sum over the channels' own renders.
    totals = server.ok("GET", f"/v3/users/{viewer}", params={"include_unread_count": "true", "custom_types": f"{tag}a,{tag}b,{tag}c"})
    counts = [server.ok("GET", f"/v3/group_channels/{url}", params={"user_id": viewer})["unread_message_count"] for url in mine]
    assert totals["unread_message_count"] == sum(counts)
    assert totals["unread_channel_count"] == sum(1 for n in counts if n > 0)
    only_a = server.ok("GET", f"/v3/users/{viewer}/unread_message_count", params={"custom_types": f"{tag}a"})["unread_count"]
    assert only_a == sum(server.ok("GET", f"/v3/group_channels/{url}", params={"user_id": viewer})["unread_message_count"]
                         for url in mine if mine[url]["custom_type"] == f"{tag}a")
