#!/usr/bin/env python3
"""What the admin listener costs: throughput with it on and scraped every second vs off.

    python bench/metrics_overhead.py            # full run, a few minutes
    python bench/metrics_overhead.py --quick    # smoke run, well under a minute

One run, the two modes interleaved round by round (off, on, off, on, ...) so the
machine's background load falls on both alike. Each round starts a fresh broker
process (disk storage), produces records with confluent-kafka (acks=all) to an
8-partition topic and consumes them back from the beginning. In "on" rounds the
broker runs with ``--admin-port`` and a thread GETs ``/metrics`` every second for the
whole round. The medians of the rounds are compared; the target is "on" at most 3%
slower. The request/byte counters themselves run in both modes (they are always on),
so their cost is measured apart: nanoseconds per request for the dispatcher's count.
Progress goes to stderr, the Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import HOST, free_port, log, slipstream_broker

from slipstream.broker.admin import prometheus
from slipstream.broker.broker import Broker
from slipstream.broker.metrics import BrokerMetrics

TOPIC = "bench-metrics"
PARTITIONS = 8
TARGET_SLOWDOWN = 0.03


class BrokerHandle:
    def __init__(self, bootstrap: str, pid: int) -> None:
        self.bootstrap = bootstrap
        self.process = psutil.Process(pid)

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process has used so far (immune to others' load,
        unlike wall-clock throughput on a shared machine)."""
        times = self.process.cpu_times()
        return float(times.user + times.system)


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


def run_round(bootstrap: str, records: int, value_size: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) for one round on a fresh broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    value = os.urandom(value_size)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 0})  # fmt: skip
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
                         "log_level": 0})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    received = 0
    started = time.perf_counter()
    deadline = started + 120
    while received < records and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                received += 1
    consume_s = time.perf_counter() - started
    consumer.close()
    if received != records:
        raise SystemExit(f"consumed {received} of {records} records")
    megabytes = records * value_size / 1e6
    return megabytes / produce_s, megabytes / consume_s


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size: few records, two rounds per mode")
    parser.add_argument("--rounds", type=int, help="rounds per mode (default 5; --quick 2)")
    parser.add_argument("--records", type=int, help="records per round (default 300000; --quick 30000)")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument(
        "--scrape-interval", type=float, help="seconds between scrapes (default 1; --quick 0.25, as its rounds are short)"
    )
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    records = args.records or (30_000 if args.quick else 300_000)
    interval = args.scrape_interval or (0.25 if args.quick else 1.0)
    results: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
    scrapes = 0
    scrape_bytes = 0
    with tempfile.TemporaryDirectory(prefix="slipstream-bench-metrics-") as tmp:
        for round_no in range(rounds):
            for mode in ("off", "on"):
                workdir = Path(tmp) / f"{mode}-{round_no}"
                workdir.mkdir()
                admin_port = free_port() if mode == "on" else None
                with broker_process(workdir, admin_port) as broker:
                    bootstrap = broker.bootstrap
                    cpu_before = broker.cpu_seconds()
                    scraper = None
                    if admin_port is not None:
                        scraper = Scraper(f"http://{HOST}:{admin_port}/metrics", interval)
                    try:
                        produce, consume = run_round(bootstrap, records, args.value_size)
                    finally:
                        if scraper is not None:
                            scraper.stop()
                    cpu_us = (broker.cpu_seconds() - cpu_before) * 1e6 / records
                    if scraper is not None:
                        if scraper.failures or not scraper.scrapes:
                            raise SystemExit(f"{scraper.failures} scrapes failed, {scraper.scrapes} succeeded")
                        scrapes += scraper.scrapes
                        scrape_bytes = max(scrape_bytes, scraper.last_size)
                results[mode].append((produce, consume, cpu_us))
                log(
                    f"round {round_no + 1}/{rounds} admin {mode}: produce {produce:.1f} MB/s, "
                    f"consume {consume:.1f} MB/s, broker CPU {cpu_us:.1f} us/record"
                )
    cost = counting_cost_ns()
    render_ms, render_bytes = scrape_cost_ms()
    print(f"\nAdmin listener overhead: {records:,} x {args.value_size} B records per round, "
          f"{PARTITIONS} partitions, confluent-kafka, {rounds} interleaved rounds per mode (medians); "
          f"'on' scraped every {interval:g} s ({scrapes} scrapes, {scrape_bytes:,} B each).\n")  # fmt: skip
    print("| measure | admin off | admin on + scraped | on/off | within 3% |")
    print("|---|---:|---:|---:|---|")
    ratios = []
    rows = (("produce (MB/s)", False), ("consume (MB/s)", False), ("broker CPU per record (us, produce + consume)", True))
    for index, (phase, lower_is_better) in enumerate(rows):
        off = statistics.median(r[index] for r in results["off"])
        on = statistics.median(r[index] for r in results["on"])
        # As a speed ratio (on/off throughput; off/on CPU), so below 1 means slower with it on.
        ratio = off / on if lower_is_better else on / off
        ratios.append(ratio)
        print(f"| {phase} | {off:.2f} | {on:.2f} | {ratio:.3f} | {'yes' if ratio >= 1 - TARGET_SLOWDOWN else 'no'} |")
    worst = min(ratios)
    print(f"\nCounting (always on, both modes): {cost:.0f} ns per request in the dispatcher.")
    print(
        f"One /metrics render (in-process, {render_bytes:,} B): {render_ms:.2f} ms of the broker's loop, "
        f"so scraping every {interval:g} s takes {render_ms / (interval * 1000):.2%} of one core."
    )
    print("The CPU row is the steadier figure on a shared machine: wall-clock throughput moves with")
    print("whatever else runs, CPU seconds per record much less.")
    log(f"worst on/off ratio {worst:.3f} (target >= {1 - TARGET_SLOWDOWN:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
