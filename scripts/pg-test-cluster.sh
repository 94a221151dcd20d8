#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and benchmarks: its own data directory under /tmp,
# listening on a free loopback port, user `parley` with trust authentication.
#
#   source scripts/pg-test-cluster.sh start   # starts it and exports the variables below
#   ...                                       # tests read $PARLEY_TEST_PG
#   source scripts/pg-test-cluster.sh stop    # stops it and removes its directory
#
#   eval "$(scripts/pg-test-cluster.sh start)"   # the same from a shell that does not source
#   scripts/pg-test-cluster.sh env [DIR]         # prints the export lines of a running one
#   scripts/pg-test-cluster.sh stop [DIR]
#
# Exports PARLEY_TEST_PG (postgres://parley@127.0.0.1:PORT, no database: tests append one),
# PARLEY_PG_BIN (the PostgreSQL bin directory), PARLEY_PG_DIR and PARLEY_PG_PORT.
# Durability is off (fsync, synchronous_commit, full_page_writes) and pg_stat_statements is
# loaded, counting plans too (for tests), unless PG_DURABLE=1,
# which benchmarks set so that commits cost what they cost in production.
# As root, the server runs as the system user `parleypg` (PostgreSQL refuses root).
# Installs PostgreSQL from Debian's packages when none is there, without creating or
# starting the system's own cluster. Sourcing never changes the caller's shell options.

_parley_pg_fail() {
    echo "pg-test-cluster: $*" >&2
    return 1
}

# Runs a command as the user owning the cluster.
_parley_pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u parleypg -- "$@"
    else
        "$@"
    fi
}

# The bin directory of the newest installed PostgreSQL, or nothing.
_parley_pg_find_bin() {
    local candidate best=""
    for candidate in /usr/lib/postgresql/*/bin; do
        [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ] || continue
        best=$(printf '%s\n%s\n' "$best" "$candidate" | sed '/^$/d' | sort -V | tail -n 1)
    done
    [ -n "$best" ] && echo "$best"
}

_parley_pg_install() {
    [ "$(id -u)" = 0 ] || _parley_pg_fail "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb) and installing it needs root" || return 1
    echo "pg-test-cluster: installing PostgreSQL from Debian's packages" >&2
    # No service may start during the installation: a policy-rc.d answering 101 forbids it,
    # and create_main_cluster=false stops postgresql-common from creating a system cluster.
    local policy=/usr/sbin/policy-rc.d added_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1
    fi
    local status=0
    {
        apt-get update -q &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-common &&
        sed -i -E 's/^#?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
            /etc/postgresql-common/createcluster.conf &&
        { grep -q '^create_main_cluster = false' /etc/postgresql-common/createcluster.conf ||
          echo 'create_main_cluster = false' >>/etc/postgresql-common/createcluster.conf; } &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
    } >&2 || status=1
    [ -n "$added_policy" ] && rm -f "$policy"
    [ "$status" = 0 ] || _parley_pg_fail "installing PostgreSQL failed (see apt-get's output above)"
}

_parley_pg_ensure_user() {
    [ "$(id -u)" = 0 ] || return 0
    id parleypg >/dev/null 2>&1 && return 0
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin parleypg ||
        _parley_pg_fail "could not create the system user parleypg"
}

# A loopback TCP port nobody listens on. Another process may take it before the server
# binds it; `start` tries again with another port when that happens.
_parley_pg_free_port() {
    local port tries=0
    while [ $tries -lt 50 ]; do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
        tries=$((tries + 1))
    done
    _parley_pg_fail "found no free loopback port"
}

# The export lines describing the cluster in directory $1.
_parley_pg_exports() {
    local dir=$1 port bin
    port=$(cat "$dir/port" 2>/dev/null) && bin=$(cat "$dir/bin" 2>/dev/null) ||
        _parley_pg_fail "$dir holds no test cluster" || return 1
    printf 'export PARLEY_TEST_PG=%q\n' "postgres://parley@127.0.0.1:$port"
    printf 'export PARLEY_PG_BIN=%q\n' "$bin"
    printf 'export PARLEY_PG_DIR=%q\n' "$dir"
    printf 'export PARLEY_PG_PORT=%q\n' "$port"
}

_parley_pg_start() {
    local bin dir data port attempt started=""
    bin=$(_parley_pg_find_bin)
    if [ -z "$bin" ]; then
        _parley_pg_install || return 1
        bin=$(_parley_pg_find_bin)
        [ -n "$bin" ] || _parley_pg_fail "PostgreSQL was installed but no initdb was found" || return 1
    fi
    _parley_pg_ensure_user || return 1

    dir=$(mktemp -d /tmp/parley-pg-XXXXXX) || _parley_pg_fail "mktemp failed" || return 1
    data="$dir/data"
    if [ "$(id -u)" = 0 ]; then
        chown parleypg: "$dir" || { rm -rf "$dir"; _parley_pg_fail "could not give $dir to parleypg"; return 1; }
    fi

    if ! _parley_pg_as_owner "$bin/initdb" -D "$data" -U parley -A trust -E UTF8 --locale=C.UTF-8 --no-sync \
        >"$dir/initdb.log" 2>&1; then
        echo "pg-test-cluster: initdb failed; the end of its output:" >&2
        tail -n 20 "$dir/initdb.log" >&2
        rm -rf "$dir"
        return 1
    fi

    {
        echo "# pg-test-cluster"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$dir'"
        echo "max_connections = 400"
        if [ "${PG_DURABLE:-0}" != 1 ]; then
            echo "fsync = off"
            echo "synchronous_commit = off"
            echo "full_page_writes = off"
            # Tests count how often the server's statements are planned (test_nodes.py).
            if [ -f "$bin/../lib/pg_stat_statements.so" ]; then
                echo "shared_preload_libraries = 'pg_stat_statements'"
                echo "pg_stat_statements.track_planning = on"
            fi
        fi
    } >>"$data/postgresql.conf"

    for attempt in 1 2 3 4 5; do
        port=$(_parley_pg_free_port) || break
        echo "port = $port" >>"$data/postgresql.conf"
        if _parley_pg_as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >"$dir/pg_ctl.log" 2>&1; then
            started=1
            break
        fi
        # Try another port only when this one was taken meanwhile.
        grep -q "could not bind\|Address already in use" "$dir/server.log" 2>/dev/null || break
    done
    if [ -z "$started" ]; then
        echo "pg-test-cluster: the server did not start; the end of its log:" >&2
        tail -n 20 "$dir/server.log" "$dir/pg_ctl.log" >&2 2>/dev/null
        _parley_pg_as_owner "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1
        rm -rf "$dir"
        return 1
    fi

    echo "$port" >"$dir/port"
    echo "$bin" >"$dir/bin"
    eval "$(_parley_pg_exports "$dir")"
    local durability="durability off"
    [ "${PG_DURABLE:-0}" = 1 ] && durability="durable"
    echo "pg-test-cluster: PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') at $PARLEY_TEST_PG ($durability), data in $dir, run as $( [ "$(id -u)" = 0 ] && echo parleypg || id -un)" >&2
}

_parley_pg_stop() {
    local dir=${1:-${PARLEY_PG_DIR:-}}
    # Nothing started (or already stopped): stopping is then done.
    [ -n "$dir" ] || return 0
    case "$dir" in
        /tmp/parley-pg-*) ;;
        *) _parley_pg_fail "refusing to remove $dir: not a test cluster directory"; return 1 ;;
    esac
    if [ -d "$dir" ]; then
        local bin
        bin=$(cat "$dir/bin" 2>/dev/null || _parley_pg_find_bin)
        if [ -f "$dir/data/postmaster.pid" ] && [ -n "$bin" ]; then
            _parley_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
                _parley_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
        fi
        rm -rf "$dir"
        echo "pg-test-cluster: stopped and removed $dir" >&2
    fi
    if [ "$dir" = "${PARLEY_PG_DIR:-}" ]; then
        unset PARLEY_TEST_PG PARLEY_PG_BIN PARLEY_PG_DIR PARLEY_PG_PORT
    fi
    return 0
}

pg_test_cluster() {
    case "${1:-}" in
        start) _parley_pg_start ;;
        stop) _parley_pg_stop "${2:-}" ;;
        env)
            local dir=${2:-${PARLEY_PG_DIR:-}}
            [ -n "$dir" ] || _parley_pg_fail "no cluster known: set PARLEY_PG_DIR or pass the directory" || return 1
            _parley_pg_exports "$dir"
            ;;
        *)
            echo "usage: pg-test-cluster.sh start|stop [DIR]|env [DIR]   (or: source it with the same arguments)" >&2
            return 2
            ;;
    esac
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # Sourced: with arguments, act on them; without, only define pg_test_cluster.
    if [ $# -gt 0 ]; then
        pg_test_cluster "$@"
    fi
else
    pg_test_cluster "$@" || exit $?
    # Run directly, the exports cannot reach the caller: print them for eval.
    if [ "${1:-}" = start ]; then
        _parley_pg_exports "$PARLEY_PG_DIR"
    fi
fi
