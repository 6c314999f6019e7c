"""The measurements of broker_throughput.py: process start-up and memory after a write,
one broker at a time; produce/consume throughput with each broker's CPU and peak RSS,
every broker up at once and taking turns (``measure_throughput``). Each fills a
``BrokerResult``; broker_report.py renders them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    HOST,
    BenchError,
    BrokerProcess,
    BrokerSpec,
    RssSampler,
    child_env,
    cpu_of,
    create_topics,
    free_port,
    log,
    quiet_logger,
)
from produce_consume import WARMUP_TOPIC, Rate, consume_phase, probe_idempotence, produce_phase

DEFAULT_VALUE_SIZES = (100, 1024)
DEFAULT_PARTITION_COUNTS = (1, 8)
RSS_TOPIC = "bench-rss"
RSS_VALUE_SIZE = 1024
# The stub of bench/stub_broker.py: a column of its own, never a peer in the ratios.
CEILING = "ceiling"


def ceiling_spec() -> BrokerSpec:
    stub = str(Path(__file__).with_name("stub_broker.py"))
    return BrokerSpec(
        key=CEILING,
        label="ceiling (stub)",
        version="-",
        describe="`bench/stub_broker.py`: answers Produce by counting records and"
        " Fetch with made-up batches of the same offsets; stores and checks nothing",
        command=lambda port, _work: [sys.executable, stub, "--host", HOST, "--port", str(port)],
    )


@dataclass
class Cell:
    """One test on one broker: every run's rate and broker CPU; the median is reported."""

    rates: list[Rate] = field(default_factory=list)
    # Broker CPU seconds (user + system) during each run's timed part, when measured.
    cpu_seconds: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def rate(self) -> Rate | None:
        """The median run by msg/s (the lower middle one for an even count: a real run)."""
        if not self.rates:
            return None
        ranked = sorted(self.rates, key=lambda r: r.msgs_per_s)
        return ranked[(len(ranked) - 1) // 2]

    @property
    def spread(self) -> tuple[float, float] | None:
        """The slowest and the fastest run, msg/s: how far one run moves."""
        if not self.rates:
            return None
        rates = [r.msgs_per_s for r in self.rates]
        return min(rates), max(rates)

    @property
    def bytes_per_fetch(self) -> float | None:
        """Median over the runs of the bytes each Fetch brought (consume tests only)."""
        per_run = [r.bytes_per_fetch for r in self.rates if r.bytes_per_fetch is not None]
        return statistics.median(per_run) if per_run else None

    @property
    def fetches(self) -> float | None:
        """Median over the runs of the Fetch requests the consumer sent."""
        per_run = [r.fetches for r in self.rates if r.fetches is not None]
        return statistics.median(per_run) if per_run else None

    @property
    def cpu_per_million(self) -> float | None:
        """Median broker CPU seconds per million records over the runs."""
        per_run = [
            cpu / rate.messages * 1_000_000
            for cpu, rate in zip(self.cpu_seconds, self.rates, strict=False)
            if rate.messages
        ]
        return statistics.median(per_run) if per_run else None


@dataclass
class BrokerResult:
    spec: BrokerSpec
    idempotence_note: str | None = None
    cells: dict[tuple[str, int, int], Cell] = field(default_factory=dict)
    startup: list[float] = field(default_factory=list)
    startup_no_pyc: list[float] = field(default_factory=list)
    startup_error: str | None = None
    peak_rss: int | None = None
    cpu_seconds: float | None = None  # over its own turns of the throughput tests
    busy_seconds: float = 0.0
    # CPU it used through the other brokers' turns (stopped, so none is expected), and
    # how long those turns took.
    idle_cpu_seconds: float = 0.0
    idle_seconds: float = 0.0
    rss_after_write: int | None = None
    anon_after_write: int | None = None
    rss_phase_peak: int | None = None
    rss_error: str | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Options:
    messages: int | None  # None: the per-size default, see count_for()
    rss_messages: int
    startup_runs: int
    embedded_runs: int
    timeout: float
    workdir: Path
    repeat: int = 1
    sizes: tuple[int, ...] = DEFAULT_VALUE_SIZES
    partitions: tuple[int, ...] = DEFAULT_PARTITION_COUNTS
    profile_dir: Path | None = None


def count_for(opts: Options, size: int) -> int:
    """Messages per test: explicit, or about a second's window for the faster brokers on
    this machine (100k x 1 KiB was 0.12-0.5 s, 300k x 100 B 0.25 s, and such windows
    moved with every burst of load): 1M x 100 B, 300k x 1 KiB. Each run's topic is
    deleted once consumed, so a broker holds one run's data at a time."""
    if opts.messages is not None:
        return opts.messages
    return 1_000_000 if size < 512 else 300_000


def each_test(opts: Options) -> Iterator[tuple[str, int, int]]:
    """(operation, value size, partitions) of every test, in the order of the tables' rows."""
    for op in ("produce", "consume"):
        for size in opts.sizes:
            for parts in opts.partitions:
                yield op, size, parts


def topic_name(size: int, partitions: int, run: int) -> str:
    return f"bench-v{size}-p{partitions}-r{run}"


@contextlib.contextmanager
def running(
    spec: BrokerSpec, opts: Options, tag: str, bytecode_cache: bool = True
) -> Iterator[BrokerProcess]:
    work = Path(tempfile.mkdtemp(prefix=f"{spec.key}-{tag}-", dir=opts.workdir))
    env = child_env(opts.workdir, bytecode_cache)
    proc = BrokerProcess(spec, free_port(), work, work / "broker.log", env)
    try:
        proc.wait_ready(30.0)
        yield proc
    finally:
        proc.stop()


def measure_startup(spec: BrokerSpec, opts: Options, result: BrokerResult) -> None:
    try:
        # Run 0 warms the page cache and .pyc files; the stub's start-up is not measured.
        runs = 0 if spec.key == CEILING else opts.startup_runs
        for run in range(runs + 1):
            with running(spec, opts, f"start{run}") as proc:
                if run and proc.ready_after is not None:
                    result.startup.append(proc.ready_after)
        if spec.key == "slipstream":
            for run in range(opts.startup_runs):
                with running(spec, opts, f"nopyc{run}", bytecode_cache=False) as proc:
                    if proc.ready_after is not None:
                        result.startup_no_pyc.append(proc.ready_after)
    except BenchError as exc:
        result.startup_error = str(exc)
        result.errors.append(f"start-up: {exc}")


@dataclass(eq=False)
class Contender:
    """A broker of the throughput tests: its process runs through the whole section."""

    result: BrokerResult
    proc: BrokerProcess
    idempotent: bool
    pauses: bool  # stopped between its turns (not while py-spy records it)
    peak_rss: int = 0
    out: bool = False  # it failed: no more turns


def pause(contender: Contender) -> None:
    """Stop the broker's process group (SIGSTOP) between its turns. Idle is not enough:
    noida-db goes on working for 8-15 s after acknowledging a produce (1M x 100 B or
    100k x 1 KiB), with pauses of a second between bursts; stopped, that work waits for
    its own next turn, as it would have run into its own next test alone on the machine."""
    if contender.pauses:
        _signal_group(contender.proc, signal.SIGSTOP)
        _wait_stopped(contender.proc.pid)


def resume(contender: Contender) -> None:
    if contender.pauses:
        _signal_group(contender.proc, signal.SIGCONT)


def _wait_stopped(pid: int, limit: float = 1.0) -> None:
    """Wait until every thread of the process has stopped: a busy thread runs on until it
    takes the signal, and that CPU would land in the next broker's turn."""
    deadline = time.perf_counter() + limit
    tasks = Path(f"/proc/{pid}/task")
    while time.perf_counter() < deadline:
        try:
            states = [
                (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                for task in tasks.iterdir()
            ]
        except OSError:  # gone, or a thread ended while read: look again
            states = []
            if not tasks.exists():
                return
        if states and all(state in "Tt" for state in states):
            return
        time.sleep(0.001)


def _signal_group(proc: BrokerProcess, sig: signal.Signals) -> None:
    if proc.popen.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)


def turn_order(contenders: list[Contender], round_index: int) -> list[Contender]:
    """The brokers' order in one round: rotated every round, so none always goes first
    (or always last, right after the client has warmed up on the others)."""
    if not contenders:
        return []
    shift = round_index % len(contenders)
    return contenders[shift:] + contenders[:shift]


def measure_throughput(results: list[BrokerResult], opts: Options) -> None:
    """Every broker of ``results`` up at once, stopped but for its turns. For each
    (size, partitions) test and each run, every broker produces in turn, then every broker
    consumes in turn (the order rotated each round): the rates a ratio compares are taken
    seconds apart, so a burst of load on the shared machine hits them alike instead of one
    broker's whole series. A broker that fails sits out the remaining turns."""
    with contextlib.ExitStack() as stack:
        contenders = [
            c for r in results if (c := _start_contender(r, opts, stack)) is not None
        ]
        profiler = None
        if opts.profile_dir is not None:
            ours = next((c for c in contenders if c.result.spec.key == "slipstream"), None)
            if ours is not None:
                profiler = start_profiler(ours.proc.pid, opts.profile_dir)
        try:
            round_index = 0
            for size in opts.sizes:
                for parts in opts.partitions:
                    for c in contenders:
                        if not c.out:  # a failed broker's later cells say "not run"
                            c.result.cells[("produce", size, parts)] = Cell()
                            c.result.cells[("consume", size, parts)] = Cell()
                    for run in range(opts.repeat):
                        order = turn_order(contenders, round_index)
                        round_index += 1
                        for op in ("produce", "consume"):
                            for c in order:
                                if not c.out:
                                    _take_turn(c, contenders, op, size, parts, run, opts)
                        _drop_topic(contenders, topic_name(size, parts, run))
        finally:
            if profiler is not None:
                stop_profiler(profiler)
            for c in contenders:
                resume(c)  # a stopped process would sit on the SIGTERM that ends it
                peak = max(c.peak_rss, c.proc.kernel_peak_rss() or 0)
                c.result.peak_rss = peak or None
            for r in results:
                for key in each_test(opts):
                    r.cells.setdefault(key, Cell(error="not run"))


def _start_contender(
    result: BrokerResult, opts: Options, stack: contextlib.ExitStack
) -> Contender | None:
    """Start the broker, create every topic of the tests, find whether it takes idempotent
    producers; None (and the error recorded) if any of that fails."""
    spec = result.spec
    try:
        proc = stack.enter_context(running(spec, opts, "throughput"))
        topics = {WARMUP_TOPIC: 1}
        for size in opts.sizes:
            for parts in opts.partitions:
                for run in range(opts.repeat):
                    topics[topic_name(size, parts, run)] = parts
        create_topics(proc.bootstrap, topics, 30.0)
        reason = probe_idempotence(proc.bootstrap, 30.0)
    except BenchError as exc:
        result.errors.append(f"throughput set-up: {exc}")
        log(f"{spec.label}: FAILED: {exc}")
        return None
    if reason is not None:
        result.idempotence_note = reason
        log(f"{spec.label}: idempotent produce failed ({reason}); using acks=all only")
    result.cpu_seconds = 0.0
    contender = Contender(result, proc, idempotent=reason is None, pauses=opts.profile_dir is None)
    pause(contender)
    return contender


def _take_turn(
    turn: Contender,
    everyone: list[Contender],
    op: str,
    size: int,
    parts: int,
    run: int,
    opts: Options,
) -> None:
    """One timed phase on one broker, resumed for it; the CPU the stopped others use
    meanwhile is counted too (none, unless pausing is off or failed)."""
    result, proc = turn.result, turn.proc
    cell = result.cells[(op, size, parts)]
    others = {c: cpu_of(c.proc.pid) for c in everyone if c is not turn}
    what = f"{size} B x {parts}p, run {run + 1}/{opts.repeat}"
    count = count_for(opts, size)
    topic = topic_name(size, parts, run)
    resume(turn)
    began = time.perf_counter()
    sampler: RssSampler | None = None
    try:
        sampler = RssSampler(proc.pid)  # fails if the broker died since its last turn
        cpu_start = sampler.cpu_seconds()
        if op == "produce":
            rate = produce_phase(
                proc.bootstrap, topic, parts, size, count, turn.idempotent, opts.timeout
            )
        else:
            rate = consume_phase(
                proc.bootstrap, topic, parts, count, result.spec.consumer_overrides,
                opts.timeout, fetch_stats=True,
            )  # fmt: skip
        cpu_end = sampler.cpu_seconds()
        cell.rates.append(rate)
        _add_cpu(cell, cpu_start, cpu_end)
        if cpu_start is not None and cpu_end is not None:
            result.cpu_seconds = (result.cpu_seconds or 0.0) + cpu_end - cpu_start
        result.busy_seconds += rate.seconds
        log(f"{result.spec.label}: {op} {what}: {rate}")
    except Exception as exc:
        turn.out = True
        cell.error = str(exc)
        if op == "produce":
            result.cells[("consume", size, parts)].error = str(exc)
        error = f"{op} {what}: {_exit_report(proc) or exc}"
        result.errors.append(error)
        log(f"{result.spec.label}: FAILED: {error}")
    finally:
        if sampler is not None:
            turn.peak_rss = max(turn.peak_rss, sampler.stop())
        pause(turn)
        took = time.perf_counter() - began
        for other, before in others.items():
            other.result.idle_cpu_seconds += max(0.0, cpu_of(other.proc.pid) - before)
            other.result.idle_seconds += took


def _drop_topic(contenders: list[Contender], topic: str) -> None:
    """Delete a run's topic on every broker once every broker has consumed it: the
    in-memory peers would otherwise hold every run's records at once (noida-db passed
    9 GB with 5 runs of 1M x 100 B). The stub stores nothing."""
    import confluent_kafka.admin

    for c in contenders:
        if c.result.spec.key == CEILING or c.proc.popen.poll() is not None:
            continue
        config: dict[str, Any] = {"bootstrap.servers": c.proc.bootstrap, "error_cb": quiet_logger}
        admin = confluent_kafka.admin.AdminClient(config)
        resume(c)
        try:
            admin.delete_topics([topic], operation_timeout=30.0)[topic].result(60.0)
        except Exception as exc:  # keep measuring; only the memory grows
            log(f"{c.result.spec.label}: could not delete {topic}: {exc}")
        finally:
            del admin  # its connection closed before the broker stops
            pause(c)


def _add_cpu(cell: Cell, before: float | None, after: float | None) -> None:
    if before is not None and after is not None:
        cell.cpu_seconds.append(after - before)


def _exit_report(proc: BrokerProcess) -> str | None:
    """What to say when the broker died (its exit code and log tail); None if it lives."""
    if proc.popen.poll() is None:
        return None
    return (
        f"{proc.spec.label} exited with code {proc.popen.returncode};"
        f" log tail:\n{proc.log_tail()}"
    )


def start_profiler(pid: int, out_dir: Path) -> list[subprocess.Popen[bytes]]:
    """py-spy on the broker: a flame graph SVG and the raw collapsed stacks, both written
    when stopped (two samplers at 100 Hz each; the SVG is what a reader opens)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(spy, os.X_OK):
        raise SystemExit("--profile needs py-spy (pip install -e '.[bench]')")
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for fmt, name in (("flamegraph", "slipstream-throughput.svg"), ("raw", "slipstream-throughput.txt")):
        cmd = [spy, "record", "-p", str(pid), "-r", "100", "-f", fmt, "-o", str(out_dir / name)]
        procs.append(
            subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
    log(f"profiling Slipstream (pid {pid}) into {out_dir}")
    return procs


def stop_profiler(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def measure_memory(spec: BrokerSpec, opts: Options, result: BrokerResult) -> None:
    """Fresh broker: write rss_messages x 1 KiB, read RSS once settled, then read them back."""
    try:
        with running(spec, opts, "rss") as proc:
            sampler = RssSampler(proc.pid)
            try:
                create_topics(proc.bootstrap, {WARMUP_TOPIC: 1, RSS_TOPIC: 1}, 30.0)
                idempotent = result.idempotence_note is None
                produce_phase(
                    proc.bootstrap, RSS_TOPIC, 1, RSS_VALUE_SIZE, opts.rss_messages,
                    idempotent, opts.timeout,
                )  # fmt: skip
                time.sleep(1.0)
                result.rss_after_write = sampler.current()
                result.anon_after_write = proc.anon_rss()
                consume_phase(
                    proc.bootstrap, RSS_TOPIC, 1, opts.rss_messages, spec.consumer_overrides,
                    opts.timeout,
                )  # fmt: skip
            finally:
                peak = sampler.stop()
                result.rss_phase_peak = max(peak, proc.kernel_peak_rss() or 0) or None
    except Exception as exc:
        result.rss_error = str(exc)
        result.errors.append(f"memory phase: {exc}")
        log(f"{spec.label}: memory phase FAILED: {exc}")
