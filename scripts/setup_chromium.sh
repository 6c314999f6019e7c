#!/usr/bin/env bash
# Install Chromium (Debian package) for the web console's browser tests, which drive
# /usr/bin/chromium headless through Playwright (never `playwright install`).
# Non-fatal where apt is unavailable (those tests then skip), fatal in CI (CI=true).
set -uo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

fail() {
    echo "chromium: $1" >&2
    if [ "${CI:-}" = "true" ]; then
        echo "chromium: required in CI" >&2
        exit 1
    fi
    echo "chromium: the web console's browser tests will be skipped" >&2
    exit 0
}

if ! command -v apt-get >/dev/null 2>&1; then
    fail "not installed and apt-get is not available; install the 'chromium' package by hand"
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        fail "not installed and not root (no passwordless sudo); run: apt-get install chromium"
    fi
fi
export DEBIAN_FRONTEND=noninteractive
LOG=/tmp/slipstream-chromium-install.log
echo "chromium: installing the Debian package"
if ! $SUDO apt-get install -y -q --no-install-recommends chromium >"$LOG" 2>&1; then
    $SUDO apt-get update -q >>"$LOG" 2>&1 || true
    if ! $SUDO apt-get install -y -q --no-install-recommends chromium >>"$LOG" 2>&1; then
        tail -n 20 "$LOG" >&2
        fail "apt-get install chromium failed (log: $LOG)"
    fi
fi
[ -x /usr/bin/chromium ] || fail "installed but /usr/bin/chromium is missing"
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
