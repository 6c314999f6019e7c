"""Sections (1) and (2) of group_coordinator.py, with confluent-kafka consumers: one
consumer's subscribe -> first record, and 10 or 50 consumers started together (threads)
until every one has its assignment, counting generations."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer
from harness import BenchError, create_topics, quiet_logger


def first_record_once(bootstrap: str, topic: str, group: str, timeout: float) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # The only non-default setting: the record was produced before subscribing.
            "auto.offset.reset": "earliest",
            "error_cb": quiet_logger,
            "log.connection.close": False,
        }
    )
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        deadline = start + timeout
        while time.perf_counter() < deadline:
            msg = consumer.poll(0.005)
            if msg is None:
                continue
            if msg.error():
                continue
            return time.perf_counter() - start
        raise BenchError(f"no record within {timeout:.0f}s")
    finally:
        closer = threading.Thread(target=consumer.close, daemon=True)
        closer.start()
        closer.join(10)


def produce_one(bootstrap: str, topic: str, timeout: float) -> None:
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "on_delivery": on_delivery, "error_cb": quiet_logger}
    )
    producer.produce(topic, b"hello", partition=0)
    if producer.flush(timeout) or errors:
        raise BenchError(f"produce failed: {errors[0] if errors else 'timeout'}")


@dataclass
class FirstRecord:
    times: list[float] = field(default_factory=list)
    error: str | None = None


def measure_first_record(bootstrap: str, runs: int, timeout: float) -> FirstRecord:
    result = FirstRecord()
    try:
        create_topics(bootstrap, {"first-record": 1}, timeout)
        produce_one(bootstrap, "first-record", timeout)
        for i in range(runs):
            result.times.append(first_record_once(bootstrap, "first-record", f"fr-{i}", timeout))
    except Exception as exc:
        result.error = str(exc).splitlines()[0]
    return result


@dataclass
class Herd:
    consumers: int
    stable_after: float | None = None
    generations: int | None = None
    assigned: int = 0
    error: str | None = None


def measure_herd(bootstrap: str, topic: str, n: int, timeout: float, settle: float) -> Herd:
    """Start n consumers in threads at once; wait until all have assignments and settle."""
    group = f"herd-{n}-{random.randrange(1 << 30)}"
    assigns: list[list[float]] = [[] for _ in range(n)]
    current: list[int] = [0] * n
    stop = threading.Event()
    start_gate = threading.Barrier(n + 1)
    start = 0.0
    consumers: list[Consumer] = []
    callbacks: list[tuple[Any, Any]] = []

    def make(i: int) -> Consumer:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            assigns[i].append(time.perf_counter())
            current[i] = len(parts)

        def on_revoke(_c: Any, _parts: list[Any]) -> None:
            current[i] = 0

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "error_cb": quiet_logger,
                "log.connection.close": False,
            }
        )
        callbacks.append((on_assign, on_revoke))
        return c

    def run(i: int) -> None:
        c = consumers[i]
        start_gate.wait(30)
        on_assign, on_revoke = callbacks[i]
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            c.poll(0.02)

    consumers = [make(i) for i in range(n)]
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    result = Herd(consumers=n)
    try:
        start_gate.wait(30)
        start = time.perf_counter()
        deadline = start + timeout
        while time.perf_counter() < deadline:
            if all(current[i] > 0 for i in range(n)):
                break
            time.sleep(0.005)
        # Keep polling a while to catch any further rebalance.
        time.sleep(settle)
        result.assigned = sum(1 for i in range(n) if current[i] > 0)
        if result.assigned < n:
            result.error = f"only {result.assigned}/{n} consumers assigned within {timeout:.0f}s"
        else:
            result.stable_after = max(a[-1] for a in assigns) - start
            result.generations = max(len(a) for a in assigns)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        closers = [threading.Thread(target=c.close, daemon=True) for c in consumers]
        for t in closers:
            t.start()
        for t in closers:
            t.join(15)
    return result
