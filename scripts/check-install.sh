#!/usr/bin/env bash
# Checks an installed Parley (prefix given): the soname chain, pkg-config, and that a
# C consumer builds against it both through pkg-config and through find_package.
set -euo pipefail
prefix="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

test -f "$prefix/include/parley.h"
for module in common client session operations sending cache group_channel_collection; do
    test -f "$prefix/include/parley/$module.h"
done
test -L "$prefix/lib/libparley.so" && test -L "$prefix/lib/libparley.so.0" && test -f "$prefix/lib/libparley.so.0.1.0"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
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
cc -std=c99 -Wall -Wextra -Werror -pedantic "$work/consumer.c" -o "$work/consumer" $(pkg-config --cflags --libs parley) -Wl,-rpath,"$prefix/lib"
"$work/consumer"

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
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"
echo "install checks passed"
