#!/usr/bin/env bash
# Builds the reference server in release mode and installs it (docs/SERVER.md "Install").
#
#   bash scripts/install-server.sh [PREFIX]        # default PREFIX: /usr/local
#
# Installs PREFIX/bin/parley-server, PREFIX/share/doc/parley-server/SERVER.md,
# PREFIX/share/parley-server/config.example.json and
# PREFIX/share/parley-server/parley-server.service (a systemd unit with PREFIX's paths; copy
# it to /etc/systemd/system to use it). With PARLEY_SERVER_BIN set, that binary is installed
# instead of building one (the tests install their debug build this way).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-/usr/local}"
case "$prefix" in
    /*) ;;
    *) prefix="$PWD/$prefix" ;;
esac

binary="${PARLEY_SERVER_BIN:-}"
if [[ -z "$binary" ]]; then
    # The toolchain where scripts/setup.sh installs it, as the other scripts look for it.
    [ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
    command -v swift >/dev/null || { echo "install-server.sh: swift is neither on PATH nor in /opt/swift (see README.md)" >&2; exit 1; }
    echo "install-server.sh: building the release server (about 6 minutes from scratch on 2 cores)" >&2
    swift build --package-path "$root/server" -c release
    binary="$root/server/.build/release/parley-server"
fi
[[ -x "$binary" ]] || { echo "install-server.sh: $binary is not an executable" >&2; exit 1; }

install -d "$prefix/bin" "$prefix/share/parley-server" "$prefix/share/doc/parley-server"
# Stripped: the symbols and debug information are most of the build's size (95 MB → 22 MB).
install -m 0755 -s "$binary" "$prefix/bin/parley-server"
install -m 0644 "$root/docs/SERVER.md" "$prefix/share/doc/parley-server/SERVER.md"
install -m 0644 "$root/server/deploy/config.example.json" "$prefix/share/parley-server/config.example.json"
sed "s|@PREFIX@|$prefix|g" "$root/server/deploy/parley-server.service" > "$prefix/share/parley-server/parley-server.service"
chmod 0644 "$prefix/share/parley-server/parley-server.service"
echo "installed $("$prefix/bin/parley-server" --version) into $prefix" >&2
