"""A Slipstream broker as a real subprocess, for tests that kill and restart it.

``python -m slipstream serve`` on a free port with its own data dir, so a test
exercises exactly what a user runs and can ``kill -9`` it. Set
SLIPSTREAM_CONFORMANCE_BROKER_CMD to a command template with ``{port}`` and
``{data_dir}`` to run the same tests against another Kafka-compatible broker.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .parent_death import ParentDeathWatch
from .ports import free_port


class BrokerProcess:
    """A broker subprocess on a fixed port and data dir that can be killed and restarted."""

    def __init__(self, data_dir: Path, log_path: Path, port: int | None = None,
                 extra_args: tuple[str, ...] = (), *, test_defaults: bool = True) -> None:
        """``test_defaults``: auto-create topics with 3 partitions (what the tests expect);
        benchmarks turn it off to run the broker with exactly ``extra_args``."""
        self.data_dir = data_dir
        self.test_defaults = test_defaults
        self.log_path = log_path
        self.port = port or free_port()
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        # Kills the broker if the test process is killed (it runs in its own session).
        self._watch: ParentDeathWatch | None = None
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
            *(("--auto-create-topics", "true", "--default-partitions", "3") if self.test_defaults else ()),
            *self.extra_args,
        ]

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._release_watch()  # of a run that ended by itself
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
        self._watch = ParentDeathWatch(self.proc.pid, process_group=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self._release_watch()
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
            self._release_watch()  # it ended by itself
            return
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._release_watch()

    def restart(self, timeout: float = 10.0) -> None:
        """kill -9, then start again on the same port and data dir."""
        self.kill9()
        self.start(timeout=timeout)

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._release_watch()  # it ended by itself
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
        self._release_watch()

    def _release_watch(self) -> None:
        if self._watch is not None:
            self._watch.release()
            self._watch = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def running_broker(tmp: Path, extra_args: tuple[str, ...] = ()) -> Iterator[BrokerProcess]:
    """A started broker in ``tmp`` (data dir and log), stopped when the generator closes."""
    broker = BrokerProcess(tmp / "data", tmp / "broker.log", extra_args=extra_args)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


# Group tests use short session timeouts (a killed member expires in seconds), which
# Kafka's default group.min.session.timeout.ms (6 s) would refuse.
GROUP_BROKER_ARGS = ("--set", "group.min.session.timeout.ms=1000")


# Consumer (KIP-848) groups: the broker owns their session and heartbeat interval, so the
# test broker shortens them (a killed member expires in 3 s, as the classic tests' members).
CONSUMER_BROKER_ARGS = (
    *GROUP_BROKER_ARGS,
    "--set", "group.consumer.min.session.timeout.ms=1000",
    "--set", "group.consumer.session.timeout.ms=3000",
    "--set", "group.consumer.min.heartbeat.interval.ms=100",
    "--set", "group.consumer.heartbeat.interval.ms=500",
)
