"""What scripts/test-wheel.sh runs with the python of a fresh virtual environment that holds
only the parley-chat wheel, from outside the repository, without PARLEY_LIBRARY:

    python -I test-wheel.py SERVER_URL API_TOKEN REPOSITORY_ROOT

It checks that `parley` and the libparley it loaded are the ones inside that environment's
site-packages (nothing from the repository or its build tree), then, against the running
parley-server, creates a user, a group channel and messages through the admin API, connects
a Client with a cache directory as that user, its cache encrypted (the grafted libsodium at
work), starts a MessageCollection on the channel and compares what it shows with the
server's own listing (message_id and text, in order); no text of them is in the cache files.
Standard library only: the environment has nothing else.
"""
from __future__ import annotations

import json
import sys
import sysconfig
import tempfile
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

TIMEOUT = 30.0


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"wheel check FAILED: {what}")


def inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def call(base: str, method: str, path: str, headers: Dict[str, str], body: Optional[Dict[str, Any]] = None,
         query: Optional[Dict[str, Any]] = None) -> Any:
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={**headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read().decode())


def main(server_url: str, api_token: str, repository: str) -> None:
    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    root = Path(repository).resolve()
    check(sys.prefix != sys.base_prefix, f"{sys.executable} does not run in a virtual environment")
    check(not any(entry and inside(Path(entry).resolve(), root) for entry in sys.path),
          f"sys.path reaches into the repository {root}: {sys.path}")

    import parley

    package = Path(parley.__file__).resolve().parent
    check(package == site_packages / "parley", f"parley was imported from {package}, not from {site_packages}")
    library = Path(parley.library_path()).resolve()
    check(library == site_packages / "parley" / "libparley.so.0",
          f"the loaded libparley is {library}, not the one bundled in {site_packages / 'parley'}")
    check(parley.__version__ == metadata.version("parley-chat"),
          f"the library says {parley.__version__}, the installed distribution {metadata.version('parley-chat')}")

    admin = {"Api-Token": api_token}
    user, channel = "wheel-user", "wheel-room"
    call(server_url, "POST", "/v3/users", admin, {"user_id": user, "nickname": "Wheel"})
    token = call(server_url, "POST", f"/v3/users/{user}/token", admin, {})["token"]
    call(server_url, "POST", "/v3/group_channels", admin, {"channel_url": channel, "user_ids": [user]})
    for text in ("first from the wheel", "second", "third: ünïcödé"):
        call(server_url, "POST", f"/v3/group_channels/{channel}/messages", admin,
             {"message_type": "MESG", "user_id": user, "message": text})
    listing = call(server_url, "GET", f"/v3/group_channels/{channel}/messages", {"Session-Key": token},
                   query={"message_ts": 0, "prev_limit": 0, "next_limit": 100, "include": "true"})
    truth: List[Tuple[int, str]] = [(m["message_id"], m["message"]) for m in listing["messages"]]
    check(len(truth) == 3, f"the server lists {len(truth)} messages, 3 were sent")

    with tempfile.TemporaryDirectory() as cache_dir:
        client = parley.Client(server_url=server_url, cache_dir=cache_dir, cache_key="6b" * 32)
        try:
            client.connect(user, token).result(TIMEOUT)
            with client.message_collection(channel) as collection:
                cached, from_server = collection.start()
                cached.result(TIMEOUT)
                from_server.result(TIMEOUT)
                shown = [(m["message_id"], m["message"]) for m in collection.messages]
        finally:
            client.close()
        in_files = [path.name for path in Path(cache_dir).rglob("*") if path.is_file() and b"first from the wheel" in path.read_bytes()]
        check(not in_files, f"a message's text is readable in the encrypted cache's files {in_files}")
    check(shown == truth, f"the collection shows {shown}, the server lists {truth}")
    print(f"wheel check: ok (parley {parley.__version__} from {package}, library {library}; "
          f"{len(shown)} messages as the server lists them)")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python -I test-wheel.py SERVER_URL API_TOKEN REPOSITORY_ROOT")
    main(*sys.argv[1:])
