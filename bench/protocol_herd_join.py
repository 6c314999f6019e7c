"""Sections (1) and (2) of consumer_protocol.py, run for each protocol with confluent-kafka
consumers in threads: the herd (10 or 50 consumers subscribe together) and the join (an
eleventh consumer joins ten that read a topic a steady producer writes)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer
from harness import BenchError, pct, quiet_logger
from protocol_consumers import (
    PARTITIONS,
    PROTOCOLS,
    FencingNotes,
    Ownership,
    close_all,
    consumer_config,
    subscribe,
)

# --------------------------------------------------------------------------- (1) herd


@dataclass
class HerdRun:
    protocol: str
    consumers: int
    complete_after: float | None = None  # every partition owned, every consumer owns some
    settled_after: float | None = None  # last ownership change within the watch
    assigns: int = 0
    revokes: int = 0
    max_assigns: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)
    balanced: bool = False
    client_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def measure_herd(bootstrap: str, topic: str, protocol: str, n: int, timeout: float,
                 settle: float) -> HerdRun:
    group = f"herd-{protocol}-{n}-{uuid.uuid4().hex[:8]}"
    own = Ownership(n, PROTOCOLS[protocol][2])
    notes = FencingNotes()
    errors: list[str] = []
    consumers = [
        Consumer(consumer_config(bootstrap, group, protocol, notes, errors)) for _ in range(n)
    ]
    stop = threading.Event()
    gate = threading.Barrier(n + 1)

    def run(i: int) -> None:
        gate.wait(30)
        subscribe(consumers[i], topic, own, i)
        while not stop.is_set():
            consumers[i].poll(0.02)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    result = HerdRun(protocol=protocol, consumers=n)
    try:
        gate.wait(30)
        start = time.perf_counter()
        own.t0 = start
        deadline = start + timeout
        while time.perf_counter() < deadline and not own.complete(n):
            time.sleep(0.002)
        if own.complete(n):
            result.complete_after = time.perf_counter() - start
            # Watch for further changes (a second generation, a late revocation).
            quiet_until = time.perf_counter() + settle
            while time.perf_counter() < min(quiet_until, deadline):
                time.sleep(0.05)
                quiet_until = max(quiet_until, own.last_change + settle)
            result.settled_after = own.last_change - start
            sizes = [len(s) for s in own.snapshot()]
            result.balanced = max(sizes) - min(sizes) <= 1 and min(sizes) > 0
        else:
            sizes = [len(s) for s in own.snapshot()]
            result.error = (f"not complete within {timeout:.0f}s: {sum(1 for s in sizes if s)}/{n}"
                            f" consumers own partitions, {len(set().union(*own.snapshot()))}"
                            f"/{PARTITIONS} partitions owned")
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        close_all(consumers)
    result.assigns, result.revokes = own.callbacks()
    result.max_assigns = max(own.assign_calls)
    result.violations = own.violations
    result.examples = own.examples
    result.client_errors = errors
    result.notes = notes.lines
    return result


# --------------------------------------------------------------------------- (2) join


@dataclass
class JoinRun:
    protocol: str
    first_record: float | None = None  # 11th: subscribe -> first record
    balanced_after: float | None = None  # 11th: subscribe -> every one owns 5 or 6
    kept: int = 0  # partitions with the same owner before and after
    moved: int = 0
    normal_gap: float | None = None  # p99 gap between records of a partition, before
    baseline_max: float | None = None  # longest such gap, before
    kept_max_gap: float | None = None  # longest gap on a kept partition, across the rebalance
    moved_max_gap: float | None = None
    produced: int = 0
    produce_errors: int = 0
    assigns: int = 0
    revokes: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: str = ""
    kept_gap_where: str = ""
    error: str | None = None

    @property
    def kept_pause(self) -> float | None:
        if self.kept_max_gap is None or self.normal_gap is None:
            return None
        return max(0.0, self.kept_max_gap - self.normal_gap)


class SteadyProducer(threading.Thread):
    """Writes ``rate`` records/s round-robin over every partition, in 10 ms ticks."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="producer")
        self.topic, self.rate = topic, rate
        self.sent = 0
        self.failed = 0
        self.stop_event = threading.Event()

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                self.failed += 1

        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "linger.ms": 2,
            "on_delivery": on_delivery,
            "error_cb": quiet_logger,
            "log.connection.close": False,
        })

    def run(self) -> None:
        tick = 0.01
        per_tick = self.rate * tick
        due = 0.0
        nxt = time.perf_counter()
        value = b"x" * 100
        while not self.stop_event.is_set():
            due += per_tick
            while due >= 1:
                self.producer.produce(self.topic, value, partition=self.sent % PARTITIONS)
                self.sent += 1
                due -= 1
            self.producer.poll(0)
            nxt += tick
            delay = nxt - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(10)


def measure_join(bootstrap: str, topic: str, protocol: str, rate: int, baseline: float,
                 stable: float, timeout: float) -> JoinRun:
    """``stable``: seconds without an ownership change before the eleventh joins (longer than
    the heartbeat interval, so that every member is back on its regular interval);
    ``baseline``: the seconds before the join whose gaps are the normal ones."""
    group = f"join-{protocol}-{uuid.uuid4().hex[:8]}"
    own = Ownership(10, PROTOCOLS[protocol][2])
    notes = FencingNotes()
    errors: list[str] = []
    # arrivals[p] = [(receipt time, consumer)], appended by the consumer threads
    arrivals: list[list[tuple[float, int]]] = [[] for _ in range(PARTITIONS)]
    first_of: dict[int, float] = {}
    stop = threading.Event()
    consumers: list[Consumer] = []
    threads: list[threading.Thread] = []
    result = JoinRun(protocol=protocol)
    producer = SteadyProducer(bootstrap, topic, rate)

    def run(i: int) -> None:
        c = consumers[i]
        subscribe(c, topic, own, i)
        while not stop.is_set():
            msgs = c.consume(500, 0.02)
            if not msgs:
                continue
            now = time.perf_counter()
            for m in msgs:
                part = m.partition()
                if m.error() is None and part is not None:
                    arrivals[part].append((now, i))
            first_of.setdefault(i, now)

    def start(i: int) -> None:
        consumers.append(Consumer(consumer_config(bootstrap, group, protocol, notes, errors)))
        t = threading.Thread(target=run, args=(i,), daemon=True)
        threads.append(t)
        t.start()

    try:
        producer.start()
        t0 = time.perf_counter()
        for i in range(10):
            start(i)
        deadline = t0 + timeout
        # Stable and consuming: the ten own everything, balanced, and every partition has
        # delivered records for a while since the last ownership change.
        while time.perf_counter() < deadline:
            if (own.complete(10, balanced=True)
                    and time.perf_counter() - own.last_change > max(stable, baseline)
                    and all(a and a[-1][0] > own.last_change + baseline / 2 for a in arrivals)):
                break
            time.sleep(0.05)
        else:
            raise BenchError(f"the ten were not stable and consuming within {timeout:.0f}s")
        before = own.snapshot()
        idx = own.grow()
        joined_at = time.perf_counter()
        start(idx)
        deadline = joined_at + timeout
        while time.perf_counter() < deadline:
            if idx in first_of and own.complete(11, balanced=True):
                break
            time.sleep(0.005)
        if idx not in first_of:
            raise BenchError(f"the 11th got no record within {timeout:.0f}s")
        result.first_record = first_of[idx] - joined_at
        if not own.complete(11, balanced=True):
            raise BenchError(f"not balanced over 11 within {timeout:.0f}s"
                             f" (sizes {[len(s) for s in own.snapshot()]})")
        # Let a late revocation show itself, then keep reading 1 s more.
        quiet_until = time.perf_counter() + 1.5
        while time.perf_counter() < min(quiet_until, deadline):
            time.sleep(0.05)
            quiet_until = max(quiet_until, own.last_change + 1.5)
        result.balanced_after = own.last_change - joined_at
        time.sleep(1.0)
        window_end = time.perf_counter()
        after = own.snapshot()
        result.timeline = own.timeline(joined_at)
    finally:
        stop.set()
        producer.stop_event.set()
        for t in threads:
            t.join(5)
        producer.join(15)
        close_all(consumers)
        result.assigns, result.revokes = own.callbacks()
        result.violations, result.examples = own.violations, own.examples
        result.client_errors, result.notes = errors, notes.lines
        result.produced, result.produce_errors = producer.sent, producer.failed
    owner_before = {p: i for i, ps in enumerate(before) for p in ps}
    owner_after = {p: i for i, ps in enumerate(after) for p in ps}
    kept = [p for p in range(PARTITIONS) if owner_before.get(p) == owner_after.get(p)]
    moved = [p for p in range(PARTITIONS) if p not in kept]
    result.kept, result.moved = len(kept), len(moved)

    def gaps(p: int, lo: float, hi: float, consumer: int | None
             ) -> list[tuple[float, float, int]]:
        """(gap, its start relative to the join, partition) for gaps ending in (lo, hi]."""
        times = sorted(t for t, c in arrivals[p] if consumer is None or c == consumer)
        return [(b - a, a - joined_at, p) for a, b in itertools.pairwise(times) if lo < b <= hi]

    base = [g for p in range(PARTITIONS)
            for g, _at, _p in gaps(p, joined_at - baseline, joined_at, owner_before.get(p))]
    result.normal_gap = pct(base, 0.99)
    result.baseline_max = max(base) if base else None
    kept_gaps = [g for p in kept for g in gaps(p, joined_at, window_end, owner_after[p])]
    moved_gaps = [g for p in moved for g in gaps(p, joined_at, window_end, None)]
    if kept_gaps:
        gap, at, part = max(kept_gaps)
        result.kept_max_gap = gap
        result.kept_gap_where = (f"p{part} of c{owner_after[part]}, from {at * 1000:+.0f} ms"
                                 " after the join")
    result.moved_max_gap = max(moved_gaps)[0] if moved_gaps else None
    return result
