#!/usr/bin/env python3
"""What the admin listener costs: the broker's CPU with it on and scraped every second vs off.

    python bench/metrics_overhead.py            # full run, a few minutes
    python bench/metrics_overhead.py --quick    # smoke run, about a minute

One run, the two modes interleaved round by round (off, on, off, on, ...) so the
machine's background load falls on both alike. Each round starts a fresh broker
process (disk storage). In "on" rounds it runs with ``--admin-port`` and a thread GETs
``/metrics`` every second from the start of the measurements to their end. Every
round first waits for the broker's start-up to settle (``__consumer_offsets`` made, the
collector's full pass and freeze ``FREEZE_AFTER_S`` after the listener opens): that
one-off work is no part of serving records, and counted per record it made the
listener look costlier than it is (its imports change what that pass walks). Then:

1. idle: the broker's CPU per second with no Kafka traffic (in "on" rounds the lag
   sampler and the scrapes, which run per second whatever the load);
2. identical requests: broker CPU per record for one stream of pre-encoded Produce
   (acks=all) and Fetch requests, byte for byte the same in both modes, so the
   difference is what the listener adds per record (with the scrapes that fall in the
   stream's second or so: --quick scrapes four times a second, so they show there);
3. clients: confluent-kafka produces (acks=all) to an 8-partition topic and consumes it
   back: throughput and broker CPU per record as a person would see them. The client
   batches by timing, so its Produce request count (shown) moves from round to round
   and each request costs the broker far more than a record does: this row swings
   with it, in both modes.

CPU is the broker process's own (all its threads, from /proc/<pid>/task/*/schedstat
where there is one: nanoseconds, not clock ticks), so other jobs' load skews it much
less than the wall-clock throughput. The medians of the rounds are compared; the
target is "on" at most 3% slower. The request/byte counters run in both modes (they
are always on), so their cost is measured apart. Progress goes to stderr, the
Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import struct
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import (
    HOST,
    free_port,
    log,
    produce_request,
    recv_exact,
    sessionless_fetch,
    slipstream_broker,
)

from slipstream.broker.admin import prometheus
from slipstream.broker.broker import Broker
from slipstream.broker.gc_tuning import FREEZE_AFTER_S
from slipstream.broker.metrics import BrokerMetrics
from slipstream.protocol import api
from slipstream.protocol.apis import fetch as fe
from slipstream.protocol.apis import produce as pr
from slipstream.protocol.records import ProducerRecord, build_batch

TOPIC = "bench-metrics"
STREAM_TOPIC = "bench-metrics-stream"
PARTITIONS = 8
TARGET_SLOWDOWN = 0.03
# After FREEZE_AFTER_S the broker collects and freezes its start-up heap; this much
# more lets that pass (tens of ms) and the __consumer_offsets set-up finish.
SETTLE_MARGIN_S = 1.0
# The request stream: each Produce carries one batch of this many records per partition;
# each Fetch asks for this many batches per partition; this many requests in flight.
STREAM_BATCH_RECORDS = 20
STREAM_FETCH_BATCHES = 8
STREAM_IN_FLIGHT = 5
_SIZE = struct.Struct(">i")


class BrokerHandle:
    def __init__(self, bootstrap: str, pid: int) -> None:
        self.bootstrap = bootstrap
        self.pid = pid
        self.process = psutil.Process(pid)
        self._tasks = Path(f"/proc/{pid}/task")

    def cpu_seconds(self) -> float:
        """CPU the broker process (every thread alive now) has used so far."""
        if not self._tasks.is_dir():
            times = self.process.cpu_times()
            return float(times.user + times.system)
        total_ns = 0
        for task in self._tasks.iterdir():
            # A thread may end between the listing and the read: it just isn't counted.
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total_ns += int((task / "schedstat").read_text().split()[0])
        return total_ns / 1e9


@contextlib.contextmanager
def broker_process(workdir: Path, admin_port: int | None) -> Iterator[BrokerHandle]:
    admin = ("--admin-port", str(admin_port)) if admin_port is not None else ()
    with slipstream_broker(workdir, "--log-level", "WARNING", *admin) as broker:
        yield BrokerHandle(broker.bootstrap, broker.pid)


class Scraper:
    """GETs /metrics every ``interval`` seconds in a thread; counts scrapes and their bytes."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self.failures = 0
        self.last_size = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:  # the first scrape at once, so even a short round is scraped
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    self.last_size = len(response.read())
                self.scrapes += 1
            except OSError:
                self.failures += 1
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


# --------------------------------------------------------------------------- identical requests


def _frame(spec: api.ApiSpec, version: int, request: Any, correlation_id: int) -> bytes:
    out = bytearray()
    header = api.RequestHeader(spec.key, version, correlation_id, "bench-metrics")
    api.encode_request_header(out, header, spec.request_header_version(version))
    body = bytes(out) + spec.encode_request(request, version).getvalue()
    return _SIZE.pack(len(body)) + body


@dataclass(frozen=True)
class RequestStream:
    """Pre-encoded Produce then Fetch frames for STREAM_TOPIC, the same bytes every round."""

    produce: list[bytes]
    fetch: list[bytes]
    records: int
    value_bytes: int

    @classmethod
    def build(cls, records: int, value_size: int) -> RequestStream:
        per_request = PARTITIONS * STREAM_BATCH_RECORDS
        produces = max(1, records // per_request)
        batch = build_batch([ProducerRecord(None, os.urandom(value_size)) for _ in range(STREAM_BATCH_RECORDS)])
        produce = produce_request(STREAM_TOPIC, PARTITIONS, batch, acks=-1)
        produce_frames = [_frame(pr.SPEC, 9, produce, n) for n in range(produces)]
        # Whole batches only: partition_max_bytes is exactly STREAM_FETCH_BATCHES of them.
        step = STREAM_FETCH_BATCHES * STREAM_BATCH_RECORDS
        fetch_frames = []
        for n, offset in enumerate(range(0, produces * STREAM_BATCH_RECORDS, step)):
            fetch = sessionless_fetch(STREAM_TOPIC, PARTITIONS, STREAM_FETCH_BATCHES * len(batch), offset)
            fetch_frames.append(_frame(fe.SPEC, 12, fetch, n))
        total = produces * per_request
        return cls(produce_frames, fetch_frames, total, total * value_size)

    def run(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            produced = _pipeline(sock, self.produce, STREAM_IN_FLIGHT)
            fetched = _pipeline(sock, self.fetch, 1)
        # The answers are not decoded (client CPU); their size shows the records came back.
        if fetched < self.value_bytes or produced == 0:
            raise SystemExit(f"request stream: fetched {fetched:,} B for {self.value_bytes:,} B of values")


def _pipeline(sock: socket.socket, frames: list[bytes], in_flight: int) -> int:
    """Send ``frames`` with up to ``in_flight`` unanswered; the answers' total size."""
    sent = answered = received = 0
    while answered < len(frames):
        while sent < len(frames) and sent - answered < in_flight:
            sock.sendall(frames[sent])
            sent += 1
        (size,) = _SIZE.unpack(recv_exact(sock, 4))
        received += len(recv_exact(sock, size))
        answered += 1
    return received


# --------------------------------------------------------------------------- clients


class ProduceRequestCount:
    """librdkafka's statistics callback: Produce requests sent so far."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, stats_json: str) -> None:
        brokers = json.loads(stats_json).get("brokers", {})
        self.requests = sum(b.get("req", {}).get("Produce", 0) for b in brokers.values())


@dataclass(frozen=True)
class ClientRound:
    produce_mb_s: float
    consume_mb_s: float
    broker_cpu_s: float
    produce_requests: int


def run_clients(bootstrap: str, records: int, value_size: int, broker_cpu: Callable[[], float]) -> ClientRound:
    """confluent-kafka produce then consume on a fresh topic: throughput and broker CPU."""
    create_topic(bootstrap, TOPIC)
    value = os.urandom(value_size)
    requests = ProduceRequestCount()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 0,
                         "statistics.interval.ms": 100, "stats_cb": requests})  # fmt: skip
    cpu_before = broker_cpu()
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise SystemExit("produce did not finish")
    produce_s = time.perf_counter() - started
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "log_level": 0, "fetch.queue.backoff.ms": 10})  # fmt: skip
    # Leaders known before assign, and no 1 s pauses at queued.min.messages: librdkafka's
    # timers, not the broker, would otherwise fill the window (as in client_loads.py).
    consumer.list_topics(TOPIC, timeout=10.0)
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    received = 0
    started = time.perf_counter()
    deadline = started + 120
    while received < records and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                received += 1
    consume_s = time.perf_counter() - started
    broker_cpu_s = broker_cpu() - cpu_before
    consumer.close()
    if received != records:
        raise SystemExit(f"consumed {received} of {records} records")
    producer.poll(0.3)  # one more statistics report, after the last Produce
    megabytes = records * value_size / 1e6
    return ClientRound(megabytes / produce_s, megabytes / consume_s, broker_cpu_s, requests.requests)


# --------------------------------------------------------------------------- one round


@dataclass(frozen=True)
class RoundResult:
    idle_ms_per_s: float
    stream_us_per_record: float
    clients: ClientRound
    client_us_per_record: float


def run_round(
    broker: BrokerHandle, admin_port: int | None, stream: RequestStream, args: argparse.Namespace
) -> tuple[RoundResult, Scraper | None]:
    create_topic(broker.bootstrap, STREAM_TOPIC)
    # The start-up's one-off work (see the module docstring) stays out of every figure.
    time.sleep(FREEZE_AFTER_S + SETTLE_MARGIN_S)
    scraper = Scraper(f"http://{HOST}:{admin_port}/metrics", args.interval) if admin_port is not None else None
    try:
        before = broker.cpu_seconds()
        time.sleep(args.idle)
        idle = broker.cpu_seconds() - before
        before = broker.cpu_seconds()
        stream.run(broker.bootstrap)
        stream_cpu = broker.cpu_seconds() - before
        clients = run_clients(broker.bootstrap, args.records, args.value_size, broker.cpu_seconds)
    finally:
        if scraper is not None:
            scraper.stop()
    result = RoundResult(
        idle * 1000 / args.idle,
        stream_cpu * 1e6 / stream.records,
        clients,
        clients.broker_cpu_s * 1e6 / args.records,
    )
    return result, scraper


# --------------------------------------------------------------------------- apart from the rounds


def scrape_cost_ms(scrapes: int = 50) -> tuple[float, int]:
    """(ms of event-loop time per /metrics render, bytes) for a broker shaped like the
    rounds' (8 partitions with data, __consumer_offsets, a group with offsets), measured
    in-process: the part of the overhead that does not drown in a shared machine's noise."""

    async def measure() -> tuple[float, int]:
        async with Broker(storage="memory", port=0, admin_port=0) as broker:
            assert broker.state is not None and broker.admin is not None
            broker.state.topics.create(TOPIC, PARTITIONS, {})
            for (api_key, version) in ((0, 11), (1, 16), (3, 12), (8, 9), (9, 9), (12, 4)):
                broker.state.metrics.observe_request(api_key, version, 0.001)
            broker.state.metrics.produced(TOPIC, 10, 1000)
            render = broker.admin.registry
            body = prometheus.render(render)
            started = time.perf_counter()
            for _ in range(scrapes):
                prometheus.render(render)
            return (time.perf_counter() - started) * 1000 / scrapes, len(body)

    return asyncio.run(measure())


def counting_cost_ns(samples: int = 200_000) -> float:
    """Nanoseconds the dispatcher's per-request count adds (observe_request, warm dict)."""
    metrics = BrokerMetrics()
    observe = metrics.observe_request
    started = time.perf_counter_ns()
    for i in range(samples):
        observe(1, 12 + (i & 3), 0.0004)
    return (time.perf_counter_ns() - started) / samples


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size: few records, two rounds per mode")
    parser.add_argument("--rounds", type=int, help="rounds per mode (default 5; --quick 2)")
    parser.add_argument("--records", type=int, help="records per round and phase (default 300000; --quick 30000)")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument(
        "--scrape-interval", type=float, help="seconds between scrapes (default 1; --quick 0.25, as its rounds are short)"
    )
    parser.add_argument("--idle", type=float, help="seconds of the idle measurement (default 3; --quick 1)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    args.records = args.records or (30_000 if args.quick else 300_000)
    args.interval = args.scrape_interval or (0.25 if args.quick else 1.0)
    args.idle = args.idle or (1.0 if args.quick else 3.0)
    stream = RequestStream.build(args.records, args.value_size)
    results: dict[str, list[RoundResult]] = {"off": [], "on": []}
    scrapes = 0
    scrape_bytes = 0
    with tempfile.TemporaryDirectory(prefix="slipstream-bench-metrics-") as tmp:
        for round_no in range(rounds):
            for mode in ("off", "on"):
                workdir = Path(tmp) / f"{mode}-{round_no}"
                workdir.mkdir()
                admin_port = free_port() if mode == "on" else None
                with broker_process(workdir, admin_port) as broker:
                    result, scraper = run_round(broker, admin_port, stream, args)
                if scraper is not None:
                    if scraper.failures or not scraper.scrapes:
                        raise SystemExit(f"{scraper.failures} scrapes failed, {scraper.scrapes} succeeded")
                    scrapes += scraper.scrapes
                    scrape_bytes = max(scrape_bytes, scraper.last_size)
                results[mode].append(result)
                log(
                    f"round {round_no + 1}/{rounds} admin {mode}: idle {result.idle_ms_per_s:.2f} ms/s, "
                    f"identical requests {result.stream_us_per_record:.3f} us/record; clients: produce "
                    f"{result.clients.produce_mb_s:.1f} MB/s in {result.clients.produce_requests} requests, "
                    f"consume {result.clients.consume_mb_s:.1f} MB/s, {result.client_us_per_record:.3f} us/record"
                )
    cost = counting_cost_ns()
    render_ms, render_bytes = scrape_cost_ms()
    print(f"\nAdmin listener overhead: {args.records:,} x {args.value_size} B records per round and phase, "
          f"{PARTITIONS} partitions, {rounds} interleaved rounds per mode (medians); 'on' scraped every "
          f"{args.interval:g} s ({scrapes} scrapes, {scrape_bytes:,} B each).\n")  # fmt: skip
    print("| measure | admin off | admin on + scraped | on/off (CPU rows: off/on) | within 3% |")
    print("|---|---:|---:|---:|---|")
    # (label, value of a round, decimals, lower is better, compared with the target)
    rows: list[tuple[str, Callable[[RoundResult], float], int, bool, bool]] = [
        ("broker CPU idle (ms per s)", lambda r: r.idle_ms_per_s, 2, True, False),
        ("broker CPU per record, identical requests (us)", lambda r: r.stream_us_per_record, 2, True, True),
        ("clients: produce (MB/s)", lambda r: r.clients.produce_mb_s, 2, False, True),
        ("clients: consume (MB/s)", lambda r: r.clients.consume_mb_s, 2, False, True),
        ("clients: Produce requests", lambda r: r.clients.produce_requests, 0, True, False),
        ("clients: broker CPU per record (us, produce + consume)", lambda r: r.client_us_per_record, 2, True, True),
    ]
    ratios = []
    for label, value, decimals, lower_is_better, targeted in rows:
        off = statistics.median(value(r) for r in results["off"])
        on = statistics.median(value(r) for r in results["on"])
        if not targeted:
            print(f"| {label} | {off:.{decimals}f} | {on:.{decimals}f} | | |")
            continue
        # As a speed ratio (on/off throughput; off/on CPU), so below 1 means slower with it on.
        ratio = off / on if lower_is_better else on / off
        ratios.append(ratio)
        verdict = "yes" if ratio >= 1 - TARGET_SLOWDOWN else "no"
        print(f"| {label} | {off:.{decimals}f} | {on:.{decimals}f} | {ratio:.3f} | {verdict} |")
    idle_extra = statistics.median(r.idle_ms_per_s for r in results["on"]) - statistics.median(
        r.idle_ms_per_s for r in results["off"]
    )
    print(f"\nCounting (always on, both modes): {cost:.0f} ns per request in the dispatcher.")
    print(
        f"One /metrics render (in-process, {render_bytes:,} B): {render_ms:.2f} ms of the broker's loop, "
        f"so scraping every {args.interval:g} s takes {render_ms / (args.interval * 1000):.2%} of one core; "
        f"measured idle, the listener and its scrapes took {idle_extra:.2f} ms of broker CPU per second."
    )
    print("The identical-requests row is the listener's cost per record; the clients' rows move with")
    print("their batching (the Produce request count) and, for MB/s, with whatever else runs.")
    log(f"worst on/off ratio {min(ratios):.3f} (target >= {1 - TARGET_SLOWDOWN:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
