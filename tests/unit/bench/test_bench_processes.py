"""bench/harness.py: what the bench starts dies with it, however the bench dies - a broker
left behind, SIGSTOPped between its turns, would keep its port, its memory and its data."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"

# Processes are watched through /proc (psutil is the bench extra's, not the tests').
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")

# A stand-in broker: says it is up (so it has exec'd past the wrapper), then sleeps.
SLEEPER = "import time; print('up', flush=True); time.sleep(600)"
# One that handles SIGTERM, as a broker shutting down cleanly does: stopped, it acts on it
# only once continued (an unhandled SIGTERM kills even a stopped process).
SLEEPER_ENDING_ON_SIGTERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); "
    "print('up', flush=True); time.sleep(600)"
)

# The bench, run as its own process so the test can SIGKILL it: starts the sleeper through
# the harness, SIGSTOPs it as between its turns, prints its pid, and waits to be killed.
BENCH_WITH_STOPPED_BROKER = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import harness

    work = Path(sys.argv[2])
    spec = harness.BrokerSpec(
        "sleeper", "sleeper", "-", "sleeps", lambda _port, _work: [sys.executable, "-c", sys.argv[3]]
    )
    broker = harness.BrokerProcess(spec, 0, work, work / "sleeper.log", dict(os.environ))
    for _ in range(3000):
        if "up" in broker.log_path.read_text():
            break
        time.sleep(0.01)
    os.killpg(broker.pid, signal.SIGSTOP)
    stat = Path(f"/proc/{broker.pid}/stat")
    for _ in range(3000):
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            break
        time.sleep(0.01)
    print(broker.pid, flush=True)
    signal.pause()
    """
)

# The bench with a load generator (``run_child``) and a Slipstream broker
# (``slipstream_broker``) running: prints their pids and waits to be killed.
BENCH_WITH_CHILD_AND_SLIPSTREAM = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import harness

    work = Path(sys.argv[2])
    script = work / "sleeper.py"
    script.write_text(sys.argv[3])
    child = harness.run_child(str(script), [], work)
    child.stdout.readline()
    with harness.slipstream_broker(work, "--storage", "memory") as broker:
        print(child.pid, broker.pid, flush=True)
        signal.pause()
    """
)

# The bench with a process it did not tie to itself, in a session of its own (as pg_ctl
# leaves PostgreSQL's postmaster), watched by ``signalled_if_bench_dies``: with argv[3]
# "hold" until the bench is killed, with "leave" only through the block, then the bench
# waits to be killed.
BENCH_WITH_WATCHED_PROCESS = textwrap.dedent(
    """
    import signal, subprocess, sys
    sys.path.insert(0, sys.argv[1])
    import harness

    other = subprocess.Popen(
        [sys.executable, "-c", sys.argv[2]], stdout=subprocess.PIPE, start_new_session=True
    )
    other.stdout.readline()
    with harness.signalled_if_bench_dies(other.pid, signal.SIGTERM):
        if sys.argv[3] == "hold":
            print(other.pid, flush=True)
            signal.pause()
    print(other.pid, flush=True)
    signal.pause()
    """
)


def load_harness(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/harness.py as a module, without putting bench/ (generic module names) on sys.path."""
    spec = importlib.util.spec_from_file_location("bench_harness", BENCH / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, T: stopped, Z: zombie...); None once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def gone(pid: int) -> bool:
    """The process has ended (a zombie nobody has reaped yet counts as ended)."""
    return state(pid) in (None, "Z", "X")


def ends(pid: int) -> bool:
    """Whether the process ends, polled a generous number of times (no bound on speed)."""
    for _ in range(3000):
        if gone(pid):
            return True
        time.sleep(0.01)
    return gone(pid)


def kill_left_over(pid: int) -> None:
    if not gone(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start_bench(script: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    bench = subprocess.Popen(
        [sys.executable, "-c", script, str(BENCH), *args], stdout=subprocess.PIPE, text=True
    )
    assert bench.stdout is not None
    line = bench.stdout.readline().split()
    assert line, f"the bench script failed (exit {bench.wait()})"
    return bench, line


def kill(bench: subprocess.Popen[str]) -> None:
    bench.send_signal(signal.SIGKILL)
    bench.wait()


def setpriv_sets_parent_death_signal() -> bool:
    setpriv = shutil.which("setpriv")
    if sys.platform != "linux" or setpriv is None:
        return False
    usage = subprocess.run([setpriv, "--help"], capture_output=True, text=True, check=False)
    return "--pdeathsig" in usage.stdout


@pytest.mark.skipif(
    not setpriv_sets_parent_death_signal(),
    reason="no setpriv with --pdeathsig (Linux): only the exit and signal handlers stop brokers",
)
def test_a_stopped_broker_dies_with_a_bench_killed_by_sigkill(tmp_path: Path) -> None:
    bench, (pid_text,) = start_bench(BENCH_WITH_STOPPED_BROKER, str(tmp_path), SLEEPER)
    pid = int(pid_text)
    try:
        assert state(pid) == "T"
        kill(bench)
        assert ends(pid)
    finally:
        kill(bench)
        kill_left_over(pid)


@pytest.mark.skipif(
    not setpriv_sets_parent_death_signal(),
    reason="no setpriv with --pdeathsig (Linux): only the exit and signal handlers stop them",
)
def test_a_load_generator_and_a_slipstream_broker_die_with_a_bench_killed_by_sigkill(
    tmp_path: Path,
) -> None:
    bench, pid_texts = start_bench(BENCH_WITH_CHILD_AND_SLIPSTREAM, str(tmp_path), SLEEPER)
    pids = [int(text) for text in pid_texts]
    try:
        assert not any(gone(pid) for pid in pids)
        kill(bench)
        assert all(ends(pid) for pid in pids)
    finally:
        kill(bench)
        for pid in pids:
            kill_left_over(pid)


def test_a_watched_process_gets_its_signal_when_the_bench_is_killed() -> None:
    bench, (pid_text,) = start_bench(BENCH_WITH_WATCHED_PROCESS, SLEEPER, "hold")
    pid = int(pid_text)
    try:
        assert not gone(pid)
        kill(bench)
        assert ends(pid)
    finally:
        kill(bench)
        kill_left_over(pid)


def test_a_process_is_no_longer_watched_once_the_block_is_left() -> None:
    bench, (pid_text,) = start_bench(BENCH_WITH_WATCHED_PROCESS, SLEEPER, "leave")
    pid = int(pid_text)
    try:
        kill(bench)
        # The watcher is gone with the block: nothing is left to signal the process.
        assert not gone(pid)
    finally:
        kill(bench)
        kill_left_over(pid)


def test_stop_ends_a_stopped_broker_with_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = load_harness(monkeypatch)
    spec = harness.BrokerSpec(
        "sleeper", "sleeper", "-", "sleeps",
        lambda _port, _work: [sys.executable, "-c", SLEEPER_ENDING_ON_SIGTERM],
    )  # fmt: skip
    broker = harness.BrokerProcess(spec, 0, tmp_path, tmp_path / "sleeper.log", dict(os.environ))
    try:
        for _ in range(3000):
            if "up" in broker.log_path.read_text() or broker.popen.poll() is not None:
                break
            time.sleep(0.01)
        os.killpg(broker.pid, signal.SIGSTOP)
        broker.stop()
        # Its SIGTERM handler ended it, not the SIGKILL that follows when it does not act.
        assert broker.popen.returncode == 143
    finally:
        if broker.popen.poll() is None:
            broker.popen.kill()
            broker.popen.wait()
