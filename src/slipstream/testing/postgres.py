"""A throwaway PostgreSQL server for tests and benchmarks: initdb + pg_ctl in a
temporary directory, on a free local port, with trust authentication.

PostgreSQL refuses to run as root, so under root (CI, containers) the data directory
is handed to an unprivileged account (``postgres`` when it exists, else ``nobody``)
and the server tools run through ``runuser``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

_SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/usr/pgsql-*/bin")


def find_postgres_bin() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    for pattern in _SEARCH:
        for candidate in sorted(glob.glob(pattern), reverse=True):  # newest version first
            if (Path(candidate) / "initdb").exists():
                return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> str | None:
    if os.getuid() != 0:
        return None
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
            return user
        except KeyError:
            continue
    raise RuntimeError("running as root and no unprivileged account to run PostgreSQL")


class PostgresServer:
    """``with PostgresServer() as pg: pg.url`` - the ``postgres`` database, user ``slipstream``."""

    def __init__(
        self, bin_dir: Path | None = None, *, fsync: bool = True, settings: dict[str, str] | None = None,
        keep_log: Path | None = None,
    ) -> None:
        """``settings``: more server settings (``-c name=value``), e.g. to preload an extension.
        ``keep_log``: where ``stop`` copies the server's log before it removes the data."""
        found = bin_dir or find_postgres_bin()
        if found is None:
            raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.bin_dir = found
        self.fsync = fsync
        self.settings = dict(settings or {})
        self.keep_log = keep_log
        self.port = 0
        self._root: Path | None = None
        self._user = _run_as()

    @property
    def url(self) -> str:
        return f"postgresql://slipstream@127.0.0.1:{self.port}/postgres"

    def _command(self, *args: str) -> list[str]:
        if self._user is None:
            return list(args)
        return ["runuser", "-u", self._user, "--", *args]

    def start(self) -> PostgresServer:
        # Under root the server's account must reach the directory: TMPDIR may be a
        # private one (e.g. under /root), /tmp is traversable by everyone.
        parent = "/tmp" if self._user is not None and os.path.isdir("/tmp") else None
        self._root = Path(tempfile.mkdtemp(prefix="slipstream-pg-", dir=parent))
        data, sockets = self._root / "data", self._root / "sock"
        sockets.mkdir()
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            for path in (self._root, sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            self._command(str(self.bin_dir / "initdb"), "-D", str(data), "-A", "trust",
                          "-U", "slipstream", "-E", "UTF8", "--no-sync"),
            check=True, capture_output=True,
        )  # fmt: skip
        self.port = _free_port()
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server on its data directory and port (after ``start`` or ``halt``)."""
        assert self._root is not None, "start() first"
        options = (
            f"-p {self.port} -k {self._root / 'sock'} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200"
        ) + "".join(f" -c {name}={value}" for name, value in self.settings.items())
        subprocess.run(
            self._command(str(self.bin_dir / "pg_ctl"), "-D", str(self._root / "data"), "-o", options,
                          "-l", str(self._root / "server.log"), "-w", "-t", "60", "start"),
            check=True, capture_output=True,
        )  # fmt: skip

    def halt(self, mode: str = "fast") -> None:
        """Stop the server but keep its data directory (``resume`` starts it again):
        ``fast`` ends every session and aborts open transactions, ``immediate`` is a crash."""
        assert self._root is not None, "start() first"
        subprocess.run(
            self._command(str(self.bin_dir / "pg_ctl"), "-D", str(self._root / "data"),
                          "-m", mode, "-w", "-t", "60", "stop"),
            check=True, capture_output=True,
        )  # fmt: skip

    def stop(self) -> None:
        if self._root is None:
            return
        subprocess.run(
            self._command(str(self.bin_dir / "pg_ctl"), "-D", str(self._root / "data"),
                          "-m", "immediate", "-w", "stop"),
            capture_output=True,
        )  # fmt: skip
        if self.keep_log is not None:
            with contextlib.suppress(OSError):  # no log if the server never started
                shutil.copyfile(self._root / "server.log", self.keep_log)
        shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    def pause(self) -> None:
        """SIGSTOP the server and its backends: connections stay open and hang, as with a
        database host cut off by the network (``unpause`` resumes it)."""
        for pid in self.server_pids():
            os.kill(pid, signal.SIGSTOP)

    def unpause(self) -> None:
        for pid in self.server_pids():
            os.kill(pid, signal.SIGCONT)

    def server_pids(self) -> list[int]:
        assert self._root is not None, "start() first"
        postmaster = int((self._root / "data" / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
        return [postmaster, *map(int, children)]

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until_accepting(url: str, timeout_s: float = 10.0) -> None:
    """Block until a TCP connection to the URL's port succeeds (for scripts)."""
    host_port = url.split("@", 1)[-1].split("/", 1)[0]
    host, _, port = host_port.partition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(port or 5432)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_database_counter = 0


def fresh_database(server_url: str) -> str:
    """An empty namespace on the server at ``server_url``: a new schema, selected by the
    returned URL's ``search_path`` (much faster than CREATE DATABASE)."""
    import asyncio

    import asyncpg

    global _database_counter
    _database_counter += 1
    name = f"slipstream_{os.getpid()}_{_database_counter}"

    async def create() -> None:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute(f'CREATE SCHEMA "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    return f"{server_url}?search_path={name}"
