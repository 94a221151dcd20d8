"""A channel's cover uploaded from a local file (`cover_file_path` of create_group_channel and
update_group_channel): the library sends the file as multipart, the server stores it and
serves the same bytes at the channel's cover_url; against the real server."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
import requests

import parley

TIMEOUT = 15


def png_file(path: Path, width: int, height: int, shade: int) -> Path:
    """Writes a small valid RGB PNG (raw bytes, no imaging library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (shade, x % 256, y % 256)) for y in range(height))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return path


def download(url: str, token: str) -> requests.Response:
    return requests.get(url, headers={"Session-Key": token}, timeout=10)


def test_cover_file_path_on_create_and_update(server, admin, tmp_path: Path) -> None:
    token = admin.user("carol")
    admin.user("dave")
    first = png_file(tmp_path / "first.png", 40, 30, 10)
    second = png_file(tmp_path / "second.png", 12, 50, 200)
    with parley.Client(server_url=server.url) as client:
        client.connect("carol", token).result(TIMEOUT)
        channel = client.create_group_channel(user_ids=["dave"], name="Covered", operator_ids=["carol"],
                                              cover_file_path=str(first)).result(TIMEOUT)
        assert channel["name"] == "Covered"
        assert {member["user_id"] for member in channel["members"]} == {"carol", "dave"}
        first_url = channel["cover_url"]
        assert first_url.startswith(server.url + "/v3/files/")
        got = download(first_url, token)
        assert got.status_code == 200 and got.content == first.read_bytes()
        # The cache holds the channel as answered.
        url = channel["channel_url"]
        assert client.cached_channel(url)["cover_url"] == first_url

        updated = client.update_group_channel(channel_url=url, cover_file_path=str(second),
                                              custom_type="covered").result(TIMEOUT)
        assert updated["custom_type"] == "covered" and updated["cover_url"] != first_url
        assert download(updated["cover_url"], token).content == second.read_bytes()
        assert download(first_url, token).status_code == 404  # the replaced cover is gone

        # A path that is not a file fails before anything changes; an empty one is refused.
        with pytest.raises(parley.ParleyError):
            client.update_group_channel(channel_url=url, cover_file_path=str(tmp_path / "missing.png")).result(TIMEOUT)
        with pytest.raises(parley.InvalidArgument):
            client.update_group_channel(channel_url=url, cover_file_path="").result(TIMEOUT)
        assert client.get_group_channel(channel_url=url).result(TIMEOUT)["cover_url"] == updated["cover_url"]

        # The server refuses a file that is not an image, naming the part.
        text = tmp_path / "notes.txt"
        text.write_text("not an image")
        with pytest.raises(parley.ParleyError) as refused:
            client.update_group_channel(channel_url=url, cover_file_path=str(text)).result(TIMEOUT)
        assert "cover_file" in str(refused.value)
