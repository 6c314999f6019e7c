"""The measurements of broker_throughput.py, one broker at a time: process start-up,
produce/consume throughput with the broker's CPU and peak RSS, and memory after a write.
Each fills a ``BrokerResult``; broker_report.py renders them.
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

from harness import (
    HOST,
    BenchError,
    BrokerProcess,
    BrokerSpec,
    RssSampler,
    child_env,
    create_topics,
    free_port,
    log,
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
    cpu_seconds: float | None = None
    busy_seconds: float = 0.0
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
    """Messages per test: explicit, or enough for a ~0.3 s window on this machine without
    holding too much data in the in-memory peers (30 MB of 100 B values, 100 MB of 1 KiB)."""
    if opts.messages is not None:
        return opts.messages
    return 300_000 if size < 512 else 100_000


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


def measure_throughput(spec: BrokerSpec, opts: Options, result: BrokerResult) -> None:
    """One broker process: every (size, partitions) test, produce then consume, R times each."""
    with running(spec, opts, "throughput") as proc:
        sampler = RssSampler(proc.pid)
        cpu_before: float | None = None
        profiler = (
            start_profiler(proc.pid, opts.profile_dir)
            if opts.profile_dir is not None and spec.key == "slipstream"
            else None
        )
        try:
            topics = {WARMUP_TOPIC: 1}
            for size in opts.sizes:
                for parts in opts.partitions:
                    for run in range(opts.repeat):
                        topics[topic_name(size, parts, run)] = parts
            create_topics(proc.bootstrap, topics, 30.0)
            reason = probe_idempotence(proc.bootstrap, 30.0)
            idempotent = reason is None
            cpu_before = sampler.cpu_seconds()
            if reason is not None:
                result.idempotence_note = reason
                log(f"{spec.label}: idempotent produce failed ({reason}); using acks=all only")
            for size in opts.sizes:
                for parts in opts.partitions:
                    produced = result.cells[("produce", size, parts)] = Cell()
                    consumed = result.cells[("consume", size, parts)] = Cell()
                    for run in range(opts.repeat):
                        topic = topic_name(size, parts, run)
                        what = f"{size} B x {parts}p, run {run + 1}/{opts.repeat}"
                        try:
                            cpu_start = sampler.cpu_seconds()
                            rate = produce_phase(
                                proc.bootstrap, topic, parts, size, count_for(opts, size),
                                idempotent, opts.timeout,
                            )  # fmt: skip
                            produced.rates.append(rate)
                            _add_cpu(produced, cpu_start, sampler.cpu_seconds())
                            result.busy_seconds += rate.seconds
                            log(f"{spec.label}: produce {what}: {rate}")
                        except Exception as exc:
                            produced.error = consumed.error = str(exc)
                            _check_alive(proc)
                            raise BenchError(f"produce {what}: {exc}") from exc
                        try:
                            cpu_start = sampler.cpu_seconds()
                            rate = consume_phase(
                                proc.bootstrap, topic, parts, count_for(opts, size),
                                spec.consumer_overrides, opts.timeout,
                            )  # fmt: skip
                            consumed.rates.append(rate)
                            _add_cpu(consumed, cpu_start, sampler.cpu_seconds())
                            result.busy_seconds += rate.seconds
                            log(f"{spec.label}: consume {what}: {rate}")
                        except Exception as exc:
                            consumed.error = str(exc)
                            _check_alive(proc)
                            raise BenchError(f"consume {what}: {exc}") from exc
        except BenchError as exc:
            result.errors.append(str(exc))
            log(f"{spec.label}: FAILED: {exc}")
        finally:
            for size in opts.sizes:
                for parts in opts.partitions:
                    for op in ("produce", "consume"):
                        result.cells.setdefault((op, size, parts), Cell(error="not run"))
            cpu = sampler.cpu_seconds()
            if cpu is not None and cpu_before is not None:
                result.cpu_seconds = cpu - cpu_before
            if profiler is not None:
                stop_profiler(profiler)
            peak = sampler.stop()
            result.peak_rss = max(peak, proc.kernel_peak_rss() or 0) or None


def _add_cpu(cell: Cell, before: float | None, after: float | None) -> None:
    if before is not None and after is not None:
        cell.cpu_seconds.append(after - before)


def _check_alive(proc: BrokerProcess) -> None:
    if proc.popen.poll() is not None:
        raise BenchError(
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
