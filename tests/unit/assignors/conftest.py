"""The Java client's assignors as an oracle (tests marked ``java``).

``java/AssignorOracle.java`` is compiled once per source/jar version under
``.tools/java/build`` (``make java-peer`` fetches the jars; set
SLIPSTREAM_JAVA_JARS to use others) and runs as one JVM per test session.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from assignor_java import JavaAssignors

from slipstream.testing.peers import missing_peer

REPO_ROOT = Path(__file__).resolve().parents[3]
JAVA_SRC = Path(__file__).resolve().parent / "java" / "AssignorOracle.java"
JARS = ("kafka-clients.jar", "slf4j-api.jar")


@pytest.fixture(scope="session")
def java_assignors() -> Iterator[JavaAssignors]:
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        missing_peer("java/javac not on PATH")
    assert java is not None and javac is not None
    jar_dir = Path(os.environ.get("SLIPSTREAM_JAVA_JARS", REPO_ROOT / ".tools" / "java"))
    jars = [jar_dir / j for j in JARS]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        missing_peer(f"kafka-clients jars missing ({', '.join(missing)}); run `make java-peer`")
    digest = hashlib.sha256(JAVA_SRC.read_bytes())
    for j in jars:
        digest.update(f"{j.name}:{j.stat().st_size}".encode())
    build = jar_dir / "build" / ("assignors-" + digest.hexdigest()[:16])
    classpath = os.pathsep.join([str(build), *map(str, jars)])
    if not (build / "AssignorOracle.class").is_file():
        tmp = build.with_name(build.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        res = subprocess.run(
            [javac, "-nowarn", "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp), str(JAVA_SRC)],
            capture_output=True, text=True, timeout=120,
        )
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"javac failed:\n{res.stdout}\n{res.stderr}")
        try:
            tmp.rename(build)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    oracle = JavaAssignors([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath, "AssignorOracle"])
    try:
        yield oracle
    finally:
        oracle.close()
