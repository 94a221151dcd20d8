"""Several file messages in one call (Client.send_file_messages, parley_client_send_file_messages):
each its own message with its own progress and outcome, delivered in order, checked against
the server's own listing; a bad item stores none; a failed file is resent alone."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import requests

import parley
from conftest import Admin, RunningServer, listing_for, server_database
from test_engine import RestartableServer, connect, connected, poll_until

TIMEOUT = 10


def write_files(directory: Path, sizes: List[int]) -> List[Path]:
    paths = []
    for index, size in enumerate(sizes):
        path = directory / f"file-{index}.bin"
        path.write_bytes(bytes((index + i) % 251 for i in range(size)))
        paths.append(path)
    return paths


def test_files_are_sent_as_their_own_messages_in_order(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user("alice")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["alice"], "channel_url": "album"})["channel_url"]
    paths = write_files(tmp_path, [70_000, 10, 250_000])
    files: List[Dict[str, Any]] = [{"file_path": str(paths[0]), "custom_type": "first"},
                                   {"url": "https://example.org/hosted.png", "file_name": "hosted.png", "file_size": 1234},
                                   {"file_path": str(paths[1]), "file_name": "renamed.bin"},
                                   {"file_path": str(paths[2]), "req_id": "my-own-req-id"}]
    progress: List[Tuple[str, int, int]] = []
    with connected(server.url, tmp_path / "cache", "alice", token) as (client, recorder):
        sent = client.send_file_messages(url, files, progress=lambda req_id, done, total: progress.append((req_id, done, total)))
        assert len(sent) == 4
        pending = [message for message, _ in sent]
        assert all(m["sending_status"] == "pending" and m["type"] == "FILE" for m in pending)
        assert pending[3]["req_id"] == "my-own-req-id" and len({m["req_id"] for m in pending}) == 4
        delivered = [future.result(TIMEOUT) for _, future in sent]
        assert [m["req_id"] for m in delivered] == [m["req_id"] for m in pending]
        truth = listing_for(server.url, token, url)
        assert [m["message_id"] for m in truth] == [m["message_id"] for m in delivered]  # in the call's order
        assert [m["file"]["name"] for m in truth] == ["file-0.bin", "hosted.png", "renamed.bin", "file-2.bin"]
        assert [m["file"]["size"] for m in truth] == [70_000, 1234, 10, 250_000]
        assert truth[0]["custom_type"] == "first"
        # The uploads' own bytes came back from the server.
        for index, path in ((0, paths[0]), (2, paths[1]), (3, paths[2])):
            assert requests.get(truth[index]["file"]["url"], headers={"Session-Key": token}, timeout=10).content == path.read_bytes()
        # Progress names each upload by its req_id, grows, and ends complete (the request's bytes:
        # the file and its form fields); the hosted file uploads nothing.
        uploads = {pending[0]["req_id"]: 70_000, pending[2]["req_id"]: 10, pending[3]["req_id"]: 250_000}
        assert {req_id for req_id, _, _ in progress} == set(uploads)
        for req_id, size in uploads.items():
            reports = [(done, total) for r, done, total in progress if r == req_id]
            assert [done for done, _ in reports] == sorted(done for done, _ in reports)
            assert reports[-1][0] == reports[-1][1] and size <= reports[-1][1] < size + 4096
        poll_until(lambda: [m["message_id"] for m in client.cached_messages(url)] == [m["message_id"] for m in truth],
                   timeout=TIMEOUT)


def test_a_bad_item_stores_none_and_the_limits_hold(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user("bob")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["bob"], "channel_url": "checked"})["channel_url"]
    good = write_files(tmp_path, [100])[0]
    with connected(server.url, tmp_path / "cache", "bob", token) as (client, recorder):
        with pytest.raises(parley.IOFailure) as unreadable:
            client.send_file_messages(url, [{"file_path": str(good)}, {"file_path": str(good)},
                                            {"file_path": str(tmp_path / "missing.bin")}])
        assert "files[2]" in unreadable.value.message
        with pytest.raises(parley.InvalidArgument) as both:
            client.send_file_messages(url, [{"file_path": str(good), "url": "https://example.org/x"}])
        assert "files[0]" in both.value.message
        with pytest.raises(parley.InvalidArgument):
            client.send_file_messages(url, [])
        with pytest.raises(parley.InvalidArgument) as too_many:
            client.send_file_messages(url, [{"file_path": str(good)}] * 21)
        assert "1 to 20" in too_many.value.message
        with pytest.raises(parley.InvalidArgument) as twice:
            client.send_file_messages(url, [{"file_path": str(good), "req_id": "same"}, {"file_path": str(good), "req_id": "same"}])
        assert "given twice" in twice.value.message
        with pytest.raises(parley.InvalidArgument) as unsupported:
            client.send_file_messages(url, [{"file_path": str(good), "push_option": "suppress"}])
        assert "push_option: the older SDK's push option is not supported" in unsupported.value.message
        # None of them stored anything, nothing was sent.
        assert client.cached_messages(url) == []
        assert listing_for(server.url, token, url) == []
        twenty = client.send_file_messages(url, [{"file_path": str(good)}] * 20)
        assert len([future.result(TIMEOUT) for _, future in twenty]) == 20
        assert len(listing_for(server.url, token, url)) == 20


def test_a_failed_file_is_resent_alone(tmp_path: Path) -> None:
    restartable = RestartableServer(server_database(tmp_path), "--upload-limit-bytes", "1000")
    restartable.start()
    try:
        admin = Admin(restartable.running())
        token = admin.user("carol")
        url = admin.call("POST", "/v3/group_channels", {"user_ids": ["carol"], "channel_url": "mixed"})["channel_url"]
        small, large, other = write_files(tmp_path, [500, 5_000, 800])
        with connected(restartable.url, tmp_path / "cache", "carol", token) as (client, recorder):
            sent = client.send_file_messages(url, [{"file_path": str(small)}, {"file_path": str(large)}, {"file_path": str(other)}])
            first = sent[0][1].result(TIMEOUT)
            with pytest.raises(parley.ServerError) as too_large:
                sent[1][1].result(TIMEOUT)
            assert too_large.value.http_status == 413
            third = sent[2][1].result(TIMEOUT)
            assert [m["message_id"] for m in listing_for(restartable.url, token, url)] == [first["message_id"], third["message_id"]]
            failed_req_id = sent[1][0]["req_id"]
            poll_until(lambda: any(m.get("req_id") == failed_req_id and m["sending_status"] == "failed"
                                   for m in client.cached_messages(url)), timeout=TIMEOUT)
            # The server accepts larger files now: the failed one goes again, alone.
            restartable.stop()
            restartable.extra = []
            restartable.start()
            recorder.wait(lambda: "reconnect_succeeded" in recorder.names(), timeout=TIMEOUT)
            resent = client.resend_message(failed_req_id).result(TIMEOUT)
            assert resent["req_id"] == failed_req_id and resent["file"]["size"] == 5_000
            truth = listing_for(restartable.url, token, url)
            assert [m["message_id"] for m in truth] == [first["message_id"], third["message_id"], resent["message_id"]]
    finally:
        restartable.stop()


def test_async_client_sends_several_files(server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    token = admin.user("dave")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["dave"], "channel_url": "async-album"})["channel_url"]
    paths = write_files(tmp_path, [300, 400])

    async def main() -> List[int]:
        async with parley.AsyncClient(server_url=server.url, cache_dir=str(tmp_path / "cache")) as client:
            await client.connect("dave", token)
            sends = await client.send_file_messages(url, [{"file_path": str(p)} for p in paths])
            assert [s.pending["sending_status"] for s in sends] == ["pending", "pending"]
            return [(await s.delivered)["message_id"] for s in sends]

    ids = asyncio.run(main())
    assert [m["message_id"] for m in listing_for(server.url, token, url)] == ids


def png_bytes(width: int, height: int) -> bytes:
    from PIL import Image
    import io
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 90)).save(out, "PNG")
    return out.getvalue()


def test_thumbnail_sizes_reach_the_answer_the_view_and_the_cache(
        server: RunningServer, admin: Admin, tmp_path: Path) -> None:
    """`thumbnail_sizes` on a file send (the guide's ThumbnailSize, up to 3): the server's message
    lists the thumbnails made of the upload, in the answer, the message view and the cache;
    the SDK's `mime_type` stands for `file_type`."""
    token = admin.user("dora")
    url = admin.call("POST", "/v3/group_channels", {"user_ids": ["dora"], "channel_url": "pictures"})["channel_url"]
    picture = tmp_path / "picture.png"
    picture.write_bytes(png_bytes(400, 200))
    boxes = [{"max_width": 100, "max_height": 100}, {"max_width": 40, "max_height": 40}]
    with connected(server.url, tmp_path / "cache", "dora", token) as (client, recorder):
        with client.message_collection(url) as view:
            view.start()[1].result(TIMEOUT)
            pending, future = view.send_file_message(file_path=str(picture), mime_type="image/png",
                                                     thumbnail_sizes=boxes)
            assert pending["file"]["type"] == "image/png"
            sent = future.result(TIMEOUT)
            assert sent["file"]["type"] == "image/png"
            made = [(t["width"], t["height"], t["real_width"], t["real_height"]) for t in sent["thumbnails"]]
            assert made == [(100, 100, 100, 50), (40, 40, 40, 20)]
            thumbnail = requests.get(sent["thumbnails"][0]["url"], headers={"Session-Key": token}, timeout=10)
            assert thumbnail.status_code == 200 and thumbnail.headers["content-type"].startswith("image/")
            poll_until(lambda: [m.get("thumbnails") for m in view.succeeded_messages] == [sent["thumbnails"]],
                       timeout=TIMEOUT)
            cached = client.cached_messages(url)
            assert [m["thumbnails"] for m in cached] == [sent["thumbnails"]]
        # A hosted file: sizes are accepted, and no thumbnail is made of what was not uploaded.
        _, hosted = client.send_file_message(url, url="https://example.org/p.png", mime_type="image/png",
                                             thumbnail_sizes=boxes[:1])
        assert hosted.result(TIMEOUT)["file"]["type"] == "image/png"
        # Bad sizes are refused before anything is stored, naming the item.
        for sizes, named in (([{"max_width": 0, "max_height": 10}], "thumbnail_sizes[0].max_width"),
                             ([{"max_width": 10}], "thumbnail_sizes[0].max_height"),
                             ([{"max_width": 10, "max_height": 10, "colour": "red"}], "colour"),
                             (boxes * 2, "at most 3")):
            with pytest.raises(parley.InvalidArgument, match=named.replace("[", r"\[").replace("]", r"\]")):
                client.send_file_message(url, file_path=str(picture), thumbnail_sizes=sizes)
        with pytest.raises(parley.InvalidArgument, match="mime_type"):
            client.send_file_message(url, file_path=str(picture), mime_type="image/png", file_type="image/gif")
        assert len(client.cached_messages(url)) == 2
