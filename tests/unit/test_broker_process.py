"""slipstream.testing.broker_process: the command it runs (tests' defaults or exactly the
caller's flags, as the Spark tests and bench/ use it) and a real start and stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from slipstream.testing.broker_process import BrokerProcess


@pytest.fixture(autouse=True)
def _no_command_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLIPSTREAM_CONFORMANCE_BROKER_CMD", raising=False)


def test_tests_get_auto_created_topics_with_three_partitions(tmp_path: Path) -> None:
    command = BrokerProcess(tmp_path / "data", tmp_path / "log", port=1234).command()
    assert command[-4:] == ["--auto-create-topics", "true", "--default-partitions", "3"]
    assert command[command.index("--port"):command.index("--port") + 2] == ["--port", "1234"]


def test_without_test_defaults_the_broker_runs_with_exactly_the_given_flags(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "log", port=1234, extra_args=("--storage", "memory"), test_defaults=False
    )
    command = broker.command()
    assert "--auto-create-topics" not in command and "--default-partitions" not in command
    assert command[-2:] == ["--storage", "memory"]
    assert command[command.index("--data-dir") + 1] == str(tmp_path / "data")


def test_start_and_stop(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "broker.log", extra_args=("--storage", "memory"), test_defaults=False
    )
    broker.start(timeout=30)
    try:
        assert broker.alive()
        with socket.create_connection((broker.host, broker.port), timeout=5):
            pass
    finally:
        broker.stop()
    assert not broker.alive()
    assert "--storage memory" in broker.log_text()  # the start line names the command


# A test process that starts a broker from a thread (as some tests do, where the kernel's
# parent-death signal would not hold), prints its pid and waits to be killed.
TEST_PROCESS_WITH_BROKER = textwrap.dedent(
    """
    import signal, sys, threading
    from pathlib import Path
    from slipstream.testing.broker_process import BrokerProcess

    work = Path(sys.argv[1])
    broker = BrokerProcess(work / "data", work / "broker.log", extra_args=("--storage", "memory"))
    starter = threading.Thread(target=broker.start, kwargs={"timeout": 30})
    starter.start()
    starter.join()
    print(broker.pid, flush=True)
    signal.pause()
    """
)


def _gone(pid: int) -> bool:
    """Ended (a zombie nobody reaped yet counts): /proc's state letter, or no entry."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _ends(pid: int) -> bool:
    for _ in range(3000):  # a generous number of polls; no bound on speed
        if _gone(pid):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_broker_started_from_a_thread_dies_with_a_test_process_killed_by_sigkill(
    tmp_path: Path,
) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", TEST_PROCESS_WITH_BROKER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    line = runner.stdout.readline().strip()
    assert line, f"the test process failed (exit {runner.wait()})"
    pid = int(line)
    try:
        assert not _gone(pid)
        runner.kill()  # SIGKILL: no handler, no finally
        runner.wait()
        # Its own session kept Ctrl-C and the runner's group signals from it: only the watch ends it.
        assert _ends(pid)
    finally:
        runner.kill()
        runner.wait()
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("ended_by_itself", [False, True], ids=["stopped", "ended-by-itself"])
def test_stopping_a_broker_ends_its_watch(tmp_path: Path, ended_by_itself: bool) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "broker.log", extra_args=("--storage", "memory"), test_defaults=False
    )
    broker.start(timeout=30)
    watch = broker._watch
    assert watch is not None and watch.watching
    if ended_by_itself:  # as a broker that crashed: stop() finds it gone
        os.kill(broker.pid, signal.SIGKILL)
        assert _ends(broker.pid)
    broker.stop()
    # Ended before anything else could take the broker's pid, and not left to fire later.
    assert not watch.watching and broker._watch is None
