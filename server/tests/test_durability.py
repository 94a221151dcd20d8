"""An acknowledged send survives `kill -9` in the middle of a concurrent burst (PROTOCOL.md:
"every acknowledged write is committed before the response is sent"), idempotency by req_id
holds across the restart (§7.1), and an event stream resumed with Last-Event-ID after the
restart gets every event it had not seen, once (§9).

Only the fixtures and the Server object's methods are used (no database file), so the test
runs unchanged on every storage backend the fixtures can start."""
import threading

import pytest
import requests

from concurrency_support import Client, EventCollector, all_messages, describe_ids, run_threads

SENDERS = 4
SENDS_PER_SENDER = 1000  # far more than the kill lets through: the kill always lands mid-burst


def message_events(frames):
    return [(f["id"], f["data"]["message"]["message_id"]) for f in frames if f["event"] == "message_received"]


def last_event_id(frames):
    """The id of the last event a stream got (the `connected` frame's resume point if none)."""
    ids = [f["id"] for f in frames if f["id"] is not None]
    return max(ids) if ids else frames[0]["data"]["last_event_id"]


def check_replay(resumed, frames_before, stored, sentinel):
    """`resumed` was opened with Last-Event-ID = the last event in `frames_before` (what a
    stream got before it was cut). Before the event of `sentinel` (a message sent after the
    restart, so its event follows the whole replay) it must replay the `message_received` of
    every message in `stored` that `frames_before` lacks, once, and none of those it had."""
    last_seen = last_event_id(frames_before)
    seen = {mid for _, mid in message_events(frames_before)}
    unseen = set(stored) - seen
    got_sentinel = resumed.wait_for(lambda fs: sentinel in {mid for _, mid in message_events(fs)}, 30)
    frames = resumed.snapshot()
    assert frames and frames[0]["event"] == "connected", frames[:2]
    resyncs = [f for f in frames if f["event"] == "resync"]
    assert not resyncs, f"resume from event {last_seen} after the restart answered resync: {resyncs}"
    assert got_sentinel, f"resume from event {last_seen}: no event for message {sentinel} sent after the restart " \
                         f"(stream ended: {resumed.ended}, {len(frames)} frames)"
    events = [mid for _, mid in message_events(frames)]
    replayed = events[:events.index(sentinel)]
    again = seen & set(replayed)
    dups = {m for m in replayed if replayed.count(m) > 1}
    missing = unseen - set(replayed)
    unexpected = set(replayed) - unseen - seen
    assert not (missing or again or dups or unexpected), \
        f"resume from event {last_seen}: missing {describe_ids(missing)}, seen before the kill and replayed " \
        f"{describe_ids(again)}, replayed twice {describe_ids(dups)}, not stored {describe_ids(unexpected)}"
    event_ids = [f["id"] for f in frames if f["id"] is not None]
    assert all(a < b for a, b in zip(event_ids, event_ids[1:])) and all(e > last_seen for e in event_ids), \
        f"replayed event ids not strictly increasing after {last_seen}: {event_ids[:20]}"
    return replayed


@pytest.mark.parametrize("kill_after", [30, 300, 900])
def test_kill_during_send_burst_keeps_every_acknowledged_message(fresh_server, kill_after):
    server = fresh_server()
    senders = [server.user("dur") for _ in range(SENDERS)]
    watcher = server.user("watch")
    sessions = {u: server.session(u) for u in senders + [watcher]}
    channels = [server.channel(senders + [watcher], name=f"durable-{i}")["channel_url"] for i in range(2)]

    # Two streams of the watcher: `live` reads until the server dies; `early` drops its
    # connection halfway to the kill, so that many events reach it only by resuming.
    live = EventCollector(server, watcher, session_key=sessions[watcher])
    early = EventCollector(server, watcher, session_key=sessions[watcher])
    for stream in (live, early):
        assert stream.wait_for(lambda fs: any(f["event"] == "connected" for f in fs), 10), "no connected frame"

    acked = {}  # req_id -> (sender, channel, text, message_id)
    unacked = {}  # req_id -> (sender, channel, text): no answer (the server died under it)
    lock = threading.Lock()
    enough, halfway = threading.Event(), threading.Event()

    def sender(u):
        def run(gate):
            client = Client(server, sessions[u])
            gate.wait()
            for i in range(SENDS_PER_SENDER):
                url, text, req_id = channels[i % 2], f"{u}#{i:03d}", f"{u}-r{i}"
                try:
                    r = client.request("POST", f"/v3/group_channels/{url}/messages", timeout=15,
                                       json={"message_type": "MESG", "message": text, "req_id": req_id})
                except requests.RequestException:
                    unacked[req_id] = (u, url, text)
                    return  # the server is gone
                assert r.status_code == 200, f"send {req_id} -> {r.status_code} {r.text[:300]}"
                with lock:
                    acked[req_id] = (u, url, text, r.json()["message_id"])
                    if len(acked) >= kill_after // 2:
                        halfway.set()
                    if len(acked) >= kill_after:
                        enough.set()
            raise AssertionError(f"{u} finished all its sends before the kill")
        return run

    def killer(gate):
        gate.wait()
        assert enough.wait(30), f"only {len(acked)} sends acknowledged in 30 s"
        server.proc.kill()  # SIGKILL, in the middle of the burst

    def disconnector(gate):
        gate.wait()
        assert halfway.wait(30), f"only {len(acked)} sends acknowledged in 30 s"
        early.close()

    run_threads([(f"send-{u}", sender(u)) for u in senders] + [("killer", killer), ("disconnect", disconnector)],
                timeout=50, barrier=True)
    server.proc.wait(timeout=10)
    assert len(unacked) >= 1 and len(acked) >= kill_after
    for stream in (live, early):
        stream.wait_for(lambda fs: False, 10)
        assert stream.ended, "an event stream outlived its connection"
        stream.close()
    live_frames, early_frames = live.snapshot(), early.snapshot()
    seen_live, seen_before = message_events(live_frames), message_events(early_frames)

    server.start()  # the same database
    admin = Client(server)

    def stored_messages():
        msgs = [m for url in channels for m in all_messages(admin, url)]
        texts = [m["message"] for m in msgs]
        dup = {t for t in texts if texts.count(t) > 1} if len(texts) != len(set(texts)) else set()
        assert not dup, f"messages stored twice after the restart: {sorted(dup)[:10]}"
        return {m["message_id"]: m for m in msgs}

    stored = stored_messages()
    lost = [(req_id, a) for req_id, a in acked.items()
            if a[3] not in stored or (stored[a[3]]["user"]["user_id"], stored[a[3]]["channel_url"], stored[a[3]]["message"]) != a[:3]]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost or changed by the kill, e.g. {lost[:5]}"
    phantom = [mid for _, mid in seen_live if mid not in stored]
    assert not phantom, f"events were streamed for messages that are not stored after the restart: {describe_ids(phantom)}"

    # Each stream, resumed from the last event it saw, gets the event of every stored message
    # it had not seen, once, and none it had seen; a message sent after the restart bounds
    # the replay (its event comes after it).
    resumed_live = EventCollector(server, watcher, session_key=sessions[watcher], last_event_id=last_event_id(live_frames))
    resumed = EventCollector(server, watcher, session_key=sessions[watcher], last_event_id=last_event_id(early_frames))
    try:
        restarted = server.send(channels[1], senders[1], "after the restart")["message_id"]
        check_replay(resumed_live, live_frames, stored, restarted)
        replayed = check_replay(resumed, early_frames, stored, restarted)

        # Re-sending each unanswered send with its req_id: the stored ones answer their message
        # (no new message, no event); the others are stored now, once.
        was_stored = {m["req_id"]: mid for mid, m in stored.items()}
        created = []
        for req_id, (u, url, text) in sorted(unacked.items()):
            body = Client(server, sessions[u]).ok("POST", f"/v3/group_channels/{url}/messages",
                                                  json={"message_type": "MESG", "message": text, "req_id": req_id})
            if req_id in was_stored:
                assert body["message_id"] == was_stored[req_id], \
                    f"re-sent {req_id} was stored as {was_stored[req_id]} before the kill; the re-send answered {body['message_id']}"
            else:
                created.append(body["message_id"])
        after = stored_messages()
        assert len(after) == len(stored) + 1 + len(created), \
            f"{len(after)} messages after re-sending, {len(stored)} before the restart + 1 after + {len(created)} new"
        for req_id, (u, url, text) in unacked.items():
            assert [m["message"] for m in after.values() if m["req_id"] == req_id] == [text], req_id
        sentinel = server.send(channels[0], senders[0], "sentinel")["message_id"]
        assert resumed.wait_for(lambda fs: sentinel in {mid for _, mid in message_events(fs)}, 20), "no sentinel event"
        events = [mid for _, mid in message_events(resumed.snapshot())]
        later = events[events.index(restarted) + 1:]
        assert later == created + [sentinel], \
            f"after the replay: events for {later}, expected the new messages {created} and the sentinel {sentinel}"
    finally:
        resumed.close()
        resumed_live.close()
    print(f"kill after {kill_after}: {len(acked)} acknowledged, {len(unacked)} unanswered "
          f"({len([r for r in unacked if r in was_stored])} of them stored), {len(seen_live)} events live, "
          f"{len(seen_before)} before the early disconnect, "
          f"{len(replayed)} replayed")
