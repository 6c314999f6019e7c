"""The README's "Running a cluster" walk-through runs as written against a database the
test starts: three brokers, a topic written through one and read through another,
then ``slipstream cluster status`` (``slipstream`` is this checkout's CLI; the
database URL and the ports 9092-9094 are swapped for the test's)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slipstream.testing.ports import free_port

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "postgresql://slipstream:secret@db:5432/kafka"


def section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("## Running a cluster")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", text[start:end], re.S)


def test_running_a_cluster_walkthrough(tmp_path: Path, postgres_url: str) -> None:
    ports = {str(default): str(free_port()) for default in (9092, 9093, 9094)}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "slipstream"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m slipstream "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))

    def localize(code: str) -> str:
        assert README_URL in code or "slipstream serve" not in code
        code = code.replace(README_URL, postgres_url)
        for default, port in ports.items():
            code = re.sub(rf"(?<=[ :]){default}\b", port, code)
        return code

    start, use = section_blocks()
    # The first block starts the brokers in the background and exports the URL the
    # second one's `cluster status` reads: run both in one shell, after the brokers are up.
    brokers = subprocess.Popen(
        ["bash", "-e", "-c", localize(start) + "\nwait"], cwd=tmp_path, env=env, start_new_session=True
    )
    try:
        for n in (1, 2, 3):
            _wait_for_log(tmp_path / f"broker-{n}.log", "slipstream broker listening", brokers)
        done = subprocess.run(
            ["bash", "-e", "-c", localize(start.split("\n")[0]) + "\n" + localize(use)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    finally:
        os.killpg(brokers.pid, signal.SIGKILL)
        brokers.wait(10)
    out = done.stdout
    consumed = out[out.index("created topic orders") : out.index("BROKERS")].splitlines()[1:]
    assert sorted(consumed) == ["k1\thello", "k2\tworld"]  # written through the second, read through the third
    status = out[out.index("BROKERS") :]
    live = re.findall(r"^([123])\s+live\s+\d+\s+\d+\s+PLAINTEXT://127\.0\.0\.1:(\d+)$", status, re.M)
    assert sorted(live) == [(str(n), ports[str(default)]) for n, default in ((1, 9092), (2, 9093), (3, 9094))]
    leaders = re.findall(r"^orders\s+(\d)\s+([123])\s+\d+$", status, re.M)
    assert [p for p, _ in leaders] == [str(p) for p in range(6)]
    assert {node for _, node in leaders} == {"1", "2", "3"}  # spread over the three
    assert "GROUP COORDINATORS" in status


def _wait_for_log(path: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{path.name}: no {text!r}:\n{path.read_text(errors='replace') if path.exists() else ''}")
