"""Fixtures for the conformance suite: a broker process, the Java driver, kcat.

The broker runs as a real subprocess (``python -m slipstream serve``) on a free
port with its own data dir, so the suite exercises exactly what a user runs and
can ``kill -9`` it. Set SLIPSTREAM_CONFORMANCE_BROKER_CMD to a command template
with ``{port}`` and ``{data_dir}`` to run the same tests against another
Kafka-compatible broker (e.g. to check a test against a reference peer).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_helpers import JavaDriver

from slipstream.testing.broker_process import (
    CONSUMER_BROKER_ARGS,
    GROUP_BROKER_ARGS,
    BrokerProcess,
    running_broker,
)
from slipstream.testing.peers import compiled_java_peer, missing_peer

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java" / "SlipstreamDriver.java"
JAVA_JARS = ("kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process per test module."""
    yield from running_broker(tmp_path_factory.mktemp("broker"))


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own (for tests that kill it)."""
    yield from running_broker(tmp_path)


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own that accepts session timeouts down to 1 s."""
    yield from running_broker(tmp_path, GROUP_BROKER_ARGS)


@pytest.fixture
def consumer_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own with short consumer-group sessions (3 s)."""
    yield from running_broker(tmp_path, CONSUMER_BROKER_ARGS)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    for name in ("broker", "fresh_broker", "group_broker", "consumer_broker", "no_migration_broker"):
        b = getattr(item, "funcargs", {}).get(name)
        if isinstance(b, BrokerProcess):
            report.sections.append((f"broker log tail ({name}, {b.log_path})", b.log_tail()))


# ---- peers ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def java_driver() -> JavaDriver:
    """The Java driver, compiled once per source/jar version under .tools/java/build."""
    java, classpath = compiled_java_peer(JAVA_SRC, JAVA_JARS, REPO_ROOT / ".tools" / "java")
    return JavaDriver(java=java, classpath=classpath)


@pytest.fixture(scope="session")
def kcat_bin() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if not path:
        missing_peer("kcat not installed; run `make kcat` (apt-get install kcat)")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def broker_process_class() -> type[BrokerProcess]:
    """BrokerProcess itself, for modules that start brokers of their own configuration."""
    return BrokerProcess
