#!/usr/bin/env bash
# Install kcat (Debian package; librdkafka 2.0.2 inside) for the conformance
# tests. Non-fatal where apt is unavailable (the kcat tests then skip), but
# fatal in CI (CI=true), where the peer must be present.
set -uo pipefail

if command -v kcat >/dev/null 2>&1; then
    exit 0
fi

fail() {
    echo "kcat: $1" >&2
    if [ "${CI:-}" = "true" ]; then
        echo "kcat: required in CI" >&2
        exit 1
    fi
    echo "kcat: the kcat conformance tests will be skipped" >&2
    exit 0
}

if ! command -v apt-get >/dev/null 2>&1; then
    fail "not installed and apt-get is not available; install the 'kcat' package by hand"
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        fail "not installed and not root (no passwordless sudo); run: apt-get install kcat"
    fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "kcat: installing the Debian package"
if ! $SUDO apt-get install -y -q kcat >/tmp/slipstream-kcat-install.log 2>&1; then
    $SUDO apt-get update -q >>/tmp/slipstream-kcat-install.log 2>&1 || true
    if ! $SUDO apt-get install -y -q kcat >>/tmp/slipstream-kcat-install.log 2>&1; then
        tail -n 20 /tmp/slipstream-kcat-install.log >&2
        fail "apt-get install kcat failed (log: /tmp/slipstream-kcat-install.log)"
    fi
fi
command -v kcat >/dev/null 2>&1 || fail "installed but not on PATH"
echo "kcat: $(kcat -V 2>&1 | sed -n 4p)"
