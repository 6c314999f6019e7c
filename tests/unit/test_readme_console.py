"""The README's "The web console" walk-through runs as written, in a fresh directory.

The block that is only ``slipstream serve`` starts in the background (ports 9092 and
9644 swapped for free ones, ``slipstream`` is this checkout's CLI), the other sh block
runs through bash; then the pages and JSON the section points at must show what it says.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from slipstream.testing.ports import free_port

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("## The web console")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", text[start:end], re.S)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def test_console_walkthrough(tmp_path: Path) -> None:
    ports = {"9092": str(free_port()), "9644": str(free_port())}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "slipstream"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m slipstream "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))

    def localize(code: str) -> str:
        for default, port in ports.items():
            code = re.sub(rf"(?<=[: ]){default}\b", port, code)
        return code

    serve, demo = (localize(block) for block in section_blocks())
    assert serve.strip().startswith("slipstream serve")
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        broker = subprocess.Popen(["bash", "-c", "exec " + serve.strip()], cwd=tmp_path, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        _wait_for_port(int(ports["9092"]), broker, log_path)
        done = subprocess.run(["bash", "-e", "-c", demo], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, f"{demo}\n{done.stdout}\n{done.stderr}"
        assert "produced 20000 records to clicks" in done.stderr
        assert "100%" in done.stderr and "20,000 records" in done.stderr  # the progress line, asked for
        rows = [line.split() for line in done.stdout.splitlines() if line.startswith("clicks ")]
        assert sum(int(r[4]) for r in rows) == 19_500  # the lag the section promises

        base = f"http://127.0.0.1:{ports['9644']}"
        assert b"/console/console.js" in get(base + "/")
        group = json.loads(get(base + "/api/groups/dashboard"))
        assert (group["state"], group["lag"]) == ("Empty", 19_500)
        values = []
        for partition in range(3):
            page = json.loads(get(f"{base}/api/topics/clicks/records?partition={partition}&offset=0&limit=5"))
            values += [json.loads(r["value"]["text"]) for r in page["records"]]
        assert values and all(set(v) == {"click"} for v in values)
    finally:
        broker.terminate()
        broker.wait(10)


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the broker did not listen on {port}:\n{log.read_text()}")
