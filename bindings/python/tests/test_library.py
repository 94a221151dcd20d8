"""The library the package loads: one version everywhere (the C header, CMakeLists.txt, the
Swift sources, the loaded libparley; the package's own version is the library's), and the
order in which the package looks for libparley (bundled, PARLEY_LIBRARY, the system loader)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import parley

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "bindings" / "python" / "parley"


def source(relative: str) -> str:
    path = ROOT / relative
    if not path.is_file():
        pytest.skip(f"the sources are not reachable ({path} is missing)")
    return path.read_text()


def found(pattern: str, text: str, where: str) -> re.Match:
    match = re.search(pattern, text, re.MULTILINE | re.DOTALL)
    assert match, f"{where}: no match for {pattern!r}"
    return match


def swift_version(text: str, enum: str, where: str) -> str:
    """`enum`'s `string`, with its interpolations of the enum's integer constants filled in."""
    body = found(r"enum " + enum + r"\s*\{(.*?)\n\}", text, where).group(1)
    string = found(r'static let string = "([^"]*)"', body, where).group(1)
    constants = dict(re.findall(r"static let (\w+) = (\d+)", body))
    return re.sub(r"\\\((\w+)\)", lambda m: constants.get(m.group(1), m.group(0)), string)


def test_the_version_is_the_same_everywhere() -> None:
    header = source("include/parley/common.h")
    header_string = found(r'^#define\s+PARLEY_VERSION_STRING\s+"([^"]+)"', header, "common.h").group(1)
    header_parts = ".".join(found(rf"^#define\s+PARLEY_VERSION_{part}\s+(\d+)", header, "common.h").group(1)
                            for part in ("MAJOR", "MINOR", "PATCH"))
    versions: Dict[str, str] = {
        "include/parley/common.h PARLEY_VERSION_STRING": header_string,
        "include/parley/common.h PARLEY_VERSION_MAJOR.MINOR.PATCH": header_parts,
        "CMakeLists.txt project VERSION": found(r"^project\(\s*Parley\s+VERSION\s+([0-9][0-9.]*)",
                                                source("CMakeLists.txt"), "CMakeLists.txt").group(1),
        "ParleyVersion.string (Swift)": swift_version(
            source("Sources/ParleyCore/Support/ClientConfiguration.swift"), "ParleyVersion", "ClientConfiguration.swift"),
        "ServerVersion.string (server)": swift_version(
            source("server/Sources/ParleyServer/Config/Settings.swift"), "ServerVersion", "Settings.swift"),
        f"parley_version() of {parley.library_path()}": parley.version(),
        "parley.__version__": parley.__version__,
    }
    assert len(set(versions.values())) == 1, "the versions disagree:\n" + "\n".join(
        f"  {where}: {value}" for where, value in versions.items())


def run_package(package_parent: Path, environment: Dict[str, str]) -> subprocess.CompletedProcess:
    """Imports the package copied under `package_parent` in a fresh interpreter and prints the
    loaded library's path."""
    env = {key: value for key, value in os.environ.items() if key not in ("PARLEY_LIBRARY", "PYTHONPATH")}
    env.update(environment)
    return subprocess.run([sys.executable, "-c", "import parley; print(parley.library_path())"],
                          cwd=package_parent, env=env, capture_output=True, text=True, timeout=60)


def copy_package(destination: Path) -> Path:
    shutil.copytree(PACKAGE, destination / "parley", ignore=shutil.ignore_patterns("__pycache__", "libparley.so*"))
    return destination / "parley"


def test_a_bundled_library_comes_before_parley_library(tmp_path: Path) -> None:
    loaded = Path(parley.library_path())
    package = copy_package(tmp_path)
    (package / "libparley.so.0").symlink_to(loaded)
    result = run_package(tmp_path, {"PARLEY_LIBRARY": str(loaded)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(package / "libparley.so.0")


def test_parley_library_when_nothing_is_bundled(tmp_path: Path) -> None:
    loaded = Path(parley.library_path())
    copy_package(tmp_path)
    result = run_package(tmp_path, {"PARLEY_LIBRARY": str(loaded)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(loaded)


def test_a_parley_library_that_does_not_load_is_the_error(tmp_path: Path) -> None:
    package = copy_package(tmp_path)
    missing = tmp_path / "nowhere" / "libparley.so.0"
    result = run_package(tmp_path, {"PARLEY_LIBRARY": str(missing)})
    assert result.returncode != 0, result.stdout
    assert "ImportError: cannot load libparley" in result.stderr
    tried = result.stderr[result.stderr.index("Tried, in order:"):]
    assert tried.index(f"bundled: no libparley.so* in {package}") < tried.index(f"PARLEY_LIBRARY: {missing}") \
        < tried.index("system loader: not tried, PARLEY_LIBRARY is set"), tried


def test_without_parley_library_the_system_loader_is_tried(tmp_path: Path) -> None:
    package = copy_package(tmp_path)
    result = run_package(tmp_path, {"LD_LIBRARY_PATH": ""})
    if result.returncode == 0:
        pytest.skip(f"the system loader finds a libparley ({result.stdout.strip()})")
    tried = result.stderr[result.stderr.index("Tried, in order:"):]
    assert tried.index(f"bundled: no libparley.so* in {package}") < tried.index("PARLEY_LIBRARY: not set") \
        < tried.index("system loader: libparley.so.0"), tried


def test_errors_say_whether_a_retry_may_succeed_by_the_librarys_rule() -> None:
    import socket

    assert parley.NetworkError("down").retryable and parley.Timeout("slow").retryable
    assert parley.ServerError("busy", http_status=503).retryable and parley.ServerError("later", http_status=429).retryable
    assert not parley.ServerError("bad", http_status=400).retryable
    assert not parley.InvalidArgument("no").retryable and not parley.NotFound("gone", http_status=404).retryable
    # A real refusal of the connection: a port that was just free.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with parley.Client(server_url=f"http://127.0.0.1:{port}") as client:
        with pytest.raises(parley.ParleyError) as failure:
            client.request("GET", "/v3/users").result(30)
    assert isinstance(failure.value, parley.NetworkError) and failure.value.retryable


def test_the_configuration_keys_are_the_librarys() -> None:
    keys = {entry["name"]: entry for entry in parley.configuration_keys()}
    assert keys["server_url"]["type"] == "string"
    assert keys["reconnect_initial_delay_ms"] == {**keys["reconnect_initial_delay_ms"], "type": "integer", "default": 500}
    unknown = "no_such_key"
    assert unknown not in keys
    with pytest.raises(parley.InvalidArgument, match=unknown):
        parley.Client({unknown: 1})
