#!/usr/bin/env bash
# Installs the peer of the "Peer" benchmark rows (benchmarks/bench_peer_matrix.py): the
# Synapse home server and the matrix-nio client, both from PyPI, into a virtual environment
# of their own. Does nothing when the pinned versions are already there.
#   bash scripts/bench-peer-setup.sh [VENV_DIR]      (default: build/peer-venv)
# Exits non-zero, with a message saying why, when the peer cannot be installed.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${1:-$(pwd)/build/peer-venv}
synapse_version=1.163.2
nio_version=0.26.0

fail() {
    echo "bench-peer-setup: $* -- the peer (Synapse $synapse_version + matrix-nio $nio_version) is not installed" >&2
    exit 1
}

installed() {
    [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$synapse_version" "$nio_version" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
if (version("matrix-synapse"), version("matrix-nio")) != (sys.argv[1], sys.argv[2]):
    sys.exit(1)
import synapse.app.homeserver, nio, aiohttp, signedjson.key  # noqa: F401
EOF
}

if installed; then
    echo "bench-peer-setup: Synapse $synapse_version and matrix-nio $nio_version already in $venv"
    exit 0
fi

# A Python 3.11 (Synapse needs 3.10 or newer) that can make virtual environments; Debian's
# python3 needs python3-venv for that.
python=${PYTHON:-python3}
if ! "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' >/dev/null 2>&1; then
    if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
        echo "== apt: installing python3-venv"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv; } >/dev/null \
            || fail "apt-get install python3-venv failed"
    fi
    python=/usr/bin/python3
    "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' >/dev/null 2>&1 \
        || fail "no Python 3.10+ with venv and ensurepip"
fi

echo "== creating $venv ($("$python" --version 2>&1)), installing matrix-synapse==$synapse_version matrix-nio==$nio_version from PyPI"
rm -rf "$venv"
"$python" -m venv "$venv" || fail "could not create the virtual environment $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "matrix-synapse==$synapse_version" "matrix-nio==$nio_version" \
    || fail "pip install failed"
installed || fail "installed, but the packages do not import"
echo "bench-peer-setup: done ($venv)"
