#!/usr/bin/env bash
# Checks what `cmake --install` makes of a built CMake build directory (given, e.g.
# build/cmake; scripts/test.sh runs this):
#   bash scripts/check-install.sh build/cmake
# It installs into a fresh prefix the build was not configured with
# (`cmake --install <build> --prefix <tmp>`), moves that prefix elsewhere, and checks there:
#  - the headers and the soname chain are in place, no text file names the first prefix;
#  - a C program built with `pkg-config --cflags --libs parley` alone compiles and runs
#    against the moved library;
#  - pkg-config answers with only the moved pkgconfig directory visible (no sqlite3.pc,
#    libcurl.pc or jansson.pc to be found), and parley.pc requires nothing;
#  - find_package(Parley CONFIG) works from the moved prefix;
#  - the installed library is stripped, and its debug file is in lib/.debug with a
#    matching .gnu_debuglink (readelf checks the CRC);
#  - a plain configure (no options) generates no test, example or benchmark target; that
#    build, with a libdir two levels deep (lib/x86_64-linux-gnu), installs a parley.pc
#    that finds its prefix too. Its swift is a stand-in that copies the given build's
#    library: nothing is compiled again.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
work=$(cd "$(mktemp -d)" && pwd -P)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$2/CMakeCache.txt"; }

libdir=$(cache_value CMAKE_INSTALL_LIBDIR "$build")
includedir=$(cache_value CMAKE_INSTALL_INCLUDEDIR "$build")
real_name=$(basename "$(readlink -f "$build/lib/libparley.so.0")")

# ---- install, then move the prefix ------------------------------------------------
cmake --install "$build" --prefix "$work/first" >/dev/null
mv "$work/first" "$work/moved"
prefix="$work/moved"
lib="$prefix/$libdir"

test -f "$prefix/$includedir/parley.h" || fail "no parley.h"
for module in common client session operations sending cache group_channel_collection message_collection sync_view; do
    test -f "$prefix/$includedir/parley/$module.h" || fail "no parley/$module.h"
done
test -L "$lib/libparley.so" && test -L "$lib/libparley.so.0" && test -f "$lib/$real_name" || fail "soname chain"
stale=$(grep -rlIF "$work/first" "$prefix" || true)
[ -z "$stale" ] || fail "installed files name the prefix they were installed into: $stale"

cat > "$work/consumer.c" <<'C'
#include <parley.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    parley_client *client = NULL;
    if (parley_client_create(&client, "{\"dispatch_mode\": \"manual\"}") != PARLEY_OK) return 1;
    if (parley_client_destroy(client) != PARLEY_OK) return 2;
    printf("consumer linked against parley %s\n", parley_version());
    return strcmp(parley_version(), PARLEY_VERSION_STRING) == 0 ? 0 : 3;
}
C
# The program must have loaded the moved library, not one installed elsewhere.
# (Outputs are captured before grep -q reads them: under pipefail, a writer cut short by
# grep's early exit would fail the pipe.)
loads_moved() { grep -qF "libparley.so.0 => $lib/libparley.so.0" <<<"$(ldd "$1")" || fail "$1 does not load $lib/libparley.so.0"; }

# ---- pkg-config, the moved prefix first on the search path ------------------------
flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs parley)
[ "$(readlink -f "$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --variable=libdir parley)")" = "$lib" ] \
    || fail "parley.pc's libdir is not the moved $lib"
# shellcheck disable=SC2086
cc -std=c99 -Wall -Wextra -Werror -pedantic "$work/consumer.c" -o "$work/consumer" $flags -Wl,-rpath,"$lib"
"$work/consumer"
loads_moved "$work/consumer"

# ---- pkg-config seeing nothing but the moved prefix -------------------------------
only_parley() { PKG_CONFIG_LIBDIR="$lib/pkgconfig" PKG_CONFIG_PATH= pkg-config "$@"; }
! only_parley --exists sqlite3 || fail "sqlite3.pc is still visible: the check would prove nothing"
only_parley --cflags --libs parley >/dev/null || fail "pkg-config --cflags --libs parley needs other .pc files"
[ -z "$(only_parley --print-requires --print-requires-private parley)" ] || fail "parley.pc requires other packages"

# ---- find_package from the moved prefix -------------------------------------------
mkdir -p "$work/cmake-consumer"
cp "$work/consumer.c" "$work/cmake-consumer/"
cat > "$work/cmake-consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(Parley 0.1 CONFIG REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE Parley::parley)
CM
cmake -S "$work/cmake-consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
[ "$(cache_value Parley_DIR "$work/cmake-build")" = "$lib/cmake/Parley" ] || fail "find_package did not take $lib/cmake/Parley"
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"
loads_moved "$work/cmake-build/consumer"

# ---- stripped, with its debug information beside it ------------------------------
! grep -qE '\.symtab|\.debug_info' <<<"$(readelf -S -W "$lib/$real_name")" \
    || fail "the installed $real_name keeps its symbol table or debug sections"
grep -q '\.debug_info' <<<"$(readelf -S -W "$lib/.debug/$real_name.debug")" || fail "no debug information in $lib/.debug/$real_name.debug"
grep -qF "Found separate debug info file: $lib/.debug/$real_name.debug" <<<"$(readelf --debug-dump=links "$lib/$real_name" 2>&1)" \
    || fail "$real_name's .gnu_debuglink does not lead to its debug file (or the CRC differs)"
echo "installed: $real_name $(stat -c %s "$lib/$real_name") bytes (stripped; the build tree's: $(stat -c %s "$build/lib/$real_name")), .debug/$real_name.debug $(stat -c %s "$lib/.debug/$real_name.debug") bytes"

# ---- a plain configure builds the library only ------------------------------------
cat > "$work/swift" <<SH
#!/usr/bin/env bash
# Stand-in for "swift build -c CONF ... --scratch-path DIR": copies the library built already.
set -euo pipefail
conf=release scratch=
while [ \$# -gt 0 ]; do case "\$1" in -c) conf=\$2; shift ;; --scratch-path) scratch=\$2; shift ;; esac; shift; done
mkdir -p "\$scratch/\$conf" && cp "$build/lib/$real_name" "\$scratch/\$conf/libparley.so"
SH
chmod +x "$work/swift"
cmake -S "$source_dir" -B "$work/plain" -DPARLEY_SWIFT="$work/swift" -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu >/dev/null
targets=$(cmake --build "$work/plain" --target help)
grep -q 'parley_swift' <<<"$targets" || fail "no parley_swift target in a plain configure"
extra=$(grep -E 'test_|header_|bench_|example_' <<<"$targets" || true)
[ -z "$extra" ] || fail "a plain configure builds more than the library: $(echo $extra)"
cmake --build "$work/plain" >/dev/null
cmake --install "$work/plain" --prefix "$work/deep" >/dev/null
mv "$work/deep" "$work/deep-moved"
deep="$work/deep-moved/lib/x86_64-linux-gnu"
pc() { PKG_CONFIG_LIBDIR="$deep/pkgconfig" PKG_CONFIG_PATH= pkg-config "$@" parley; }
[ "$(readlink -f "$(pc --variable=libdir)")" = "$deep" ] && [ "$(readlink -f "$(pc --variable=includedir)")" = "$work/deep-moved/include" ] \
    || fail "with libdir lib/x86_64-linux-gnu, parley.pc does not find its prefix: $(pc --cflags --libs)"
echo "install checks passed"
