#!/usr/bin/env bash
# Checks that libparley is self-contained: no Swift runtime libraries, no RUNPATH into
# the toolchain, only parley_* exported, and that a program using it runs with the
# toolchain hidden from the loader (scrubbed environment, no toolchain on any path).
set -euo pipefail
library="$1"
program="$2"
failed=0

needed=$(readelf -d "$library" | awk '/NEEDED/ {print $5}' | tr -d '[]')
echo "NEEDED: $(echo $needed | tr '\n' ' ')"
if echo "$needed" | grep -Eq 'swift|dispatch|Foundation|BlocksRuntime'; then
    echo "FAIL: the library needs Swift toolchain libraries"; failed=1
fi
if readelf -d "$library" | grep -Eq 'RPATH|RUNPATH'; then
    echo "FAIL: the library carries an RPATH/RUNPATH: $(readelf -d "$library" | grep -E 'RPATH|RUNPATH')"; failed=1
fi
soname=$(readelf -d "$library" | awk '/SONAME/ {print $5}' | tr -d '[]')
if [ "$soname" != "libparley.so.0" ]; then echo "FAIL: soname is '$soname'"; failed=1; fi

# Exported = defined dynamic symbols with GLOBAL or WEAK binding (LOCAL entries in .dynsym
# cannot be bound by anyone else).
exported=$(readelf --dyn-syms -W "$library" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") {print $8}' | sort -u)
others=$(echo "$exported" | grep -v '^parley_' || true)
if [ -n "$others" ]; then
    echo "FAIL: symbols other than parley_* are exported:"; echo "$others" | head -20; failed=1
fi
echo "exported: $(echo "$exported" | wc -l) parley_* symbols"

resolved=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= ldd "$program")
if echo "$resolved" | grep -Eq 'libswift|libdispatch|libFoundation|/opt/swift|not found'; then
    echo "FAIL: with a scrubbed environment the program resolves:"; echo "$resolved"; failed=1
fi
# Run it with no toolchain anywhere on PATH or LD_LIBRARY_PATH.
if ! env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= HOME=/tmp "$program" > /tmp/parley-hidden-toolchain.log 2>&1; then
    echo "FAIL: the program failed with the toolchain hidden:"; cat /tmp/parley-hidden-toolchain.log; failed=1
fi
[ $failed -eq 0 ] && echo "library checks passed"
exit $failed
