#!/usr/bin/env bash
# Install the PostgreSQL server (Debian package) for the postgres log backend's tests,
# which start their own server with initdb/pg_ctl in a temporary directory.
# Non-fatal where apt is unavailable (those tests then skip), fatal in CI (CI=true).
set -uo pipefail

if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    exit 0
fi

fail() {
    echo "postgres: $1" >&2
    if [ "${CI:-}" = "true" ]; then
        echo "postgres: required in CI" >&2
        exit 1
    fi
    echo "postgres: the postgres storage tests will be skipped" >&2
    exit 0
}

if ! command -v apt-get >/dev/null 2>&1; then
    fail "not installed and apt-get is not available; install PostgreSQL (initdb, pg_ctl) by hand"
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        fail "not installed and not root (no passwordless sudo); run: apt-get install postgresql"
    fi
fi
export DEBIAN_FRONTEND=noninteractive
LOG=/tmp/slipstream-postgres-install.log
echo "postgres: installing the Debian package"
if ! $SUDO apt-get install -y -q postgresql >"$LOG" 2>&1; then
    $SUDO apt-get update -q >>"$LOG" 2>&1 || true
    if ! $SUDO apt-get install -y -q postgresql >>"$LOG" 2>&1; then
        tail -n 20 "$LOG" >&2
        fail "apt-get install postgresql failed (log: $LOG)"
    fi
fi
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || fail "installed but initdb was not found"
echo "postgres: $(ls -d /usr/lib/postgresql/*/bin | tail -n 1)"
