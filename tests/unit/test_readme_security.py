"""The README's "Securing a broker" walk-through runs as written, in a fresh directory.

Its sh blocks run through bash (``slipstream`` is this checkout's CLI; the ports
9092-9094 are swapped for free ones); the block that is only ``slipstream serve``
is started in the background; then the Python example must deliver over SASL_SSL.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slipstream.testing.ports import free_port

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> list[tuple[str, str]]:
    text = README.read_text()
    start = text.index("## Securing a broker")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```(sh|python)\n(.*?)```", text[start:end], re.S)


def test_securing_a_broker_walkthrough(tmp_path: Path) -> None:
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
        for default, port in ports.items():
            code = re.sub(rf"(?<=:){default}\b", port, code)
        return code

    blocks = section_blocks()
    assert [kind for kind, _ in blocks] == ["sh", "sh", "sh", "python"]
    broker: subprocess.Popen[bytes] | None = None
    outputs: list[str] = []
    try:
        for kind, code in blocks:
            code = localize(code)
            if kind == "sh" and code.strip().startswith("slipstream serve"):
                log = open(tmp_path / "broker.log", "wb")  # noqa: SIM115 (closed with the process)
                broker = subprocess.Popen(["bash", "-c", "exec " + code.strip()], cwd=tmp_path, env=env,
                                          stdout=log, stderr=subprocess.STDOUT)
                _wait_for_port(int(ports["9093"]), broker, tmp_path / "broker.log")
                continue
            command = ["bash", "-e", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
            done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{kind} block failed:\n{code}\n{done.stdout}\n{done.stderr}"
            outputs.append(done.stdout)
    finally:
        if broker is not None:
            broker.kill()
            broker.wait(10)
    users = outputs[1]
    assert re.search(r"^admin\s+SCRAM-SHA-256", users, re.M) and re.search(r"^alice\s+SCRAM-SHA-256", users, re.M)
    assert "created topic payments" in users
    # The ACLs given to alice are listed: Write (her produce below needs it) and Read.
    assert re.search(r"^Topic:payments\s+LITERAL\s+User:alice\s+\*\s+Write\s+ALLOW", users, re.M)
    assert re.search(r"^Topic:payments\s+LITERAL\s+User:alice\s+\*\s+Read\s+ALLOW", users, re.M)
    assert outputs[2].strip() == "delivered over SASL_SSL"
    assert b"admin-secret" not in (tmp_path / "data" / "scram-credentials.json").read_bytes()
    assert b"User:alice" in (tmp_path / "data" / "acls.json").read_bytes()


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"broker exited:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"broker did not listen on {port}:\n{log.read_text()}")
