"""Build hooks of the parley-chat distribution; its metadata is in pyproject.toml.

The version is the library's: PARLEY_VERSION_STRING in include/parley/common.h, two levels
up from this directory (scripts/build-wheel.sh keeps that layout in its staging copy); an
sdist's PKG-INFO serves when the header is not there.

The wheel is platform-specific exactly when a libparley.so* lies in parley/ (only
scripts/build-wheel.sh puts one there, in its staging copy, never in the source tree). Its
tag is then py3-none-<platform>: the package loads the library with ctypes, so any Python 3
on that platform can use it; auditwheel then replaces the platform by a manylinux tag.
Without a library (`pip install ./bindings/python`) the wheel stays pure, and the package
finds libparley through PARLEY_LIBRARY or the system loader.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Tuple

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools 70.1 and later
except ImportError:  # older setuptools: the wheel package's command
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
HEADER = HERE.parent.parent / "include" / "parley" / "common.h"
BUNDLES_LIBRARY = any((HERE / "parley").glob("libparley.so*"))


def library_version() -> str:
    if HEADER.is_file():
        match = re.search(r'^#define\s+PARLEY_VERSION_STRING\s+"([^"]+)"', HEADER.read_text(), re.MULTILINE)
        if not match:
            raise SystemExit(f"{HEADER}: no PARLEY_VERSION_STRING")
        return match.group(1)
    info = HERE / "PKG-INFO"
    if info.is_file():
        match = re.search(r"^Version:\s*(\S+)", info.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    raise SystemExit(f"cannot tell the library's version: {HEADER} is missing (build from the repository)")


class LibraryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return BUNDLES_LIBRARY or super().has_ext_modules()


class LibraryWheel(bdist_wheel):
    def get_tag(self) -> Tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        if BUNDLES_LIBRARY:
            return "py3", "none", platform
        return python, abi, platform


setup(version=library_version(), distclass=LibraryDistribution, cmdclass={"bdist_wheel": LibraryWheel})
