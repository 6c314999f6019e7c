#!/usr/bin/env python3
"""Slipstream's Python client against aiokafka, kafka-python and confluent-kafka.

    python bench/client_throughput.py            # full run: 200k x 100-byte values
    python bench/client_throughput.py --quick    # smoke run: 20k

One Slipstream broker (``--storage memory``) runs as a subprocess on 127.0.0.1;
every client runs in its own subprocess (no shared interpreter), one after
another, against that broker, in the same run:

* produce N x 100-byte values to a 4-partition topic, acks=all (idempotence on
  where the client supports it): Slipstream AIOProducer, Slipstream sync
  Producer, aiokafka, kafka-python, confluent-kafka (reference);
* consume the same N from the earliest offset (no group, every partition
  assigned): Slipstream AIOConsumer, Slipstream poll Consumer, Slipstream
  ConsumerGroup handler (a group), aiokafka, kafka-python, confluent-kafka;
* a Slipstream ConsumerGroup whose handler sleeps per message, over a topic of
  ~100 MB (``--quick``: ~30 MB), with two fetch-limit settings: peak RSS of the
  consumer process (psutil, sampled every 20 ms) against its RSS before
  fetching and the documented bound (partitions x (partition_buffer_bytes +
  max_partition_fetch_bytes) plus one response in flight of fetch_max_bytes).

Best of ``--runs`` (2) per row. Every wait is bounded, every process is killed
on exit. Progress goes to stderr; the Markdown report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import create_topics, log, slipstream_broker, stop_all

MB = 1_000_000
MIB = 1024 * 1024
PARTITIONS = 4
VALUE_SIZE = 100
MEM_VALUE_SIZE = 1024

PRODUCERS = ["slipstream-aio", "slipstream-sync", "aiokafka", "kafka-python", "confluent-kafka"]
CONSUMERS = [
    "slipstream-aio",
    "slipstream-poll",
    "slipstream-group",
    "aiokafka",
    "kafka-python",
    "confluent-kafka",
]
# (label, max_partition_fetch_bytes, fetch_max_bytes, partition_buffer_bytes)
MEMORY_SETTINGS = [
    ("tiny (overhead reference)", 16 * 1024, 64 * 1024, 16 * 1024),
    ("small", 256 * 1024, 1 * MIB, 256 * 1024),
    ("large", 4 * MIB, 16 * MIB, 4 * MIB),
]


# --------------------------------------------------------------------------- processes

_LIVE: set[subprocess.Popen[bytes]] = set()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    _LIVE.discard(proc)


def _kill_children() -> None:
    for proc in list(_LIVE):
        _kill(proc)


def _on_signal(signum: int, _frame: object) -> None:
    _kill_children()
    stop_all()
    sys.exit(128 + signum)



def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    """Run one client measurement in a fresh interpreter; its last stdout line is JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _LIVE.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return {"error": f"timeout after {timeout:.0f}s"}
    _LIVE.discard(proc)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = err.decode().strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    return dict(json.loads(lines[-1]))


# --------------------------------------------------------------------------- children


def _value(i: int, size: int) -> bytes:
    return (b"%012d" % i) + b"x" * (size - 12)


async def _produce_slip_aio(bs: str, topic: str, n: int) -> None:
    from slipstream.client.producer import AIOProducer

    async with AIOProducer(bs, acks="all") as p:
        for i in range(n):
            await p.send(topic, _value(i, VALUE_SIZE))
        await p.flush()


def _produce_slip_sync(bs: str, topic: str, n: int) -> None:
    from slipstream.client.producer import Producer

    failed: list[BaseException] = []

    def cb(err: BaseException | None, _md: Any) -> None:
        if err is not None:
            failed.append(err)

    with Producer(bs, acks="all") as p:
        for i in range(n):
            p.produce(topic, _value(i, VALUE_SIZE), on_delivery=cb)
            if i % 10000 == 0:
                p.poll(0)
        p.flush(120)
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[0]!r}")


async def _produce_aiokafka(bs: str, topic: str, n: int) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True)
    await p.start()
    try:
        for i in range(n):
            await p.send(topic, _value(i, VALUE_SIZE))
        await p.flush()
    finally:
        await p.stop()


def _produce_kafka_python(bs: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True)
    for i in range(n):
        p.send(topic, _value(i, VALUE_SIZE))
    p.flush(timeout=120)
    p.close()


def _produce_confluent(
    bs: str, topic: str, n: int, size: int = VALUE_SIZE, batch_size: int | None = None
) -> None:
    from confluent_kafka import Producer

    failed: list[Any] = []

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    p = Producer({
        "bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
    } | ({"batch.size": batch_size} if batch_size else {}))
    for i in range(n):
        while True:
            try:
                p.produce(topic, _value(i, size), on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("confluent flush left messages undelivered")
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[0]}")


def child_produce(client: str, bs: str, topic: str, n: int) -> dict[str, Any]:
    start = time.perf_counter()
    if client == "slipstream-aio":
        asyncio.run(_produce_slip_aio(bs, topic, n))
    elif client == "slipstream-sync":
        _produce_slip_sync(bs, topic, n)
    elif client == "aiokafka":
        asyncio.run(_produce_aiokafka(bs, topic, n))
    elif client == "kafka-python":
        _produce_kafka_python(bs, topic, n)
    elif client == "confluent-kafka":
        _produce_confluent(bs, topic, n)
    else:
        raise ValueError(client)
    return {"seconds": time.perf_counter() - start, "count": n}


class _Clock:
    """Start (consumer created; for a group: the session's setup) to the N-th message."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.nbytes = 0
        self.first = time.perf_counter()
        self.last = 0.0

    def restart(self) -> None:
        if self.count == 0:
            self.first = time.perf_counter()

    def add(self, k: int, nbytes: int) -> bool:
        self.count += k
        self.nbytes += nbytes
        if self.count >= self.n:
            self.last = time.perf_counter()
            return True
        return False

    def result(self, started: float) -> dict[str, Any]:
        return {
            "seconds": self.last - self.first,
            "total_seconds": self.last - started,
            "count": self.count,
            "bytes": self.nbytes,
        }


async def _consume_slip_aio(bs: str, topic: str, clock: _Clock) -> None:
    from slipstream.client.aio_consumer import AIOConsumer

    c = AIOConsumer(bs, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        await c.assign([(topic, p) for p in range(PARTITIONS)])
        while True:
            msgs = await c.getmany(1.0)
            if msgs and clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                return
    finally:
        await c.close()


def _consume_slip_poll(bs: str, topic: str, clock: _Clock) -> None:
    from slipstream.client.consumer import Consumer

    c = Consumer(bs, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        while True:
            msgs = c.poll(1.0)
            if msgs and clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                return
    finally:
        c.close()


async def _consume_slip_group(
    bs: str, topic: str, clock: _Clock, group: str, sleep_s: float = 0.0,
    config: dict[str, Any] | None = None, stop_after: float | None = None,
) -> None:
    from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler

    done = asyncio.Event()

    class Handler(ConsumerGroupHandler):
        async def setup(self, session: Any) -> None:
            clock.restart()

        async def consume_claim(self, session: Any, claim: Any) -> None:
            async for msg in claim.messages():
                if sleep_s:
                    await asyncio.sleep(sleep_s)
                session.mark_message(msg)
                # Counted inline, not with a clock.add() call per message: the other rows
                # call it once per batch, so the harness's own per-message cost (a count and
                # len(value)) stays the same for every client.
                clock.count += 1
                clock.nbytes += len(msg.value or b"")
                if clock.count >= clock.n and clock.add(0, 0):
                    done.set()

    g = ConsumerGroup(bs, group, auto_offset_reset="earliest", **(config or {}))

    async def loop() -> None:
        while not done.is_set() and not g.closed:
            await g.consume([topic], Handler())

    task = asyncio.create_task(loop())
    try:
        waiter = asyncio.create_task(done.wait())
        finished, _ = await asyncio.wait(
            {task, waiter}, timeout=stop_after, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        if task in finished:
            task.result()
    finally:
        await asyncio.wait_for(g.close(), 30)
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _consume_aiokafka(bs: str, topic: str, clock: _Clock) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bs, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await c.start()
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while True:
            batches = await c.getmany(timeout_ms=1000)
            for msgs in batches.values():
                if clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                    return
    finally:
        await c.stop()


def _consume_kafka_python(bs: str, topic: str, clock: _Clock) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bs, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while True:
            for msgs in c.poll(timeout_ms=1000).values():
                if clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                    return
    finally:
        c.close()


def _consume_confluent(bs: str, topic: str, clock: _Clock) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bs, "group.id": f"bench-unused-{os.getpid()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while True:
            msgs = [m for m in c.consume(num_messages=10000, timeout=1.0) if not m.error()]
            if msgs and clock.add(len(msgs), sum(len(m.value() or b"") for m in msgs)):
                return
    finally:
        c.close()


_CONSUMER_MODULES = {
    "slipstream-aio": "slipstream.client.aio_consumer",
    "slipstream-poll": "slipstream.client.consumer",
    "slipstream-group": "slipstream.client.consumer_group",
    "aiokafka": "aiokafka",
    "kafka-python": "kafka",
    "confluent-kafka": "confluent_kafka",
}


def child_consume(client: str, bs: str, topic: str, n: int) -> dict[str, Any]:
    import importlib

    # Import the client library before the clock starts (for every client alike): the
    # measurement starts when the consumer is created, not when its package is loaded.
    importlib.import_module(_CONSUMER_MODULES[client])
    clock = _Clock(n)
    started = time.perf_counter()
    if client == "slipstream-aio":
        asyncio.run(_consume_slip_aio(bs, topic, clock))
    elif client == "slipstream-poll":
        _consume_slip_poll(bs, topic, clock)
    elif client == "slipstream-group":
        asyncio.run(_consume_slip_group(bs, topic, clock, f"bench-group-{os.getpid()}"))
    elif client == "aiokafka":
        asyncio.run(_consume_aiokafka(bs, topic, clock))
    elif client == "kafka-python":
        _consume_kafka_python(bs, topic, clock)
    elif client == "confluent-kafka":
        _consume_confluent(bs, topic, clock)
    else:
        raise ValueError(client)
    return clock.result(started)


class RssSampler:
    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self._proc = psutil.Process()
        self.peak = self._proc.memory_info().rss
        self.samples: list[tuple[float, int]] = []
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            rss = self._proc.memory_info().rss
            self.samples.append((time.monotonic(), rss))
            self.peak = max(self.peak, rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._proc.memory_info().rss)


def child_memory(bs: str, topic: str, setting: str, seconds: float, sleep_ms: float) -> dict[str, Any]:
    import gc

    import slipstream.client.consumer_group  # noqa: F401  (import before the baseline)

    _label, mpfb, fmb, pbb = next(s for s in MEMORY_SETTINGS if s[0] == setting)
    config = {
        "max_partition_fetch_bytes": mpfb, "fetch_max_bytes": fmb, "partition_buffer_bytes": pbb,
    }
    gc.collect()
    sampler = RssSampler()
    baseline = sampler.peak
    clock = _Clock(10**12)
    asyncio.run(_consume_slip_group(
        bs, topic, clock, f"bench-mem-{os.getpid()}", sleep_s=sleep_ms / 1000,
        config=config, stop_after=seconds,
    ))
    peak = sampler.stop()
    samples = sampler.samples
    half = samples[0][0] + (samples[-1][0] - samples[0][0]) / 2 if samples else 0.0
    first = max((r for t, r in samples if t <= half), default=baseline)
    second = max((r for t, r in samples if t > half), default=baseline)
    return {
        "baseline": baseline, "peak": peak, "consumed": clock.count,
        "peak_first_half": first, "peak_second_half": second,
    }


def child_main(argv: list[str]) -> int:
    kind, client, bs, topic = argv[:4]
    if kind == "produce":
        result = child_produce(client, bs, topic, int(argv[4]))
    elif kind == "consume":
        result = child_consume(client, bs, topic, int(argv[4]))
    elif kind == "fill":
        start = time.perf_counter()
        # 16 KiB batches (the Java default): a fetch returns at least one whole batch,
        # so librdkafka's 1 MB batches would exceed the smaller fetch limits by design.
        _produce_confluent(bs, topic, int(argv[4]), int(argv[5]), batch_size=16384)
        result = {"seconds": time.perf_counter() - start}
    elif kind == "memory":
        result = child_memory(bs, topic, client, float(argv[4]), float(argv[5]))
    else:
        raise ValueError(kind)
    print(json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------- parent


@dataclass
class Row:
    name: str
    results: list[dict[str, Any]]

    def best(self) -> dict[str, Any] | None:
        good = [r for r in self.results if "error" not in r and r.get("seconds", 0) > 0]
        return min(good, key=lambda r: r["seconds"]) if good else None

    def rate(self) -> float | None:
        b = self.best()
        return b["count"] / b["seconds"] if b else None

    def error(self) -> str:
        errs = [r["error"] for r in self.results if "error" in r]
        return errs[-1] if errs else "no result"


def fmt_table(rows: list[Row], value_size: int, ours: Callable[[str], bool]) -> list[str]:
    by = {r.name: r.rate() for r in rows}
    aio, kp = by.get("aiokafka"), by.get("kafka-python")
    out = [
        "| client | msgs/s | MB/s | vs aiokafka | vs kafka-python | runs (msgs/s) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        rate = r.rate()
        runs = ", ".join(
            f"{x['count'] / x['seconds']:,.0f}" if "error" not in x else "err"
            for x in r.results
        )
        if rate is None:
            out.append(f"| {r.name} | failed: {r.error()} | | | | {runs} |")
            continue
        ra = f"{rate / aio:.2f}x" if aio and ours(r.name) else ""
        rk = f"{rate / kp:.2f}x" if kp and ours(r.name) else ""
        if ours(r.name):
            ra += " ✅" if aio and rate >= aio else (" ❌" if aio else "")
            rk += " ✅" if kp and rate >= 3 * kp else (" ❌" if kp else "")
        out.append(
            f"| {r.name} | {rate:,.0f} | {rate * value_size / MB:.1f} | {ra} | {rk} | {runs} |"
        )
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k messages, ~30 MB memory topic")
    parser.add_argument("-n", "--messages", type=int, help="messages per row (default 200k)")
    parser.add_argument("--runs", type=int, default=2, help="runs per row, best kept (2)")
    parser.add_argument("--mem-seconds", type=float, default=None, help="slow-consumer duration")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args(argv)
    n = args.messages or (20_000 if args.quick else 200_000)
    mem_count = 30_000 if args.quick else 100_000
    mem_seconds = args.mem_seconds or (6.0 if args.quick else 12.0)
    child_timeout = 120.0 if args.quick else 300.0

    atexit.register(_kill_children)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    stack = contextlib.ExitStack()
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="client-bench-")))
    log("starting slipstream broker")
    broker = stack.enter_context(slipstream_broker(workdir, "--storage", "memory", "--log-level", "WARNING"))
    bs = broker.bootstrap
    log(f"slipstream broker on {bs}")
    tag = os.getpid()
    consume_topic = f"bench-consume-{tag}"
    mem_topic = f"bench-mem-{tag}"
    prod_topics = {
        (c, run): f"bench-produce-{c}-{run}-{tag}" for c in PRODUCERS for run in range(args.runs)
    }
    create_topics(bs, {consume_topic: PARTITIONS, mem_topic: PARTITIONS}
                  | {t: PARTITIONS for t in prod_topics.values()}, 30)

    produce_rows = [Row(c, []) for c in PRODUCERS]
    for run in range(args.runs):
        for row in produce_rows:
            log(f"produce {row.name} run {run + 1}: {n} x {VALUE_SIZE} B")
            res = run_child(["produce", row.name, bs, prod_topics[(row.name, run)], str(n)],
                            child_timeout)
            log(f"  -> {res}")
            row.results.append(res)

    log(f"filling {consume_topic} with {n} messages (confluent-kafka)")
    fill = run_child(["fill", "-", bs, consume_topic, str(n), str(VALUE_SIZE)], child_timeout)
    if "error" in fill:
        raise RuntimeError(f"fill failed: {fill['error']}")
    consume_rows = [Row(c, []) for c in CONSUMERS]
    for run in range(args.runs):
        for row in consume_rows:
            log(f"consume {row.name} run {run + 1}")
            res = run_child(["consume", row.name, bs, consume_topic, str(n)], child_timeout)
            log(f"  -> {res}")
            row.results.append(res)

    mem_rows: list[tuple[str, int, int, int, dict[str, Any] | None, str]] = []
    sleep_ms = 1.0
    if not args.skip_memory:
        log(f"filling {mem_topic} with {mem_count} x {MEM_VALUE_SIZE} B")
        fill = run_child(["fill", "-", bs, mem_topic, str(mem_count), str(MEM_VALUE_SIZE)],
                         child_timeout)
        if "error" in fill:
            raise RuntimeError(f"fill failed: {fill['error']}")
        for label, mpfb, fmb, pbb in MEMORY_SETTINGS:
            results = []
            for run in range(args.runs):
                log(f"slow consumer {label} run {run + 1}")
                res = run_child(
                    ["memory", label, bs, mem_topic, str(mem_seconds), str(sleep_ms)],
                    mem_seconds + 90,
                )
                log(f"  -> {res}")
                results.append(res)
            good = [r for r in results if "error" not in r]
            best = min(good, key=lambda r: r["peak"] - r["baseline"]) if good else None
            err = "" if good else results[-1].get("error", "?")
            mem_rows.append((label, mpfb, fmb, pbb, best, err))

    broker_rss = None
    with contextlib.suppress(Exception):
        import psutil

        broker_rss = psutil.Process(broker.pid).memory_info().rss
    stack.close()

    import aiokafka
    import confluent_kafka
    import kafka

    out: list[str] = []
    out.append("## Client throughput (same Slipstream broker, same run)")
    out.append("")
    out.append(f"Command: `{shlex.join(['python', *sys.argv])}`")
    out.append("")
    out.append(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; aiokafka {aiokafka.__version__}, kafka-python "
        f"{kafka.__version__}, confluent-kafka {confluent_kafka.version()[0]} "
        f"(librdkafka {confluent_kafka.libversion()[0]}). Broker: `slipstream serve "
        f"--storage memory` subprocess; each client in its own subprocess, one at a time. "
        f"{n:,} x {VALUE_SIZE}-byte values, {PARTITIONS} partitions, best of {args.runs}."
    )
    out.append("")
    out.append("### Produce (acks=all, idempotence on for every client)")
    out.append("")
    out.append("Time from creating the producer to the last acknowledgement (flush).")
    out.append("")
    out.extend(fmt_table(produce_rows, VALUE_SIZE, lambda s: s.startswith("slipstream")))
    out.append("")
    out.append("### Consume (from earliest, no commits)")
    out.append("")
    out.append(
        "Time from creating the consumer to the N-th message (connection set-up included; "
        "for `slipstream-group` from the session's `setup`, so the group join is excluded). "
        "`slipstream-aio`/`-poll`/aiokafka/kafka-python/"
        "confluent assign all partitions with no group; `slipstream-group` is a "
        "`ConsumerGroup` handler (one member, marks every message)."
    )
    out.append("")
    out.extend(fmt_table(consume_rows, VALUE_SIZE, lambda s: s.startswith("slipstream")))
    out.append("")
    if mem_rows:
        out.append("### Slow consumer memory (Slipstream ConsumerGroup)")
        out.append("")
        out.append(
            f"Topic of {mem_count:,} x {MEM_VALUE_SIZE} B (~{mem_count * MEM_VALUE_SIZE / MB:.0f}"
            f" MB) over {PARTITIONS} partitions; the handler sleeps {sleep_ms:g} ms per "
            f"message for {mem_seconds:g} s. RSS of the consumer process sampled every 20 ms; "
            f"baseline = RSS after imports, before connecting. Bound (as documented "
            f"in consumer_config.py) = {PARTITIONS} x (partition_buffer_bytes + "
            "max_partition_fetch_bytes) + fetch_max_bytes (one response in flight)."
        )
        out.append("")
        out.append(
            "| setting | max_partition_fetch_bytes | fetch_max_bytes | partition_buffer_bytes "
            "| consumed | baseline RSS | peak RSS (1st / 2nd half) | growth | growth - reference "
            "| bound | within bound |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        ref = mem_rows[0][4]
        ref_growth = ref["peak"] - ref["baseline"] if ref else None
        for label, mpfb, fmb, pbb, best, err in mem_rows:
            bound = PARTITIONS * (pbb + mpfb) + fmb
            if best is None:
                out.append(f"| {label} | {mpfb:,} | {fmb:,} | {pbb:,} | failed: {err} ||||||| ")
                continue
            growth = best["peak"] - best["baseline"]
            net = growth - ref_growth if ref_growth is not None else None
            net_s = f"{net / MIB:.1f} MiB" if net is not None else "n/a"
            ok = "" if net is None or best is ref else ("✅" if net <= bound else "❌")
            out.append(
                f"| {label} | {mpfb:,} | {fmb:,} | {pbb:,} | {best['consumed']:,} | "
                f"{best['baseline'] / MIB:.1f} MiB | {best['peak'] / MIB:.1f} MiB "
                f"({best['peak_first_half'] / MIB:.1f} / {best['peak_second_half'] / MIB:.1f}) | "
                f"{growth / MIB:.1f} MiB | {net_s} | {bound / MIB:.1f} MiB | {ok} |"
            )
        out.append("")
        out.append(
            "Growth is the whole process: buffered fetch bytes plus the client's fixed cost "
            "(connections, imports done on connect, asyncio tasks). The tiny setting "
            "(buffers of a few KiB) measures that fixed cost; `growth - reference` is then "
            "compared with the bound. It counts decoded messages at Python object size, "
            "not wire size. Bounded also means the 2nd-half peak is not above the 1st-half "
            "peak while the topic still holds far more than the buffers."
        )
        out.append("")
    if broker_rss:
        out.append(f"Broker RSS at the end: {broker_rss / MIB:.0f} MiB.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
