#!/usr/bin/env bash
# Installs what building and testing Parley needs on Debian 12 (run as root).
# The Swift 6 toolchain itself must already be on PATH (see README).
set -euo pipefail

apt_packages=(libsqlite3-dev sqlite3 libvips-dev libcurl4-openssl-dev libjansson-dev libsodium-dev libpq-dev pkg-config cmake make gcc g++ binutils valgrind python3 python3-pip python3-venv golang-go)
pip_packages=(pytest requests mypy pillow sendbird-platform-sdk==2.1.5 prometheus_client)

missing=()
for package in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The load balancer the multi-node tests put in front of the servers (tests_support/balancer.py
# starts its own instance on loopback): no system service may start with the package, so a
# policy-rc.d answering 101 forbids it during the installation.
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
    echo "== apt: installing haproxy"
    policy=/usr/sbin/policy-rc.d
    added_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1
    fi
    status=0
    { [ ${#missing[@]} -gt 0 ] || apt-get update -qq; } && \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy || status=$?
    [ -n "$added_policy" ] && rm -f "$policy"
    [ "$status" = 0 ] || { echo "installing haproxy failed (see apt-get's output above)" >&2; exit 1; }
fi

python3 -m pip --version >/dev/null 2>&1 || { echo "python3 -m pip is not available" >&2; exit 1; }
if ! python3 -c 'import pytest, requests, mypy, PIL, sendbird_platform_sdk, prometheus_client' >/dev/null 2>&1; then
    echo "== pip: installing ${pip_packages[*]}"
    # Debian's system Python refuses global installs without this flag (PEP 668).
    python3 -m pip install -q "${pip_packages[@]}" 2>/dev/null \
        || python3 -m pip install -q --break-system-packages "${pip_packages[@]}"
fi

if ! command -v swift >/dev/null 2>&1; then
    for candidate in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
        [ -x "$candidate/swift" ] && { echo "note: swift found at $candidate; add it to PATH"; break; }
    done
    echo "swift is not on PATH: install the Swift 6 toolchain for Linux first" >&2
    exit 1
fi
echo "== setup done: $(swift --version 2>&1 | head -1)"
