"""The Java client's assignors as an oracle (tests marked ``java``).

``java/AssignorOracle.java`` is compiled once per source/jar version under
``.tools/java/build`` (``make java-peer`` fetches the jars; set
SLIPSTREAM_JAVA_JARS to use others) and runs as one JVM per test session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from assignor_java import JavaAssignors

from slipstream.testing.peers import compiled_java_peer

REPO_ROOT = Path(__file__).resolve().parents[3]
JAVA_SRC = Path(__file__).resolve().parent / "java" / "AssignorOracle.java"
JARS = ("kafka-clients.jar", "slf4j-api.jar")


@pytest.fixture(scope="session")
def java_assignors() -> Iterator[JavaAssignors]:
    java, classpath = compiled_java_peer(JAVA_SRC, JARS, REPO_ROOT / ".tools" / "java", "assignors-")
    oracle = JavaAssignors([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath, "AssignorOracle"])
    try:
        yield oracle
    finally:
        oracle.close()
