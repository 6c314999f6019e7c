#!/usr/bin/env python3
"""Slipstream against two Rust Kafka-compatible brokers (Tansu, noida-db) in one run.

    python bench/broker_throughput.py            # full run, a few minutes
    python bench/broker_throughput.py --quick    # smoke run, under a minute

Measures, for every broker, with confluent-kafka (librdkafka) as the client:

* produce throughput (acks=all, idempotence on where the broker accepts it) and
  consume throughput (assign every partition from the beginning, no commits),
  100-byte and 1 KiB values, 1 and 8 partitions, with Slipstream/peer ratios; the
  median of ``--runs`` runs (3) per test;
* the broker's CPU seconds per million records in each test (user + system time of
  the broker process across the test's timed part: the client shares the cores, so a
  cheaper broker leaves more of them to the client);
* a ceiling: the same client against ``bench/stub_broker.py``, a stub that answers
  without storing anything, i.e. about the most the client can do on this machine;
* process start-up: spawn -> first answer to a raw Metadata request (median);
* Slipstream's in-process start (``Broker(storage="memory", port=0)``);
* peak resident memory of each broker process, and its RSS after 200k x 1 KiB.

Brokers run one after another (never side by side) as subprocesses listening on
127.0.0.1 only; every wait is bounded and every process is killed on exit.
Progress goes to stderr; the Markdown report (paste into the README) to stdout.
``--profile DIR`` also records Slipstream's throughput phase with py-spy (a flame graph
SVG and the raw collapsed stacks in DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from harness import (
    HOST,
    MB,
    BenchError,
    BrokerProcess,
    BrokerSpec,
    RssSampler,
    create_topics,
    discover_brokers,
    free_port,
    load_average,
    log,
    metadata_request,
    on_signal,
    quiet_logger,
    stop_all,
)
from harness import child_env as harness_child_env

DEFAULT_VALUE_SIZES = (100, 1024)
DEFAULT_PARTITION_COUNTS = (1, 8)
WARMUP_TOPIC = "bench-warmup"
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


# --------------------------------------------------------------------------- client phases


@dataclass
class Rate:
    messages: int
    value_bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        return f"{self.msgs_per_s:,.0f} msg/s, {self.mb_per_s:.1f} MB/s ({self.seconds:.2f} s)"


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


def _producer_config(bootstrap: str, idempotent: bool, errors: list[str]) -> dict[str, Any]:
    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            errors.append(f"fatal: {err}")

    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "compression.type": "none",
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "error_cb": on_error,
        "message.timeout.ms": 120_000,
        "log.connection.close": False,
    }


def probe_idempotence(bootstrap: str, timeout: float) -> str | None:
    """Produce one idempotent message; None if accepted, else the reason it was not."""
    errors: list[str] = []
    producer = Producer(_producer_config(bootstrap, True, errors))
    producer.produce(WARMUP_TOPIC, b"idempotence probe", partition=0)
    left = producer.flush(timeout)
    if errors:
        return errors[0]
    if left:
        return f"not acknowledged within {timeout:.0f}s"
    return None


def produce_phase(
    bootstrap: str,
    topic: str,
    partitions: int,
    value_size: int,
    count: int,
    idempotent: bool,
    timeout: float,
) -> Rate:
    errors: list[str] = []
    producer = Producer(_producer_config(bootstrap, idempotent, errors))
    value = os.urandom(value_size)
    # Warm up: connection, metadata and the producer id, outside the timed window.
    producer.produce(WARMUP_TOPIC, b"warm-up", partition=0)
    if producer.flush(min(timeout, 30.0)) or errors:
        raise BenchError(f"warm-up message failed: {errors[0] if errors else 'timeout'}")
    produce = producer.produce
    poll = producer.poll
    start = time.perf_counter()
    deadline = start + timeout
    for i in range(count):
        partition = i % partitions
        while True:
            try:
                produce(topic, value, partition=partition)
                break
            except BufferError:
                poll(0.005)
                if time.perf_counter() > deadline:
                    raise BenchError(
                        f"timed out after {timeout:.0f}s with {i} of {count} messages queued"
                    ) from None
        if not i & 1023:
            poll(0)
    left = producer.flush(max(0.1, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - start
    if errors:
        raise BenchError(f"{len(errors)} delivery errors, first: {errors[0]}")
    if left:
        raise BenchError(f"{left} messages unacknowledged after {timeout:.0f}s")
    return Rate(count, count * value_size, elapsed)


def consume_phase(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    overrides: dict[str, Any],
    timeout: float,
) -> Rate:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka insists on a group id; nothing is committed and no group is joined.
            "group.id": f"bench-{topic}-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "error_cb": quiet_logger,
            "log.connection.close": False,
            # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever
            # queued.min.messages are buffered: a client artefact that would swamp the broker.
            "fetch.queue.backoff.ms": 10,
            **overrides,
        }
    )
    try:
        consumer.list_topics(topic, timeout=min(timeout, 10.0))  # connect outside the window
        start = time.perf_counter()
        deadline = start + timeout
        consumer.assign(
            [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        received = 0
        value_bytes = 0
        offset_sum = 0
        while received < count:
            if time.perf_counter() > deadline:
                raise BenchError(f"received {received} of {count} within {timeout:.0f}s")
            for msg in consumer.consume(min(10_000, count - received), 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise BenchError(f"consume error: {err}")
                received += 1
                offset_sum += msg.offset() or 0
                value = msg.value()
                value_bytes += len(value) if value is not None else 0
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    # Round-robin production into a fresh topic: partition p holds offsets 0..n_p-1 exactly
    # once, so any duplicate, gap or misnumbered record shows up in the sum of offsets.
    expected = 0
    for p in range(partitions):
        n_p = count // partitions + (1 if p < count % partitions else 0)
        expected += n_p * (n_p - 1) // 2
    if offset_sum != expected:
        raise BenchError(
            f"received {received} records whose offsets sum to {offset_sum}, not {expected}:"
            " duplicates, gaps or wrong offsets"
        )
    return Rate(received, value_bytes, elapsed)


# --------------------------------------------------------------------------- runs


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


def child_env(opts: Options, bytecode_cache: bool = True) -> dict[str, str]:
    """Environment for Python children. With bytecode_cache, .pyc files are written and reused
    (under the work directory, so the checkout stays untouched) as in any normal install,
    even where PYTHONDONTWRITEBYTECODE is set, as on CI machines and this one."""
    return harness_child_env(opts.workdir, bytecode_cache)


@contextlib.contextmanager
def running(
    spec: BrokerSpec, opts: Options, tag: str, bytecode_cache: bool = True
) -> Iterator[BrokerProcess]:
    work = Path(tempfile.mkdtemp(prefix=f"{spec.key}-{tag}-", dir=opts.workdir))
    env = child_env(opts, bytecode_cache)
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


# --------------------------------------------------------------------------- embedded


async def _embedded_runs(runs: int) -> dict[str, Any]:
    from slipstream import Broker

    _ = Broker  # the warm-up import: module loading is not part of start
    times: list[float] = []
    for run in range(runs):
        start = time.perf_counter()
        broker = Broker(storage="memory", port=0)
        await broker.start()
        elapsed = time.perf_counter() - start
        try:
            if run == 0:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(HOST, broker.port), 5
                )
                writer.write(metadata_request(1))
                size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
                await asyncio.wait_for(reader.readexactly(size), 5)
                writer.close()
        finally:
            await broker.stop()
        times.append(elapsed)
    return {"times": times}


def embedded_probe_main(runs: int) -> int:
    result = asyncio.run(_embedded_runs(runs))
    print(json.dumps(result))
    return 0


@dataclass
class EmbeddedResult:
    first: float | None = None
    median: float | None = None
    runs: int = 0
    error: str | None = None


def measure_embedded(opts: Options, timeout: float) -> EmbeddedResult:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--embedded-probe",
        str(opts.embedded_runs + 1),
    ]
    env = child_env(opts)
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return EmbeddedResult(error=f"embedded start probe timed out after {timeout:.0f}s")
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-8:])
        return EmbeddedResult(error=f"embedded start probe failed:\n{tail}")
    times = json.loads(out.stdout.strip().splitlines()[-1])["times"]
    rest = times[1:] or times
    return EmbeddedResult(first=times[0], median=statistics.median(rest), runs=len(rest))


# --------------------------------------------------------------------------- report


def fmt_rate(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.rate is None:
        return "not run" if cell.error == "not run" else "FAILED"
    return f"{cell.rate.msgs_per_s:,.0f} msg/s ({cell.rate.mb_per_s:.1f} MB/s)"


def fmt_ratio(ours: Cell | None, theirs: list[Cell | None]) -> str:
    rates = [c.rate.msgs_per_s for c in theirs if c is not None and c.rate is not None]
    if ours is None or ours.rate is None or not rates:
        return "-"
    return f"{ours.rate.msgs_per_s / max(rates):.2f}x"


def fmt_mb(value: int | None) -> str:
    return "-" if not value else f"{value / MB:,.0f} MB"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:,.1f} ms" if value < 0.1 else f"{value * 1000:,.0f} ms"


def verdict(ok: bool | None) -> str:
    return "" if ok is None else (" ✓" if ok else " ✗")


def fmt_cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def cpu_table(
    results: list[BrokerResult],
    ours: BrokerResult | None,
    peers: list[BrokerResult],
    opts: Options,
) -> list[str]:
    """Broker CPU seconds per million records, per test (median over the runs)."""
    out = [
        "Broker CPU seconds per million records (user + system time of the broker process"
        " during each test's timed part, median of the runs; lower is better; the stub's"
        " own cost is its column):",
        "",
    ]
    header = ["Test", *(r.spec.label for r in results)]
    if ours is not None and peers:
        header.append("Slipstream / cheaper peer")
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for op in ("produce", "consume"):
        for size in opts.sizes:
            for parts in opts.partitions:
                key = (op, size, parts)
                size_text = "1 KiB" if size == 1024 else f"{size} B"
                row = [f"{op} {size_text}, {parts} partition{'s' if parts > 1 else ''}"]
                values = {}
                for r in results:
                    cell = r.cells.get(key)
                    values[r.spec.key] = cell.cpu_per_million if cell is not None else None
                    row.append(fmt_cpu(values[r.spec.key]))
                if ours is not None and peers:
                    theirs = [v for p in peers if (v := values.get(p.spec.key)) is not None]
                    mine = values.get("slipstream")
                    if mine is None or not theirs or min(theirs) <= 0:
                        row.append("-")
                    else:
                        ratio = mine / min(theirs)
                        text = f"{ratio:.2f}x"
                        if size == 1024:
                            text += verdict(ratio <= 1.0)
                        row.append(text)
                out.append("| " + " | ".join(row) + " |")
    return out


def report(
    results: list[BrokerResult],
    embedded: EmbeddedResult | None,
    opts: Options,
    missing: list[str],
    wall: float,
    load_start: str,
) -> str:
    out: list[str] = []
    ours = next((r for r in results if r.spec.key == "slipstream"), None)
    ceiling = next((r for r in results if r.spec.key == CEILING), None)
    peers = [r for r in results if r.spec.key not in ("slipstream", CEILING)]
    brokers = [r for r in results if r.spec.key != CEILING]
    lib = confluent_kafka.libversion()[0]
    load_end = load_average()
    out.append(f"Command: `{shlex.join(['python', *sys.argv])}`")
    out.append("")
    out.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()}; client: confluent-kafka"
        f" {confluent_kafka.__version__} (librdkafka {lib}) in the same machine."
        f" Run took {wall:.0f} s; 1-minute load average {load_start} at the start, {load_end}"
        " at the end (other work on the machine skews the numbers)."
    )
    out.append("")
    for r in results:
        note = ""
        if r.idempotence_note is not None:
            note = " — **idempotence rejected, produced with acks=all only**"
        if r.spec.consumer_overrides:
            settings = ", ".join(f"{k}={v}" for k, v in r.spec.consumer_overrides.items())
            note += f"; its consumers need {settings}"
        out.append(f"- {r.spec.label} {r.spec.version}: {r.spec.describe}{note}")
    for m in missing:
        out.append(f"- not installed, skipped: {m}")
    out.append("")
    out.append(
        f"Median of {opts.repeat} run{'s' if opts.repeat > 1 else ''} per test, each into its own"
        " topic; producer acks=all, idempotence on, linger.ms=5, no compression,"
        " partitions round-robin; consumer assigns every partition from the earliest offset"
        " (no group, no commits), fetch.queue.backoff.ms=10. MB = 10^6 bytes of record values."
    )
    out.append("")
    header = ["Test", *(r.spec.label for r in results)]
    if ours is not None:
        header += [f"Slipstream / {p.spec.label}" for p in peers]
        if len(peers) > 1:
            header.append("Slipstream / faster peer")
        if ceiling is not None:
            header.append("Slipstream / ceiling")
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for op in ("produce", "consume"):
        for size in opts.sizes:
            for parts in opts.partitions:
                key = (op, size, parts)
                size_text = "1 KiB" if size == 1024 else f"{size} B"
                count = count_for(opts, size)
                count_text = f"{count // 1000}k" if count % 1000 == 0 else f"{count:,}"
                row = [
                    f"{op} {count_text} x {size_text}, {parts} partition{'s' if parts > 1 else ''}"
                ]
                row += [fmt_rate(r.cells.get(key)) for r in results]
                if ours is not None:
                    mine = ours.cells.get(key)
                    row += [fmt_ratio(mine, [p.cells.get(key)]) for p in peers]
                    if len(peers) > 1:
                        ratio = fmt_ratio(mine, [p.cells.get(key) for p in peers])
                        if ratio != "-":
                            target = 1.2 if size == 1024 else 1.0
                            ratio += verdict(float(ratio.rstrip("x")) >= target)
                        row.append(ratio)
                    if ceiling is not None:
                        row.append(fmt_ratio(mine, [ceiling.cells.get(key)]))
                out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.extend(cpu_table(results, ours, peers, opts))
    out.append("")

    results = brokers  # the stub has no start-up or memory figures
    header = ["Start-up and memory", *(r.spec.label for r in results)]
    if ours is not None:
        header.append("Slipstream target")
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")

    def add_row(name: str, values: list[str], target: str | None = None) -> None:
        cells = [name, *values]
        if ours is not None:
            cells.append(target or "")
        out.append("| " + " | ".join(cells) + " |")

    def median(r: BrokerResult) -> float | None:
        return statistics.median(r.startup) if r.startup else None

    ours_start = median(ours) if ours is not None else None
    add_row(
        f"process start → first Metadata answer (median of {opts.startup_runs}, .pyc cached)",
        [
            f"{fmt_ms(median(r))} (min {fmt_ms(min(r.startup))})" if r.startup else "FAILED"
            for r in results
        ],
        "≤ 300 ms" + verdict(None if ours_start is None else ours_start <= 0.3),
    )
    if ours is not None and ours.startup_no_pyc:
        add_row(
            f"same, without .pyc files (PYTHONDONTWRITEBYTECODE=1; median of {opts.startup_runs})",
            [
                f"{fmt_ms(statistics.median(r.startup_no_pyc))} (min {fmt_ms(min(r.startup_no_pyc))})"
                if r is ours
                else "-"
                for r in results
            ],
        )
    if embedded is not None and ours is not None:
        if embedded.error is None:
            text = f"{fmt_ms(embedded.median)} (first {fmt_ms(embedded.first)})"
            ok: bool | None = embedded.median is not None and embedded.median <= 0.02
        else:
            text, ok = "FAILED", None
        add_row(
            f'embedded `await Broker(storage="memory", port=0).start()` (median of'
            f" {embedded.runs or opts.embedded_runs})",
            [text if r is ours else "-" for r in results],
            "≤ 20 ms" + verdict(ok),
        )

    def rss_target(value: int | None) -> str:
        return "≤ 150 MB" + verdict(None if not value else value <= 150 * MB)

    add_row(
        "broker CPU time during the throughput tests (their timed part took)",
        [
            "-" if r.cpu_seconds is None else f"{r.cpu_seconds:.1f} s ({r.busy_seconds:.1f} s)"
            for r in results
        ],
    )
    add_row(
        "peak RSS during the throughput tests",
        [fmt_mb(r.peak_rss) for r in results],
        rss_target(ours.peak_rss if ours else None),
    )
    n = f"{opts.rss_messages // 1000}k" if opts.rss_messages >= 1000 else str(opts.rss_messages)
    add_row(
        f"RSS after writing {n} x 1 KiB (fresh broker, 1 partition)",
        [
            "FAILED"
            if r.rss_error and r.rss_after_write is None
            else f"{fmt_mb(r.rss_after_write)} (anon {fmt_mb(r.anon_after_write)})"
            for r in results
        ],
        rss_target(ours.rss_after_write if ours else None),
    )
    add_row(
        f"peak RSS writing and reading back those {n}",
        ["FAILED" if r.rss_error else fmt_mb(r.rss_phase_peak) for r in results],
        rss_target(ours.rss_phase_peak if ours else None),
    )
    out.append("")
    out.append(
        "RSS is resident memory of the broker process (psutil, sampled every 20 ms, and the"
        " kernel's VmHWM); anon = RssAnon (heap), excluding file pages mapped in."
    )
    failures = [(r.spec.label, e) for r in results for e in r.errors]
    if embedded is not None and embedded.error:
        failures.append(("Slipstream embedded", embedded.error))
    if failures:
        out.append("")
        out.append("Failures:")
        for label, err in failures:
            first, *rest = err.splitlines()
            out.append(f"- {label}: {first}")
            if len(rest) > 6:  # a log tail: its last lines say what went wrong
                rest = ["...", *rest[-6:]]
            out.extend(f"      {line}" for line in rest)
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Produce/consume throughput, start-up time and memory of Slipstream"
        " compared with Tansu and noida-db (confluent-kafka client). Prints Markdown."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: few thousand messages")
    parser.add_argument(
        "--messages",
        type=int,
        help="messages per test (default 300000 for 100 B values, 100000 for 1 KiB; quick 5000)",
    )
    parser.add_argument(
        "--rss-messages",
        type=int,
        help="1 KiB messages written before reading RSS (default 200000; quick 20000)",
    )
    parser.add_argument(
        "--runs",
        "--repeat",
        dest="repeat",
        type=int,
        help="runs of each test, the median reported (default 3; quick 1)",
    )
    parser.add_argument(
        "--startup-runs", type=int, help="process starts to time (default 7; quick 3)"
    )
    parser.add_argument(
        "--embedded-runs", type=int, help="embedded starts to time (default 15; quick 5)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds allowed per produce/consume phase (default 180; quick 60)",
    )
    parser.add_argument(
        "--brokers",
        default=f"slipstream,tansu,noida-db,{CEILING}",
        help=f"comma-separated subset of slipstream,tansu,noida-db,{CEILING}",
    )
    parser.add_argument(
        "--sizes",
        type=_int_list,
        default=DEFAULT_VALUE_SIZES,
        help="value sizes (default 100,1024)",
    )
    parser.add_argument(
        "--partitions",
        type=_int_list,
        default=DEFAULT_PARTITION_COUNTS,
        help="partition counts (default 1,8)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record Slipstream's throughput phase with py-spy into DIR (SVG + raw stacks)",
    )
    parser.add_argument("--embedded-probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("messages", "rss_messages", "repeat", "startup_runs", "embedded_runs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.embedded_probe is not None:
        return embedded_probe_main(args.embedded_probe)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    workdir = Path(tempfile.mkdtemp(prefix="slipstream-bench-"))
    opts = Options(
        messages=args.messages or (5_000 if quick else None),
        rss_messages=args.rss_messages or (20_000 if quick else 200_000),
        startup_runs=args.startup_runs or (3 if quick else 7),
        embedded_runs=args.embedded_runs or (5 if quick else 15),
        timeout=args.timeout or (60.0 if quick else 180.0),
        workdir=workdir,
        repeat=args.repeat or (1 if quick else 3),
        sizes=args.sizes,
        partitions=args.partitions,
        profile_dir=args.profile,
    )
    wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]
    began = time.perf_counter()
    load_start = load_average()
    try:
        specs, missing = discover_brokers([b for b in wanted if b != CEILING])
        if CEILING in wanted:
            specs.append(ceiling_spec())
        results: list[BrokerResult] = []
        embedded: EmbeddedResult | None = None
        for spec in specs:
            result = BrokerResult(spec)
            results.append(result)
            log(f"{spec.label} {spec.version}: start-up x{opts.startup_runs}")
            measure_startup(spec, opts, result)
            if result.startup_error is None:
                log(f"{spec.label}: throughput")
                measure_throughput(spec, opts, result)
                if spec.key != CEILING:  # the stub keeps nothing: its memory says nothing
                    log(f"{spec.label}: memory, {opts.rss_messages:,} x 1 KiB")
                    measure_memory(spec, opts, result)
            else:
                log(f"{spec.label}: start-up FAILED: {result.startup_error}")
            if spec.key == "slipstream":
                log(f"Slipstream: embedded start x{opts.embedded_runs + 1}")
                embedded = measure_embedded(opts, 120.0)
        print(report(results, embedded, opts, missing, time.perf_counter() - began, load_start))
        failed = any(r.errors for r in results) or (embedded is not None and embedded.error)
        return 1 if failed else 0
    finally:
        stop_all()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
