"""Server-made thumbnails of uploaded images and uploaded channel covers (PROTOCOL.md §6.1,
§7.3), on the real server and both storage backends. The images are made here with Pillow and
the thumbnails decoded with it."""
import io
import json
import sqlite3
import struct
import zlib

import pytest
import requests
from PIL import Image

from conftest import assert_error
from tests_support import databases


def image_bytes(width, height, fmt="PNG", mode="RGB"):
    colour = (200, 40, 90, 128) if mode == "RGBA" else (200, 40, 90)
    picture = Image.new(mode, (width, height), colour)
    # A gradient, so that a scaled image is not trivially one colour.
    for x in range(0, width, max(1, width // 16)):
        picture.putpixel((x, height // 2), (x % 256, 10, 10, 255) if mode == "RGBA" else (x % 256, 10, 10))
    out = io.BytesIO()
    picture.save(out, fmt)
    return out.getvalue()


def huge_png(width, height):
    """A valid 1-bit greyscale PNG with width x height pixels that compresses to a few KiB."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height, 9)) + chunk(b"IEND", b""))


def stored_file_ids(server):
    """The ids of every stored file body, read from the database itself."""
    if databases.backend() == "sqlite":
        db = sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True)
        try:
            return {row[0] for row in db.execute("SELECT file_id FROM file_blobs")}
        finally:
            db.close()
    return set(databases.psql(server.db_path, "SELECT file_id FROM file_blobs").split())


def file_id(url):
    return url.split("/v3/files/")[1].split("/")[0]


def members(server, n=2):
    users = [server.user() for _ in range(n)]
    return server.channel(users)["channel_url"], users


def upload(server, url, session, payload, filename="picture.png", content_type="image/png", **fields):
    data = {"message_type": "FILE"}
    data.update({k: (v if isinstance(v, str) else json.dumps(v)) for k, v in fields.items()})
    return requests.post(server.url(f"/v3/group_channels/{url}/messages"), headers={"Session-Key": session},
                         data=data, files={"file": (filename, payload, content_type)}, timeout=30)


def fetch(url, session=None, token=None):
    headers = {"Session-Key": session} if session else {"Api-Token": token} if token else {}
    return requests.get(url, headers=headers, timeout=10)


def assert_fits(thumbnail, box, source_size, downloaded):
    """The thumbnail's listed and real sizes agree, fit the box, keep the aspect ratio and are
    never larger than the source."""
    picture = Image.open(io.BytesIO(downloaded))
    picture.load()
    width, height = picture.size
    assert (thumbnail["real_width"], thumbnail["real_height"]) == (width, height)
    assert (thumbnail["width"], thumbnail["height"]) == box
    assert width <= box[0] and height <= box[1]
    assert width <= source_size[0] and height <= source_size[1]
    # One side touches the box unless the source is smaller (never enlarged).
    scale = min(box[0] / source_size[0], box[1] / source_size[1], 1.0)
    assert abs(width - source_size[0] * scale) <= 1 and abs(height - source_size[1] * scale) <= 1
    return picture


def test_thumbnails_of_an_image_fit_their_boxes(server):
    url, (a, b) = members(server)
    sa, sb = server.session(a), server.session(b)
    source = image_bytes(640, 480)
    boxes = [(100, 100), (320, 50), (1000, 1000)]
    r = upload(server, url, sa, source, thumbnail_sizes=[{"max_width": w, "max_height": h} for w, h in boxes])
    assert r.status_code == 200, r.text
    m = r.json()
    assert m["file"]["size"] == len(source)
    assert len(m["thumbnails"]) == 3
    sizes = []
    for thumbnail, box in zip(m["thumbnails"], boxes):
        assert thumbnail["url"].startswith(server.base + "/v3/files/")
        got = fetch(thumbnail["url"], session=sb)
        assert got.status_code == 200
        assert got.headers["content-type"] == "image/jpeg"
        picture = assert_fits(thumbnail, box, (640, 480), got.content)
        assert picture.format == "JPEG"
        sizes.append(picture.size)
    assert sizes == [(100, 75), (67, 50), (640, 480)]
    # The message as listed carries the same thumbnails.
    listed = server.ok("GET", f"/v3/group_channels/{url}/messages/{m['message_id']}")
    assert listed["thumbnails"] == m["thumbnails"]
    # The original is untouched.
    assert fetch(m["file"]["url"], session=sb).content == source


def test_thumbnail_of_an_image_with_alpha_is_png_and_sizes_as_text(server):
    url, (a, _) = members(server)
    sa = server.session(a)
    source = image_bytes(90, 300, mode="RGBA")
    # The declared type does not matter: the server decodes the bytes.
    r = upload(server, url, sa, source, filename="blob.bin", content_type="application/octet-stream",
               thumbnail_sizes='[{"max_width": 60, "max_height": 60}]')
    assert r.status_code == 200, r.text
    (thumbnail,) = r.json()["thumbnails"]
    got = fetch(thumbnail["url"], session=sa)
    assert got.headers["content-type"] == "image/png"
    picture = assert_fits(thumbnail, (60, 60), (90, 300), got.content)
    assert picture.format == "PNG" and picture.mode in ("RGBA", "LA")
    assert picture.size == (18, 60)
    # The platform's "W,H" spelling in thumbnail1..3 fields.
    r = upload(server, url, sa, image_bytes(200, 100, fmt="JPEG"), filename="p.jpg", content_type="image/jpeg",
               thumbnail1="50,50", thumbnail2="20,40")
    assert r.status_code == 200, r.text
    assert [(t["real_width"], t["real_height"]) for t in r.json()["thumbnails"]] == [(50, 25), (20, 10)]


def test_thumbnail_access_follows_the_message(server):
    url, (a, _) = members(server)
    sa = server.session(a)
    m = upload(server, url, sa, image_bytes(50, 50), thumbnail_sizes=[{"max_width": 10, "max_height": 10}]).json()
    thumbnail_url = m["thumbnails"][0]["url"]
    assert fetch(thumbnail_url, session=server.session(server.user())).status_code == 403
    assert fetch(thumbnail_url).status_code == 401
    assert fetch(thumbnail_url, token="test-admin-token").status_code == 200
    before = stored_file_ids(server)
    ids = {file_id(thumbnail_url), file_id(m["file"]["url"])}
    assert ids <= before
    server.ok("DELETE", f"/v3/group_channels/{url}/messages/{m['message_id']}")
    assert fetch(thumbnail_url, session=sa).status_code == 404
    assert not ids & stored_file_ids(server)


def test_deleting_a_copy_keeps_the_originals_files(server):
    url, (a, _) = members(server)
    other = server.channel([a])["channel_url"]
    sa = server.session(a)
    m = upload(server, url, sa, image_bytes(40, 40), thumbnail_sizes=[{"max_width": 8, "max_height": 8}]).json()
    copy = server.ok("POST", f"/v3/group_channels/{url}/messages/{m['message_id']}/copy", session=sa,
                     json={"dest_channel_url": other})
    assert copy["thumbnails"] == m["thumbnails"]
    server.ok("DELETE", f"/v3/group_channels/{other}/messages/{copy['message_id']}")
    assert fetch(m["thumbnails"][0]["url"], session=sa).status_code == 200
    assert fetch(m["file"]["url"], session=sa).status_code == 200


def test_no_thumbnails_for_what_is_not_a_decodable_image(server):
    url, (a, _) = members(server)
    sa = server.session(a)
    sizes = [{"max_width": 32, "max_height": 32}]
    text = b"just some text, not an image\n" * 10
    whole = image_bytes(400, 300)
    corrupt = whole[:len(whole) // 2]
    garbage_png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    for payload, content_type in [(text, "image/png"), (corrupt, "image/png"), (garbage_png, "image/png")]:
        r = upload(server, url, sa, payload, content_type=content_type, thumbnail_sizes=sizes)
        assert r.status_code == 200, r.text
        m = r.json()
        assert m["thumbnails"] == []
        assert fetch(m["file"]["url"], session=sa).content == payload
    # More pixels than the server decodes (8000 x 7000 = 56 megapixels in a few KiB): stored, no thumbnails.
    bomb = huge_png(8000, 7000)
    assert len(bomb) < 200_000
    r = upload(server, url, sa, bomb, thumbnail_sizes=sizes)
    assert r.status_code == 200, r.text
    assert r.json()["thumbnails"] == []
    # Just under the limit it is thumbnailed (the limit, not the format, refused the one above).
    r = upload(server, url, sa, huge_png(7000, 7000), thumbnail_sizes=sizes)
    assert r.status_code == 200, r.text
    assert [(t["real_width"], t["real_height"]) for t in r.json()["thumbnails"]] == [(32, 32)]


@pytest.mark.parametrize("sizes, detail", [
    ([{"max_width": 10, "max_height": 10}] * 4, "at most 3"),
    ([{"max_width": 0, "max_height": 10}], "max_width"),
    ([{"max_width": 10, "max_height": -5}], "max_height"),
    ([{"max_width": 10.5, "max_height": 10}], "max_width"),
    ([{"max_width": "10", "max_height": 10}], "max_width"),
    ([{"max_width": 5000, "max_height": 10}], "4096"),
    ([{"max_width": 10}], "max_height"),
    (["ten,twenty"], "thumbnail_sizes"),
    ('{"max_width": 10}', "thumbnail_sizes"),
    ("not json", "thumbnail_sizes"),
])
def test_bad_thumbnail_sizes_are_refused(server, sizes, detail):
    url, (a, _) = members(server)
    sa = server.session(a)
    before = len(server.ok("GET", f"/v3/group_channels/{url}/messages", params={"prev_limit": 50})["messages"])
    r = upload(server, url, sa, image_bytes(20, 20), thumbnail_sizes=sizes)
    body = assert_error(r, 400, 400100, mentions="thumbnail_sizes")
    assert detail in body["message"]
    after = len(server.ok("GET", f"/v3/group_channels/{url}/messages", params={"prev_limit": 50})["messages"])
    assert after == before
    # JSON sends are checked alike (a file by URL gets no thumbnails, but bad sizes are still bad).
    if isinstance(sizes, list):
        r = server.request("POST", f"/v3/group_channels/{url}/messages", session=sa, json={
            "message_type": "FILE", "url": "https://example.com/x.png", "thumbnail_sizes": sizes})
        assert_error(r, 400, 400100, mentions="thumbnail_sizes")


def create_with_cover(server, session, payload, filename="cover.png", content_type="image/png", **fields):
    data = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in fields.items()}
    return requests.post(server.url("/v3/group_channels"), headers={"Session-Key": session}, data=data,
                         files={"cover_file": (filename, payload, content_type)}, timeout=30)


def update_with_cover(server, url, session, payload, filename="cover.png", **fields):
    return requests.put(server.url(f"/v3/group_channels/{url}"), headers={"Session-Key": session}, data=fields,
                        files={"cover_file": (filename, payload, "image/png")}, timeout=30)


def test_cover_upload_on_create_and_update(server):
    a, b, c = server.user(), server.user(), server.user()
    sa = server.session(a)
    first = image_bytes(120, 80)
    r = create_with_cover(server, sa, first, name="covered", user_ids=[a, b], operator_ids=[a], custom_type="ct")
    assert r.status_code == 200, r.text
    channel = r.json()
    url = channel["channel_url"]
    assert channel["name"] == "covered" and channel["custom_type"] == "ct"
    assert {m["user_id"] for m in channel["members"]} == {a, b}
    cover = channel["cover_url"]
    assert cover.startswith(server.base + "/v3/files/")
    got = fetch(cover, session=server.session(b))
    assert got.status_code == 200 and got.content == first and got.headers["content-type"] == "image/png"
    # Same rules as the channel: a stranger is refused while it is private, let in once public.
    stranger = server.session(c)
    assert fetch(cover, session=stranger).status_code == 403
    assert fetch(cover).status_code == 401
    assert fetch(cover, token="test-admin-token").content == first
    server.ok("PUT", f"/v3/group_channels/{url}", json={"is_public": True})
    assert fetch(cover, session=stranger).content == first
    # Sending the channel's own cover_url back keeps the cover.
    server.ok("PUT", f"/v3/group_channels/{url}", session=sa, json={"cover_url": cover, "name": "again"})
    assert fetch(cover, session=sa).content == first

    # A new cover replaces the old one, whose stored body goes.
    second = image_bytes(30, 60, fmt="JPEG")
    r = update_with_cover(server, url, sa, second, filename="second.jpg", name="renamed")
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["name"] == "renamed" and updated["cover_url"] != cover
    assert fetch(updated["cover_url"], session=sa).content == second
    assert fetch(updated["cover_url"], session=sa).headers["content-type"] == "image/jpeg"
    assert fetch(cover, session=sa).status_code == 404
    stored = stored_file_ids(server)
    assert file_id(cover) not in stored and file_id(updated["cover_url"]) in stored
    assert server.ok("GET", f"/v3/group_channels/{url}")["cover_url"] == updated["cover_url"]

    # A plain cover_url still works, and drops the uploaded cover.
    server.ok("PUT", f"/v3/group_channels/{url}", session=sa, json={"cover_url": "https://example.com/c.png"})
    assert server.ok("GET", f"/v3/group_channels/{url}")["cover_url"] == "https://example.com/c.png"
    assert file_id(updated["cover_url"]) not in stored_file_ids(server)

    # Deleting the channel deletes its cover.
    third = update_with_cover(server, url, sa, image_bytes(10, 10)).json()["cover_url"]
    assert file_id(third) in stored_file_ids(server)
    server.ok("DELETE", f"/v3/group_channels/{url}", session=sa)
    assert file_id(third) not in stored_file_ids(server)


def test_cover_upload_refusals(fresh_server):
    server = fresh_server(["--upload-limit-bytes", "2000"])
    a = server.user()
    sa = server.session(a)
    r = create_with_cover(server, sa, b"x" * 2001, user_ids=[a])
    assert_error(r, 413, 400113)
    r = create_with_cover(server, sa, b"not an image at all", user_ids=[a])
    assert_error(r, 400, 400100, mentions="cover_file")
    before = stored_file_ids(server)
    url = server.channel([a], operator_ids=[a])["channel_url"]
    r = update_with_cover(server, url, sa, b"GIF89a but not really")
    assert_error(r, 400, 400100, mentions="cover_file")
    assert stored_file_ids(server) == before
    # Only operators change a channel, with a cover as without.
    b = server.user()
    server.ok("POST", f"/v3/group_channels/{url}/invite", json={"user_ids": [b]})
    r = update_with_cover(server, url, server.session(b), image_bytes(10, 10))
    assert_error(r, 403)
    assert stored_file_ids(server) == before
    # A plain JSON create with cover_url is unchanged.
    plain = server.ok("POST", "/v3/group_channels", session=sa, json={"user_ids": [a], "cover_url": "https://e.com/c.png"})
    assert plain["cover_url"] == "https://e.com/c.png"


def test_the_sdk_spellings_of_file_fields(server):
    """The reference SDK's `file_url` and `mime_type` stand for `url` and `file_type`, also in
    `files`; the platform's own spelling wins where both are given."""
    url, (a, _) = members(server)
    base = f"/v3/group_channels/{url}/messages"
    m = server.ok("POST", base, json={"message_type": "FILE", "user_id": a, "file_url": "https://example.org/a.png",
                                      "mime_type": "image/png", "file_name": "a.png"})
    assert (m["file"]["url"], m["file"]["type"], m["file"]["name"]) == ("https://example.org/a.png", "image/png", "a.png")
    m = server.ok("POST", base, json={"message_type": "FILE", "user_id": a,
                                      "files": {"file_url": "https://example.org/b.gif", "mime_type": "image/gif"}})
    assert (m["file"]["url"], m["file"]["type"]) == ("https://example.org/b.gif", "image/gif")
    m = server.ok("POST", base, json={"message_type": "FILE", "user_id": a, "url": "https://example.org/c.png",
                                      "file_url": "https://example.org/ignored.png", "file_type": "image/png",
                                      "mime_type": "text/plain"})
    assert (m["file"]["url"], m["file"]["type"]) == ("https://example.org/c.png", "image/png")
    r = upload(server, url, server.session(a), image_bytes(20, 10), filename="d.bin",
               content_type="application/octet-stream", mime_type="image/png")
    assert r.status_code == 200, r.text
    assert r.json()["file"]["type"] == "image/png"
