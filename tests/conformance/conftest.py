"""Fixtures for the conformance suite: a broker process, the Java driver, kcat.

The broker runs as a real subprocess (``python -m slipstream serve``) on a free
port with its own data dir, so the suite exercises exactly what a user runs and
can ``kill -9`` it. Set SLIPSTREAM_CONFORMANCE_BROKER_CMD to a command template
with ``{port}`` and ``{data_dir}`` to run the same tests against another
Kafka-compatible broker (e.g. to check a test against a reference peer).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_helpers import JavaDriver

from slipstream.testing.peers import missing_peer
from slipstream.testing.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java" / "SlipstreamDriver.java"
JAVA_JARS = ("kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar")



class BrokerProcess:
    """A broker subprocess on a fixed port and data dir that can be killed and restarted."""

    def __init__(self, data_dir: Path, log_path: Path, port: int | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = port or free_port()
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        template = os.environ.get("SLIPSTREAM_CONFORMANCE_BROKER_CMD")
        if template:
            return shlex.split(template.format(port=self.port, data_dir=self.data_dir))
        return [
            sys.executable, "-m", "slipstream", "serve",
            "--host", self.host,
            "--port", str(self.port),
            "--data-dir", str(self.data_dir),
            "--auto-create-topics", "true",
            "--default-partitions", "3",
            *self.extra_args,
        ]

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {shlex.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.data_dir.parent),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with code {self.proc.returncode} during start-up:\n{self.log_tail()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError(
                    f"broker did not accept connections on {self.bootstrap} within {timeout}s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL the broker process (no clean shutdown) and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def restart(self, timeout: float = 10.0) -> None:
        """kill -9, then start again on the same port and data dir."""
        self.kill9()
        self.start(timeout=timeout)

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def _make_broker(tmp: Path, extra_args: tuple[str, ...] = ()) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp / "data", tmp / "broker.log", extra_args=extra_args)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process per test module."""
    yield from _make_broker(tmp_path_factory.mktemp("broker"))


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own (for tests that kill it)."""
    yield from _make_broker(tmp_path)


# Group tests use short session timeouts (a killed member expires in seconds), which
# Kafka's default group.min.session.timeout.ms (6 s) would refuse.
GROUP_BROKER_ARGS = ("--set", "group.min.session.timeout.ms=1000")


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own that accepts session timeouts down to 1 s."""
    yield from _make_broker(tmp_path, GROUP_BROKER_ARGS)


# Consumer (KIP-848) groups: the broker owns their session and heartbeat interval, so the
# test broker shortens them (a killed member expires in 3 s, as the classic tests' members).
CONSUMER_BROKER_ARGS = (
    *GROUP_BROKER_ARGS,
    "--set", "group.consumer.min.session.timeout.ms=1000",
    "--set", "group.consumer.session.timeout.ms=3000",
    "--set", "group.consumer.min.heartbeat.interval.ms=100",
    "--set", "group.consumer.heartbeat.interval.ms=500",
)


@pytest.fixture
def consumer_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process of the test's own with short consumer-group sessions (3 s)."""
    yield from _make_broker(tmp_path, CONSUMER_BROKER_ARGS)


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
    for name in ("broker", "fresh_broker", "group_broker"):
        b = getattr(item, "funcargs", {}).get(name)
        if isinstance(b, BrokerProcess):
            report.sections.append((f"broker log tail ({name}, {b.log_path})", b.log_tail()))


# ---- peers ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def java_driver() -> JavaDriver:
    """The Java driver, compiled once per source/jar version under .tools/java/build."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        missing_peer("java/javac not on PATH")
    jar_dir = Path(os.environ.get("SLIPSTREAM_JAVA_JARS", REPO_ROOT / ".tools" / "java"))
    jars = [jar_dir / j for j in JAVA_JARS]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        missing_peer(f"kafka-clients jars missing ({', '.join(missing)}); run `make java-peer`")
    digest = hashlib.sha256(JAVA_SRC.read_bytes())
    for j in jars:
        digest.update(f"{j.name}:{j.stat().st_size}".encode())
    build = jar_dir / "build" / digest.hexdigest()[:16]
    classpath = os.pathsep.join([str(build), *map(str, jars)])
    if not (build / "SlipstreamDriver.class").is_file():
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
