#!/usr/bin/env python3
"""The 100 B x 1 partition rows of broker_throughput.py, brokers interleaved phase by phase,
with what librdkafka saw of each broker's requests.

    python bench/request_latency.py                      # Slipstream and Tansu, 7 rounds
    python bench/request_latency.py --quick              # smoke run
    python bench/request_latency.py --brokers slipstream,tansu --rounds 5 --messages 300000

Every broker runs at once (idle but for its turn); each round produces into a fresh
topic on each broker in turn, then consumes it back on each in turn, with the phases of
``produce_consume.py`` (same client settings as broker_throughput.py). On a machine whose
load moves, brokers measured seconds apart see about the same load, so the per-round ratio
is steadier than rates from runs minutes apart; the medians of the ratios are reported
with the load average. Besides the rate, each phase reports from librdkafka's statistics
(``statistics.interval.ms``): the requests it sent, their round-trip time as the client
measured it (send to the whole response read), the bytes it received per Fetch and the
time from ``assign`` to the first record; and the broker's own CPU time (10 ms ticks).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from harness import (
    BenchError,
    BrokerProcess,
    child_env,
    cpu_of,
    create_topics,
    discover_brokers,
    free_port,
    load_average,
    log,
    markdown_table,
    on_signal,
    work_directory,
)
from produce_consume import WARMUP_TOPIC, consumer_config, producer_config, warm_up_consumer

VALUE_BYTES = 100
STATS_INTERVAL_MS = 100


@dataclass
class Phase:
    """One timed phase on one broker, with what the client's statistics said of it."""

    rate: float
    requests: int
    rtt_avg_ms: float
    rtt_max_ms: float
    cpu_s: float
    rx_per_request: float = 0.0
    first_record_ms: float = 0.0


@dataclass
class Phases:
    produce: list[Phase] = field(default_factory=list)
    consume: list[Phase] = field(default_factory=list)


def _broker_stats(raw: list[str], api: str) -> tuple[int, float, float, int, int]:
    """(requests of ``api``, mean and max round trip in ms, bytes received, responses) over
    every statistics window emitted (each holds the round trips of its own window only)."""
    rtt_sum = 0.0
    rtt_count = 0
    rtt_max = 0
    last: dict[str, Any] = {}
    for text in raw:
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] < 0:
                continue  # the bootstrap entry
            rtt = broker["rtt"]
            rtt_sum += rtt["sum"]
            rtt_count += rtt["cnt"]
            rtt_max = max(rtt_max, rtt["max"])
            last = broker
    requests = last.get("req", {}).get(api, 0)
    mean = rtt_sum / rtt_count / 1000 if rtt_count else 0.0
    return requests, mean, rtt_max / 1000, last.get("rxbytes", 0), last.get("rx", 0)


def _settle_stats(poll: Any) -> None:
    """Let one more statistics window close after the phase, so it holds the last requests."""
    time.sleep(STATS_INTERVAL_MS / 1000 * 1.5)
    poll(0)


def produce(proc: BrokerProcess, topic: str, count: int, timeout: float) -> Phase:
    errors: list[str] = []
    stats: list[str] = []
    config = producer_config(proc.bootstrap, True, errors)
    config.update({"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": stats.append})
    producer = Producer(config)
    producer.produce(WARMUP_TOPIC, b"warm-up", partition=0)
    if producer.flush(min(timeout, 30.0)) or errors:
        raise BenchError(f"warm-up message failed: {errors[0] if errors else 'timeout'}")
    producer.poll(STATS_INTERVAL_MS / 1000 * 1.5)
    stats.clear()  # the windows so far hold the warm-up's requests
    value = os.urandom(VALUE_BYTES)
    cpu = cpu_of(proc.pid)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
        if not i & 1023:
            producer.poll(0)
    if producer.flush(timeout) or errors:
        raise BenchError(f"produce failed: {errors[0] if errors else 'timeout'}")
    elapsed = time.perf_counter() - start
    cpu = cpu_of(proc.pid) - cpu
    _settle_stats(producer.poll)
    requests, rtt_avg, rtt_max, _, _ = _broker_stats(stats, "Produce")
    return Phase(count / elapsed, requests, rtt_avg, rtt_max, cpu)


def consume(
    proc: BrokerProcess, topic: str, count: int, overrides: dict[str, Any], timeout: float
) -> Phase:
    stats: list[str] = []
    config = consumer_config(proc.bootstrap, f"latency-{topic}-{os.getpid()}", overrides)
    warm_up_consumer(config, 30.0)
    consumer = Consumer(
        {**config, "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": stats.append}
    )
    try:
        consumer.list_topics(topic, timeout=10.0)
        stats.clear()
        cpu = cpu_of(proc.pid)
        start = time.perf_counter()
        deadline = start + timeout
        first: float | None = None
        consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        received = 0
        while received < count:
            if time.perf_counter() > deadline:
                raise BenchError(f"received {received} of {count} within {timeout:.0f}s")
            for msg in consumer.consume(min(10_000, count - received), 0.2):
                if msg.error() is not None:
                    continue
                if first is None:
                    first = time.perf_counter() - start
                received += 1
                msg.value()
        elapsed = time.perf_counter() - start
        cpu = cpu_of(proc.pid) - cpu
        _settle_stats(consumer.poll)
    finally:
        consumer.close()
    requests, rtt_avg, rtt_max, rx_bytes, responses = _broker_stats(stats, "Fetch")
    return Phase(
        count / elapsed, requests, rtt_avg, rtt_max, cpu,
        rx_per_request=rx_bytes / responses if responses else 0.0,
        first_record_ms=(first or 0.0) * 1000,
    )  # fmt: skip


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def report(
    results: dict[str, Phases], labels: dict[str, str], count: int, loads: list[str], took: float
) -> str:
    lines = [
        f"Command: `{' '.join(['python', *sys.argv])}`",
        "",
        f"{len(next(iter(results.values())).produce)} rounds of {count:,} x {VALUE_BYTES} B, 1 partition;"
        f" 1-minute load average {loads[0]} at the start, {loads[-1]} at the end; took {took:.0f} s."
        " Medians over the rounds (round trip: librdkafka's, send to the whole response read).",
        "",
    ]
    header = [
        "Phase",
        "Broker",
        "rate (msg/s)",
        "requests",
        "round trip mean / max",
        "CPU s per M records",
    ]
    rows = []
    for op in ("produce", "consume"):
        for key, phases in results.items():
            runs: list[Phase] = getattr(phases, op)
            row = [
                op,
                labels[key],
                f"{_median([p.rate for p in runs]):,.0f}",
                f"{_median([p.requests for p in runs]):.0f}",
                f"{_median([p.rtt_avg_ms for p in runs]):.2f} / {_median([p.rtt_max_ms for p in runs]):.1f} ms",
                f"{_median([p.cpu_s for p in runs]) / count * 1e6:.2f}",
            ]
            if op == "consume":
                row[3] += (
                    f" ({_median([p.rx_per_request for p in runs]) / 1e6:.2f} MB each,"
                    f" first record after {_median([p.first_record_ms for p in runs]):.0f} ms)"
                )
            rows.append(row)
    lines += markdown_table(header, rows)
    keys = list(results)
    if len(keys) > 1:
        lines += ["", "Per-round ratios of the first broker to each other (median):", ""]
        for other in keys[1:]:
            for op in ("produce", "consume"):
                mine = [p.rate for p in getattr(results[keys[0]], op)]
                theirs = [p.rate for p in getattr(results[other], op)]
                ratios = [a / b for a, b in zip(mine, theirs, strict=True) if b]
                lines.append(
                    f"- {op}, {labels[keys[0]]} / {labels[other]}: "
                    + ", ".join(f"{r:.2f}" for r in ratios)
                    + f" (median {_median(ratios):.2f}x)"
                )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers",
        default="slipstream,tansu",
        help="comma-separated, the first compared to the rest",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 20,000")
    parser.add_argument("--rounds", type=int, help="rounds (default 7; quick 1)")
    parser.add_argument(
        "--messages", type=int, help="records per phase (default 300000; quick 20000)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per phase")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 7)
    args.messages = args.messages or (20_000 if args.quick else 300_000)
    signal.signal(signal.SIGTERM, on_signal)
    specs, missing = discover_brokers([b.strip() for b in args.brokers.split(",") if b.strip()])
    if missing:
        log(f"not found: {', '.join(missing)}")
    began = time.perf_counter()
    loads = [load_average()]
    with work_directory("request-latency-", args.keep) as work:
        procs: dict[str, BrokerProcess] = {}
        for spec in specs:
            broker_dir = work / spec.key
            broker_dir.mkdir()
            proc = BrokerProcess(
                spec, free_port(), broker_dir, broker_dir / "broker.log", child_env(work)
            )
            proc.wait_ready(30.0)
            procs[spec.key] = proc
            create_topics(
                proc.bootstrap,
                {WARMUP_TOPIC: 1, **{f"latency-r{r}": 1 for r in range(args.rounds)}},
                30.0,
            )
        results = {key: Phases() for key in procs}
        for r in range(args.rounds):
            topic = f"latency-r{r}"
            for key, proc in procs.items():
                phase = produce(proc, topic, args.messages, args.timeout)
                results[key].produce.append(phase)
                log(f"round {r + 1}: {key} produce {phase.rate:,.0f} msg/s, load {load_average()}")
            for key, proc in procs.items():
                phase = consume(
                    proc, topic, args.messages, proc.spec.consumer_overrides, args.timeout
                )
                results[key].consume.append(phase)
                log(f"round {r + 1}: {key} consume {phase.rate:,.0f} msg/s, load {load_average()}")
        loads.append(load_average())
        labels = {key: proc.spec.label for key, proc in procs.items()}
        print(report(results, labels, args.messages, loads, time.perf_counter() - began))
    return 0


if __name__ == "__main__":
    sys.exit(main())
