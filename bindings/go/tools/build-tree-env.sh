#!/usr/bin/env bash
# Prints the environment that builds the Go package against the library of a CMake build tree
# (default build/cmake) instead of an installed one:
#
#   eval "$(bash bindings/go/tools/build-tree-env.sh [BUILD_DIR])"
#
# It writes a parley.pc of its own into BUILD_DIR/go-pkgconfig (the headers of include/, the
# library of BUILD_DIR/lib, and an rpath to it, so that test binaries find libparley.so.0
# without LD_LIBRARY_PATH) and prints PKG_CONFIG_PATH pointing there: pkg-config, which cgo
# runs for `#cgo pkg-config: parley`, then finds it before an installed parley.pc.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build/cmake}" && pwd)
[ -e "$build/lib/libparley.so.0" ] || { echo "no $build/lib/libparley.so.0: build the library first (README)" >&2; exit 1; }
mkdir -p "$build/go-pkgconfig"
cat >"$build/go-pkgconfig/parley.pc" <<PC
# The build tree of $build, for the Go binding's tests (bindings/go/tools/build-tree-env.sh).
Name: parley
Description: Parley from a build tree
Version: $(sed -n 's/^Version: //p' "$build/parley.pc")
Libs: -L$build/lib -Wl,-rpath,$build/lib -lparley
Cflags: -I$root/include
PC
echo "export PKG_CONFIG_PATH=$build/go-pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
