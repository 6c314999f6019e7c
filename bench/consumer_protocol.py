#!/usr/bin/env python3
"""The consumer group protocol (KIP-848) against the classic one, same run, same broker.

    python bench/consumer_protocol.py            # full run, about ten minutes
    python bench/consumer_protocol.py --quick    # smoke run, under three minutes

Three protocols are compared with confluent-kafka (librdkafka) consumers:

- classic, ``range`` (eager: every member gives up everything on each rebalance);
- classic, ``cooperative-sticky`` (incremental, two rebalances per change);
- consumer (``group.protocol=consumer``; the broker assigns, ``uniform`` by default).

1. Herd: 10 and 50 consumers (threads, one process) subscribe together to a 60-partition
   topic: time until every partition is owned and every consumer owns some, assignment
   callbacks, and partitions owned by two consumers at once (ownership is tracked from
   on_assign / on_revoke / on_lost; incremental for cooperative and consumer, the full
   set for eager).
2. Join into a stable group: ten consumers read a 60-partition topic that a producer writes
   at a steady rate; an eleventh joins. Time until it gets its first record, and the longest
   pause on the partitions the ten keep across the rebalance.
3. Capacity: G groups x 5 raw consumer-protocol members (ConsumerGroupHeartbeat v1, one
   connection per member, two load-generator processes); the classic members of
   ``bench/group_coordinator.py`` (JoinGroup/SyncGroup/Heartbeat) on a fresh broker for
   comparison.

Every wait is bounded and every child and broker is killed on exit. Progress goes to
stderr, the Markdown report to stdout. Broker settings can be added with ``--set k=v``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import logging
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer
from harness import (
    HOST,
    MB,
    BenchError,
    BrokerProcess,
    BrokerSpec,
    RssSampler,
    collect,
    connect_members,
    cpu_of,
    create_topics,
    discover_brokers,
    kill_children,
    log,
    mark,
    metadata_request,
    ms,
    on_signal,
    pct,
    ratio,
    recv_exact,
    run_child,
    spec_broker,
    stop_all,
)

SCRIPT = os.path.abspath(__file__)  # the load generators run this script as children
# ... and the group-coordinator benchmark's (its `capacity` mode), for the classic protocol.
GROUP_COORDINATOR_SCRIPT = os.path.join(os.path.dirname(SCRIPT), "group_coordinator.py")

PARTITIONS = 60
MEMBERS_PER_GROUP = 5
FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25
# The interval the broker gives members of a changing group (DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS).
RECONCILING_INTERVAL_MS = 200

# key -> (label, consumer settings, callbacks are incremental)
PROTOCOLS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "range": ("classic, range (eager)", {"partition.assignment.strategy": "range"}, False),
    "coop": (
        "classic, cooperative-sticky",
        {"partition.assignment.strategy": "cooperative-sticky"},
        True,
    ),
    "consumer": ("consumer (KIP-848)", {"group.protocol": "consumer"}, True),
}
ORDER = ("range", "coop", "consumer")


def _quiet(_err: Any) -> None:
    return None


class _Notes(logging.Handler):
    """Keeps librdkafka's log lines that mention fencing or a lost membership."""

    PATTERN = re.compile(r"fenc|UNKNOWN_MEMBER|lost|FENCED|STALE", re.IGNORECASE)

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.PATTERN.search(text) and len(self.lines) < 200:
            self.lines.append(text)


def client_logger(notes: _Notes) -> logging.Logger:
    logger = logging.Logger(f"rdkafka-{id(notes)}", logging.DEBUG)
    logger.addHandler(notes)
    logger.propagate = False
    return logger


def consumer_config(bootstrap: str, group: str, protocol: str, notes: _Notes,
                    errors: list[str], **extra: Any) -> dict[str, Any]:
    def on_error(err: Any) -> None:
        if len(errors) < 200:
            errors.append(str(err))

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "error_cb": on_error,
        "log.connection.close": False,
        "logger": client_logger(notes),
        **PROTOCOLS[protocol][1],
        **extra,
    }
    return conf


def close_all(consumers: list[Consumer], timeout: float = 20.0) -> None:
    closers = [threading.Thread(target=c.close, daemon=True) for c in consumers]
    for t in closers:
        t.start()
    deadline = time.monotonic() + timeout
    for t in closers:
        t.join(max(0.0, deadline - time.monotonic()))


# --------------------------------------------------------------------------- ownership


class Ownership:
    """Who owns which partition, from the rebalance callbacks of every consumer."""

    def __init__(self, consumers: int, incremental: bool) -> None:
        self.lock = threading.Lock()
        self.incremental = incremental
        self.owned: list[set[int]] = [set() for _ in range(consumers)]
        self.owner: dict[int, set[int]] = {}
        self.violations = 0
        self.examples: list[str] = []
        self.assign_calls = [0] * consumers
        self.revoke_calls = [0] * consumers
        self.lost_calls = 0
        self.last_change = 0.0
        self.t0 = time.perf_counter()
        self.events: list[tuple[float, int, str, int]] = []  # (time, consumer, kind, partitions)

    def grow(self) -> int:
        with self.lock:
            self.owned.append(set())
            self.assign_calls.append(0)
            self.revoke_calls.append(0)
            return len(self.owned) - 1

    def assign(self, i: int, parts: list[int]) -> None:
        now = time.perf_counter()
        with self.lock:
            self.assign_calls[i] += 1
            self.events.append((now, i, "+", len(parts)))
            if not self.incremental:
                # Eager: the full new set; anything else the consumer held is gone.
                for p in self.owned[i] - set(parts):
                    self.owner.get(p, set()).discard(i)
                self.owned[i] = set()
            for p in parts:
                others = self.owner.setdefault(p, set()) - {i}
                if others:
                    self.violations += 1
                    if len(self.examples) < 5:
                        self.examples.append(
                            f"p{p} to c{i} while c{sorted(others)} own it"
                            f" (+{now - self.t0:.2f}s)"
                        )
                self.owner[p].add(i)
                self.owned[i].add(p)
            if parts:
                self.last_change = now

    def revoke(self, i: int, parts: list[int], lost: bool = False) -> None:
        now = time.perf_counter()
        with self.lock:
            self.events.append((now, i, "lost" if lost else "-", len(parts)))
            if lost:
                self.lost_calls += 1
            else:
                self.revoke_calls[i] += 1
            for p in parts:
                self.owned[i].discard(p)
                self.owner.get(p, set()).discard(i)
            if parts:
                self.last_change = now

    def timeline(self, since: float) -> str:
        """The callbacks after ``since``, as +ms c<consumer><kind><partitions>."""
        with self.lock:
            return " ".join(f"{(t - since) * 1000:.0f}ms:c{i}{k}{n}"
                            for t, i, k, n in self.events if t >= since)

    def snapshot(self) -> list[set[int]]:
        with self.lock:
            return [set(s) for s in self.owned]

    def complete(self, members: int, balanced: bool = False) -> bool:
        """Every partition owned, each of the first ``members`` consumers owns some."""
        with self.lock:
            sizes = [len(s) for s in self.owned[:members]]
            covered = set().union(*self.owned[:members]) if sizes else set()
        if len(covered) != PARTITIONS or not all(sizes):
            return False
        return not balanced or max(sizes) - min(sizes) <= 1

    def callbacks(self) -> tuple[int, int]:
        with self.lock:
            return sum(self.assign_calls), sum(self.revoke_calls) + self.lost_calls


def subscribe(c: Consumer, topic: str, own: Ownership, i: int) -> None:
    def on_assign(_c: Any, parts: list[Any]) -> None:
        own.assign(i, [tp.partition for tp in parts])

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        own.revoke(i, [tp.partition for tp in parts])

    def on_lost(_c: Any, parts: list[Any]) -> None:
        own.revoke(i, [tp.partition for tp in parts], lost=True)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)


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
    notes = _Notes()
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
            "error_cb": _quiet,
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
    notes = _Notes()
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


# --------------------------------------------------------------------------- (3) capacity


async def capacity_main(port: int, topic: str, first: int, last: int, duration: float,
                        join_timeout: float, regular_ms: int, join_spread: float) -> dict:
    """Groups first..last-1, five raw consumer-protocol members each, one connection each."""
    from slipstream.protocol.apis import consumer_group_heartbeat as cgh

    keys = [(g, m) for g in range(first, last) for m in range(MEMBERS_PER_GROUP)]
    conns, connect_errors, connect_s = await connect_members(port, keys)

    joined: dict[tuple[int, int], float] = {}
    join_errors: list[str] = []
    fenced: dict[str, int] = {}
    other_errors: dict[str, int] = {}
    samples: list[tuple[float, float, bool]] = []  # (sent at, latency, carried an ack)
    intervals: dict[int, int] = {}  # interval the broker gave -> responses in the window
    settled: dict[tuple[int, int], float] = {}  # first response with a settled interval
    recon: list[tuple[float, float, int]] = []
    sent = [0]
    all_joined = asyncio.get_running_loop().create_future()
    window: list[float] = [0.0, 0.0]

    def to_request(parts: Any) -> list[Any] | None:
        if parts is None:
            return None
        return [cgh.ConsumerGroupHeartbeatRequestTopicPartitions(
            topic_id=tp.topic_id, partitions=list(tp.partitions)) for tp in parts]

    async def member(key: tuple[int, int], delay: float) -> None:
        conn = conns.get(key)
        if conn is None:
            return
        await asyncio.sleep(delay)
        group = f"c848-{key[0]}"
        member_id = str(uuid.uuid4())
        request = cgh.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
            subscribed_topic_names=[topic], topic_partitions=[],
        )
        epoch, pending = 0, None
        beats, last_assignment = 0, 0.0
        while True:
            s = time.perf_counter()
            if window[1] and s >= window[1]:
                return
            try:
                r = await conn.request(cgh.SPEC, request, version=1, timeout_s=join_timeout)
            except Exception as exc:
                name = type(exc).__name__
                if key in joined:
                    other_errors[name] = other_errors.get(name, 0) + 1
                else:
                    join_errors.append(f"{name}: {exc}")
                return
            got = time.perf_counter()
            sent[0] += 1
            beats += 1
            if window[0] and s >= window[0]:
                samples.append((s, got - s, request.topic_partitions is not None))
                intervals[r.heartbeat_interval_ms] = intervals.get(r.heartbeat_interval_ms, 0) + 1
            code = r.error_code
            if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
                fenced[str(code)] = fenced.get(str(code), 0) + 1
                return  # lost its place: counted, not rejoined
            if code:
                other_errors[str(code)] = other_errors.get(str(code), 0) + 1
                if key not in joined:
                    join_errors.append(f"error {code}: {r.error_message}")
                    return
            else:
                if key not in joined:
                    joined[key] = got
                    if len(joined) == len(conns) and not all_joined.done():
                        all_joined.set_result(got)
                epoch = r.member_epoch
                if r.assignment is not None:
                    pending = r.assignment.topic_partitions
                    last_assignment = got
                # Settled: an interval above the one a changing group gets (the broker gives
                # settled members the regular interval, or less while it has few members).
                if r.heartbeat_interval_ms > RECONCILING_INTERVAL_MS and key not in settled:
                    settled[key] = got
                    since = joined[key]
                    # (last assignment change, settled) after the join; heartbeats until then
                    recon.append((last_assignment - since, got - since, beats))
            request = cgh.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch,
                topic_partitions=to_request(pending),
            )
            pending = None
            interval = max(r.heartbeat_interval_ms, 50) / 1000
            delay = s + interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)

    t1 = time.perf_counter()
    # The five members of a group join together; groups join at random moments spread over
    # join_spread seconds (all at once, members of every group would heartbeat in phase).
    rng = random.Random(first)
    tasks = []
    for g in range(first, last):
        at = rng.uniform(0, join_spread)
        for m in range(MEMBERS_PER_GROUP):
            tasks.append(asyncio.ensure_future(member((g, m), at)))
    lags: list[float] = []
    lag_by_second: dict[str, float] = {}
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(all_joined), join_spread + join_timeout)
    join_s = time.perf_counter() - t1
    gc.collect()
    gc.freeze()
    window[0] = time.perf_counter()
    window_wall = time.time()
    window[1] = window[0] + duration

    async def lag_monitor() -> None:
        while time.perf_counter() < window[1]:
            s = time.perf_counter()
            await asyncio.sleep(0.01)
            lag = time.perf_counter() - s - 0.01
            lags.append(lag)
            sec = str(int(s - window[0]))
            lag_by_second[sec] = max(lag_by_second.get(sec, 0.0), lag)

    await lag_monitor()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 70)
    for c in conns.values():
        c.abort("done")
    settle_times = [t - t1 for t in settled.values()]
    all_settled = max(settled.values()) if len(settled) == len(joined) and settled else math.inf
    return {
        "members": len(keys),
        "joined": len(joined),
        "connect_s": connect_s,
        "connect_errors": len(connect_errors),
        "first_connect_error": connect_errors[0] if connect_errors else None,
        "join_s": join_s,
        "join_errors": len(join_errors),
        "first_join_error": join_errors[0] if join_errors else None,
        "settled": len(settled),
        "recon": [(round(a, 4), round(b, 4), n) for a, b, n in recon],
        "settle_s": max(settle_times) if settle_times else None,
        "heartbeats": sent[0],
        "window_heartbeats": len(samples),
        "fenced": fenced,
        "other_errors": other_errors,
        "intervals": {str(k): v for k, v in intervals.items()},
        "latencies": [round(x, 6) for _s, x, _a in samples],
        "ack_latencies": [round(x, 6) for _s, x, a in samples if a],
        "settled_latencies": [round(x, 6) for s, x, _a in samples if s >= all_settled],
        # Slow answers (> 50 ms) per second of the window, to see when they happen.
        "slow_by_second": slow_by_second(samples, window[0]),
        "lag_p99": pct(lags, 0.99),
        "lag_max": max(lags) if lags else None,
        "lag_by_second": lag_by_second,
        "window_wall": window_wall,
    }


def slow_by_second(samples: list[tuple[float, float, bool]], start: float) -> dict[str, int]:
    out: dict[str, int] = {}
    for s, x, _a in samples:
        if x > 0.05:
            key = str(int(s - start))
            out[key] = out.get(key, 0) + 1
    return out


def measure_capacity(kind: str, spec: BrokerSpec, workdir: Path, groups: int, duration: float,
                     join_timeout: float, regular_ms: int, join_spread: float) -> dict[str, Any]:
    with spec_broker(spec, workdir, f"capacity-{kind}") as b:
        create_topics(b.bootstrap, {"cap": MEMBERS_PER_GROUP}, 30)
        sampler = RssSampler(b.pid, 0.2)
        # (wall time, broker CPU seconds, load generators' CPU seconds)
        cpu_samples: list[tuple[float, float, float]] = []
        cpu_stop = threading.Event()
        kids: list[subprocess.Popen[str]] = []

        def sample_cpu() -> None:
            while not cpu_stop.wait(0.5):
                cpu_samples.append((time.time(), cpu_of(b.pid),
                                    sum(cpu_of(k.pid) for k in list(kids))))

        cpu_thread = threading.Thread(target=sample_cpu, daemon=True)
        cpu_thread.start()
        probe = BrokerProbe(b.port)
        probe.start()
        cpu0 = cpu_of(b.pid)
        t0 = time.perf_counter()
        for lo, hi in ((0, groups // 2), (groups // 2, groups)):
            if kind == "consumer":
                kids.append(run_child(
                    SCRIPT, ["--child", "capacity", "--child-args", json.dumps(
                        {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                         "duration": duration, "join_timeout": join_timeout,
                         "regular_ms": regular_ms, "join_spread": join_spread})],
                    workdir))
            else:
                kids.append(run_child(
                    GROUP_COORDINATOR_SCRIPT, ["--child", "capacity", "--child-args", json.dumps(
                        {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                         "interval": 3.0, "duration": duration, "join_timeout": join_timeout})],
                    workdir))
        try:
            parts = [collect(k, join_spread + join_timeout + duration + 150) for k in kids]
        finally:
            cpu_stop.set()
            cpu_thread.join(5)
            probe.stop()
        wall = time.perf_counter() - t0
        cap: dict[str, Any] = {
            "members": sum(x["members"] for x in parts),
            "joined": sum(x["joined"] for x in parts),
            "join_s": max(x["join_s"] for x in parts),
            "connect_s": max(x["connect_s"] for x in parts),
            "errors_at_join": sum(x["join_errors"] + x["connect_errors"] for x in parts),
            "first_error": next((x["first_join_error"] or x["first_connect_error"] for x in parts
                                 if x["first_join_error"] or x["first_connect_error"]), None),
            "heartbeats": sum(x["heartbeats"] for x in parts),
            "other_errors": merge([x["other_errors"] for x in parts]),
            "latencies": [v for x in parts for v in x["latencies"]],
            "lag_p99": max(x["lag_p99"] or 0 for x in parts),
            "lag_max": max(x["lag_max"] or 0 for x in parts),
            "rss_end": sampler.current(),
            "broker_cpu": cpu_of(b.pid) - cpu0,
            "wall": wall,
        }
        if kind == "consumer":
            cap["fenced"] = merge([x["fenced"] for x in parts])
            cap["settled"] = sum(x["settled"] for x in parts)
            cap["recon"] = [v for x in parts for v in x["recon"]]
            cap["settle_s"] = max((x["settle_s"] or 0) for x in parts)
            cap["intervals"] = merge([x["intervals"] for x in parts])
            cap["window_heartbeats"] = sum(x["window_heartbeats"] for x in parts)
            cap["ack_latencies"] = [v for x in parts for v in x["ack_latencies"]]
            cap["settled_latencies"] = [v for x in parts for v in x["settled_latencies"]]
            cap["slow_by_second"] = merge([x["slow_by_second"] for x in parts])
            cap["per_second"] = per_second(parts, cpu_samples, probe.samples, duration)
            start = min(x["window_wall"] for x in parts)
            cap["probe"] = [x for t, x in probe.samples if start <= t <= start + duration]
        else:
            cap["fenced"] = merge([x["expired"] for x in parts])
        cap["rss_peak"] = sampler.stop()
        cap["join_spread"] = join_spread if kind == "consumer" else None
        cap["log"] = scan_log(b)
    return cap


class BrokerProbe(threading.Thread):
    """Asks the broker for Metadata every 20 ms on a connection of its own: how long the
    broker itself takes to answer, apart from the load generators' own stalls."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True, name="probe")
        self.port = port
        self.samples: list[tuple[float, float]] = []  # (wall time sent, seconds)
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            sock = socket.create_connection((HOST, self.port), timeout=10)
        except OSError:
            return
        with sock:
            corr = 0
            while not self._stop_event.wait(0.02):
                corr += 1
                t, s = time.time(), time.perf_counter()
                try:
                    sock.sendall(metadata_request(corr))
                    size = struct.unpack(">i", recv_exact(sock, 4))[0]
                    recv_exact(sock, size)
                except (OSError, EOFError, struct.error):
                    return
                self.samples.append((t, time.perf_counter() - s))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(15)


def per_second(parts: list[dict[str, Any]], cpu: list[tuple[float, float, float]],
               probe: list[tuple[float, float]], duration: float) -> str:
    """Second of the window: answers > 50 ms, the generators' worst loop lag, the broker
    probe's slowest answer, CPU % of the broker and of the two load generators together."""
    start = min(x["window_wall"] for x in parts)
    cells = []
    for sec in range(int(duration)):
        slow = sum(x["slow_by_second"].get(str(sec), 0) for x in parts)
        lag = max(x["lag_by_second"].get(str(sec), 0.0) for x in parts)
        lo, hi = start + sec, start + sec + 1
        inside = [x for x in cpu if lo - 0.3 <= x[0] <= hi + 0.3]
        busy = gens = 0.0
        if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
            span = inside[-1][0] - inside[0][0]
            busy = (inside[-1][1] - inside[0][1]) / span * 100
            gens = (inside[-1][2] - inside[0][2]) / span * 100
        worst = max((x for t, x in probe if lo <= t < hi), default=0.0)
        cells.append(f"{sec}:{slow}/{lag * 1000:.0f}ms/{worst * 1000:.0f}ms/{busy:.0f}%+{gens:.0f}%")
    return " ".join(cells)


def merge(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


# --------------------------------------------------------------------------- brokers


def slipstream_spec(settings: list[str]) -> BrokerSpec:
    specs, _missing = discover_brokers(["slipstream"])
    base = specs[0]
    extra = [a for s in settings for a in ("--set", s)]

    def command(port: int, work: Path) -> list[str]:
        return [*base.command(port, work), *extra]

    return BrokerSpec(key=base.key, label=base.label, version=base.version,
                      describe=base.describe + (f"; {' '.join(extra)}" if extra else ""),
                      command=command)


def scan_log(b: BrokerProcess) -> dict[str, Any]:
    """The broker's own log (level WARNING): how many lines, and the first few."""
    try:
        lines = b.log_path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "first": []}
    interesting = [ln for ln in lines if ln.strip()]
    return {"lines": len(interesting), "first": interesting[:5],
            "tracebacks": sum(1 for ln in lines if ln.startswith("Traceback"))}


# --------------------------------------------------------------------------- report


def seconds(v: float | None) -> str:
    return "-" if v is None else ms(v)


def herd_cell(runs: list[HerdRun]) -> str:
    if not runs:
        return "not run"
    bad = [r for r in runs if r.error]
    if bad:
        return f"FAILED in {len(bad)}/{len(runs)} runs ({bad[0].error})"
    t = statistics.median([r.complete_after or 0 for r in runs])
    s = statistics.median([r.settled_after or 0 for r in runs])
    a = statistics.median([r.assigns for r in runs])
    v = sum(r.violations for r in runs)
    unbalanced = sum(1 for r in runs if not r.balanced)
    out = f"{ms(t)} (settled {ms(s)}); {a:.0f} assign / {statistics.median([r.revokes for r in runs]):.0f} revoke cb; {v} double"
    if len(runs) > 1:
        out += f"; max {ms(max(r.complete_after or 0 for r in runs))}"
    if unbalanced:
        out += f"; unbalanced in {unbalanced}"
    return out


def med(values: list[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def client_notes(herds: dict[str, dict[int, list[HerdRun]]], joins: dict[str, list[JoinRun]]
                 ) -> list[str]:
    notes: list[str] = []
    for k in ORDER:
        for n, runs in herds.get(k, {}).items():
            for r in runs:
                if r.examples:
                    notes.append(f"(1) {k} {n}: double ownership: {'; '.join(r.examples)}")
                if r.client_errors:
                    notes.append(f"(1) {k} {n}: {len(r.client_errors)} client errors, first:"
                                 f" {r.client_errors[0]}")
                if r.notes:
                    notes.append(f"(1) {k} {n}: {len(r.notes)} librdkafka lines about fencing/loss,"
                                 f" first: {r.notes[0][:200]}")
        for j in joins.get(k, []):
            if j.examples:
                notes.append(f"(2) {k}: double ownership: {'; '.join(j.examples)}")
            if j.client_errors:
                notes.append(f"(2) {k}: {len(j.client_errors)} client errors, first:"
                             f" {j.client_errors[0]}")
            if j.notes:
                notes.append(f"(2) {k}: {len(j.notes)} librdkafka lines about fencing/loss,"
                             f" first: {j.notes[0][:200]}")
    return notes


def report(args: argparse.Namespace, spec: BrokerSpec, herds: dict[str, dict[int, list[HerdRun]]],
           joins: dict[str, list[JoinRun]], caps: dict[str, dict[str, Any]], errors: list[str],
           logs: dict[str, dict[str, Any]], wall: float, groups: int, duration: float,
           rate: int) -> str:
    out = [f"Command: `{shlex.join(['python', *sys.argv])}`", ""]
    out.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}; confluent-kafka {confluent_kafka.__version__}"
        f" (librdkafka {confluent_kafka.libversion()[0]}); broker {spec.label} {spec.version}"
        f" ({spec.describe}); broker and clients on the same machine. Run took {wall:.0f} s."
    )
    out.append("")
    labels = [PROTOCOLS[k][0] for k in ORDER]
    out.append("| Test | " + " | ".join(labels) + " | consumer ÷ range, ÷ coop | target (consumer) |")
    out.append("|---|" + "---:|" * len(labels) + "---:|---|")

    def row(name: str, cells: list[str], rat: str, target: str) -> None:
        out.append(f"| {name} | " + " | ".join(cells) + f" | {rat} | {target} |")

    for n in (10, 50):
        runs = {k: herds.get(k, {}).get(n, []) for k in ORDER}
        if not any(runs.values()):
            continue
        nr = max(len(r) for r in runs.values())
        times = {k: med([r.complete_after for r in runs[k] if not r.error]) for k in ORDER}
        cons = runs["consumer"]
        ok = None
        if cons:
            ok = (all(not r.error for r in cons) and sum(r.violations for r in cons) == 0
                  and (n != 50 or (times["consumer"] is not None and times["consumer"] <= 1.0)))
        row(f"(1) herd: {n} consumers start together, 60 partitions: all owned and every consumer"
            f" owns some (median of {nr})",
            [herd_cell(runs[k]) for k in ORDER],
            f"{ratio(times['consumer'], times['range'])}, {ratio(times['consumer'], times['coop'])}",
            ("≤ 1 s, 0 double" if n == 50 else "0 double") + mark(ok))
    if any(joins.values()):
        nr = max(len(v) for v in joins.values())

        def jm(k: str, attr: str) -> float | None:
            return med([getattr(r, attr) for r in joins.get(k, []) if not r.error])

        def jcell(k: str, attr: str) -> str:
            runs = joins.get(k, [])
            if not runs:
                return "not run"
            bad = [r for r in runs if r.error]
            if bad:
                return f"FAILED ({bad[0].error})"
            return seconds(jm(k, attr))

        first = {k: jm(k, "first_record") for k in ORDER}
        ok_first = None if first["consumer"] is None else first["consumer"] <= 1.0
        row(f"(2) join: 11th consumer, subscribe → first record ({rate:,} records/s into 60"
            f" partitions; median of {nr})",
            [jcell(k, "first_record") for k in ORDER],
            f"{ratio(first['consumer'], first['range'])}, {ratio(first['consumer'], first['coop'])}",
            "≤ 1 s" + mark(ok_first))
        bal = {k: jm(k, "balanced_after") for k in ORDER}
        row("(2) join: subscribe → last ownership change (all eleven own 5 or 6)",
            [jcell(k, "balanced_after") for k in ORDER],
            f"{ratio(bal['consumer'], bal['range'])}, {ratio(bal['consumer'], bal['coop'])}", "")

        def pause_cell(k: str) -> str:
            runs = [r for r in joins.get(k, []) if not r.error]
            if not runs:
                return jcell(k, "kept_pause")
            ordered = sorted(runs, key=lambda x: x.kept_pause or 0.0)
            r = ordered[(len(ordered) - 1) // 2]  # the median run (the lower one of two)
            worst = ordered[-1].kept_pause
            more = f"; max of {len(runs)} runs {seconds(worst)}" if len(runs) > 1 else ""
            return (f"{seconds(r.kept_pause)} (longest gap {seconds(r.kept_max_gap)} vs normal p99"
                    f" {seconds(r.normal_gap)}, max {seconds(r.baseline_max)}; {r.kept} kept,"
                    f" {r.moved} moved: longest gap {seconds(r.moved_max_gap)}{more})")

        def median_pause(k: str) -> float | None:
            ps = sorted(x.kept_pause or 0.0 for x in joins.get(k, []) if not x.error)
            return ps[(len(ps) - 1) // 2] if ps else None

        pauses = {k: median_pause(k) for k in ORDER}
        ok_pause = None if pauses["consumer"] is None else pauses["consumer"] <= 0.1
        row("(2) join: longest pause of the ten on partitions they keep (gap minus normal p99 gap)",
            [pause_cell(k) for k in ORDER],
            f"{ratio(pauses['consumer'], pauses['range'])}, {ratio(pauses['consumer'], pauses['coop'])}",
            "no pause (≤ 100 ms)" + mark(ok_pause))

        def other(k: str) -> str:
            runs = joins.get(k, [])
            if not runs:
                return "-"
            return (f"{sum(r.assigns for r in runs)} assign / {sum(r.revokes for r in runs)} revoke"
                    f" cb; {sum(r.violations for r in runs)} double; produced"
                    f" {sum(r.produced for r in runs):,} ({sum(r.produce_errors for r in runs)} failed)")

        vio = sum(r.violations for r in joins.get("consumer", []))
        row("(2) join: callbacks, double ownership, records produced (all runs)",
            [other(k) for k in ORDER], "", "0 double" + mark(vio == 0 if joins.get("consumer") else None))
    out.append("")

    if caps:
        spread = caps.get("consumer", {}).get("join_spread")
        out.append(f"Capacity: {groups:,} groups x {MEMBERS_PER_GROUP} members, one connection per"
                   f" member, two load-generator processes, measured for {duration:.0f} s after all"
                   " joined; each on a fresh broker."
                   + (f" Consumer-protocol groups join at random moments over {spread:.0f} s"
                      " (the classic load generator joins 50 groups every 50 ms)." if spread else ""))
        out.append("")
        out.append("| Capacity | consumer protocol (ConsumerGroupHeartbeat v1) | classic"
                   " (JoinGroup/SyncGroup, Heartbeat every 3 s) | consumer ÷ classic | target (consumer) |")
        out.append("|---|---:|---:|---:|---|")
        c, cl = caps.get("consumer"), caps.get("classic")

        def cc(cap: dict[str, Any] | None, fn: Any) -> str:
            if cap is None:
                return "not run"
            if cap.get("error"):
                return f"FAILED ({cap['error']})"
            return str(fn(cap))

        def num(cap: dict[str, Any] | None, fn: Any) -> float | None:
            if cap is None or cap.get("error"):
                return None
            v = fn(cap)
            return None if v is None else float(v)

        def crow(name: str, fn: Any, numfn: Any, target: str) -> None:
            out.append(f"| {name} | {cc(c, fn)} | {cc(cl, fn)} |"
                       f" {ratio(num(c, numfn), num(cl, numfn)) if numfn else ''} | {target} |")

        ok_join = None if num(c, lambda x: x["joined"]) is None else c is not None and c["joined"] == c["members"]
        crow("members joined; time to join all (connect time)",
             lambda x: f"{x['joined']:,}/{x['members']:,} in {x['join_s']:.1f} s (connect"
                       f" {x['connect_s']:.1f} s){'; ' + str(x['first_error']) if x['first_error'] else ''}",
             lambda x: x["join_s"], "all" + mark(ok_join))
        if c is not None and not c.get("error"):
            out.append(f"| members settled (got a settled interval, above 200 ms) and when, from the first join"
                       f" | {c['settled']:,}/{c['members']:,}, last after {c['settle_s']:.1f} s | - | | |")
        if c is not None and not c.get("error") and c["recon"]:
            last = [a for a, _b, _n in c["recon"]]
            sett = [b for _a, b, _n in c["recon"]]
            beats = [float(n) for _a, _b, n in c["recon"]]
            out.append("| per member, from its join: last assignment change / got the regular"
                       " interval / heartbeats sent until then (p50, max) |"
                       f" {ms(pct(last, 0.5))}, {ms(max(last))} / {ms(pct(sett, 0.5))},"
                       f" {ms(max(sett))} / {pct(beats, 0.5):.0f}, {max(beats):.0f} | - | | |")
        nf = num(c, lambda x: sum(x["fenced"].values()))
        crow("fenced / expired (FENCED_MEMBER_EPOCH 110, UNKNOWN_MEMBER_ID 25; classic: 25, 27, 22);"
             " other errors",
             lambda x: f"{sum(x['fenced'].values())} {x['fenced'] or ''}; other {x['other_errors'] or 0}",
             None, "0 fenced" + mark(None if nf is None else nf == 0))
        crow("heartbeats sent (whole run; consumer: in the window)",
             lambda x: f"{x['heartbeats']:,}" + (f" ({x['window_heartbeats']:,}; intervals given"
                                                  f" {x['intervals']})" if "intervals" in x else ""),
             lambda x: x["heartbeats"], "")
        p99c = num(c, lambda x: pct(x["latencies"], 0.99))
        crow("heartbeat latency p50 / p99 / max in the window",
             lambda x: f"{ms(pct(x['latencies'], 0.5))} / {ms(pct(x['latencies'], 0.99))} /"
                       f" {ms(max(x['latencies']) if x['latencies'] else None)}",
             lambda x: pct(x["latencies"], 0.99), "p99 ≤ 50 ms" + mark(None if p99c is None else p99c <= 0.05))
        if c is not None and not c.get("error"):
            sl = c["settled_latencies"]
            out.append(f"| heartbeat latency p50 / p99 / max once every member settled (regular"
                       f" interval; {len(sl):,} heartbeats) | {ms(pct(sl, 0.5))} / {ms(pct(sl, 0.99))}"
                       f" / {ms(max(sl) if sl else None)} | - | | |")
            al = c["ack_latencies"]
            out.append(f"| latency p50 / p99 of heartbeats carrying an acknowledgement, in the"
                       f" window ({len(al):,}) | {ms(pct(al, 0.5))} / {ms(pct(al, 0.99))} | - | | |")
        if c is not None and not c.get("error"):
            pr = c["probe"]
            out.append(f"| broker probe: Metadata every 20 ms on its own connection, p50 / p99 / max"
                       f" in the window ({len(pr):,}) | {ms(pct(pr, 0.5))} / {ms(pct(pr, 0.99))} /"
                       f" {ms(max(pr) if pr else None)} | - | | |")
        crow("load generators' event-loop lag p99 / max (bounds the latencies' accuracy)",
             lambda x: f"{ms(x['lag_p99'])} / {ms(x['lag_max'])}", None, "")
        rss = num(c, lambda x: x["rss_peak"])
        crow("broker RSS peak (end)",
             lambda x: f"{x['rss_peak'] / MB:,.0f} MB ({x['rss_end'] / MB:,.0f} MB)",
             lambda x: x["rss_peak"], "≤ 500 MB" + mark(None if rss is None else rss <= 500 * MB))
        crow("broker CPU over the whole capacity run (wall)",
             lambda x: f"{x['broker_cpu']:.0f} s in {x['wall']:.0f} s",
             lambda x: x["broker_cpu"], "")
        out.append("")

    out.append(
        "(1) consumers are threads in this process, created first and then subscribed together,"
        " client defaults plus the protocol settings (classic: partition.assignment.strategy;"
        " consumer: group.protocol=consumer, the broker's default assignor). Time is from"
        " subscribe until every partition is owned and every consumer owns at least one;"
        " settled = the last ownership change (watched until 3 s pass without one); cb = total"
        " on_assign / on_revoke+on_lost calls over all consumers; double = a partition handed to"
        " a consumer while another still owned it (ownership tracked from the callbacks:"
        " incremental for cooperative-sticky and consumer, the full set for range)."
        " (2) the ten consume (auto.offset.reset=latest) while a producer writes round-robin;"
        " once they have been balanced and reading for a while, an eleventh subscribes."
        " Kept = same owner before the join and after the group settles; gap = time between"
        " consecutive deliveries of a partition to its consumer; normal = the p99 of those gaps"
        " over all partitions in the seconds before the join; pause = the longest gap on a kept"
        " partition from the join until 1 s after the last ownership change, minus normal."
        " The ten learn of the eleventh at their next heartbeat: classic every 3 s (librdkafka's"
        " heartbeat.interval.ms), consumer at the interval the broker gives a settled group"
        " (group.consumer.heartbeat.interval.ms, 5 s unless set), 200 ms while it changes."
        " (3) raw members: v1 join with a generated member id, epoch 0, rebalance timeout 60 s,"
        " the topic, an empty owned list; then heartbeat at the interval each answer gives with the"
        " latest epoch and, once, the assignment of the latest answer that carried one (the"
        " acknowledgement); a fenced or unknown member is counted and stops. Settled = the first"
        " answer with an interval above the 200 ms one a changing group gets. The probe is a separate connection from the parent"
        " process asking for Metadata every 20 ms: its latency is the broker's own responsiveness,"
        " apart from the load generators' event-loop stalls. The classic column is"
        " bench/group_coordinator.py's capacity load generator (heartbeat every 3 s, session 30 s)."
    )
    if logs:
        out.append("")
        out.append("Broker logs (level WARNING):")
        for name, info in logs.items():
            shown = "; ".join(f"`{ln[:160]}`" for ln in info.get("first", []))
            out.append(f"- {name}: {info.get('lines', 0)} lines, {info.get('tracebacks', 0)}"
                       f" tracebacks{': ' + shown if shown else ''}")
    notes = client_notes(herds, joins)
    if notes:
        out.append("")
        out.append("Client-side notes:")
        out.extend(f"- {n}" for n in notes)
    if errors:
        out.append("")
        out.append("Failures:")
        out.extend(f"- {e}" for e in errors)
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Consumer vs classic group protocol (Markdown).")
    p.add_argument("--quick", action="store_true", help="smoke run (1 run each, 200 groups for 15 s)")
    p.add_argument("--runs", type=int, help="runs per herd size and protocol, and per join (default 3; quick 1)")
    p.add_argument("--groups", type=int, help="capacity groups (default 2000; quick 200)")
    p.add_argument("--duration", type=float, help="capacity seconds (default 60; quick 15)")
    p.add_argument("--join-spread", type=float,
                   help="(3) consumer groups join at random moments over this many seconds"
                        " (default groups/100: 2 s quick, 20 s full)")
    p.add_argument("--rate", type=int, default=3000, help="(2) records/s (default 3000)")
    p.add_argument("--sections", default="1,2,3", help="comma-separated sections (default 1,2,3)")
    p.add_argument("--no-classic-capacity", action="store_true",
                   help="(3) skip the classic capacity comparison")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="broker setting, passed on as --set (repeatable)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (broker logs)")
    p.add_argument("--child", choices=["capacity"], help=argparse.SUPPRESS)
    p.add_argument("--child-args", help=argparse.SUPPRESS)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        print(json.dumps(asyncio.run(capacity_main(**json.loads(args.child_args)))))
        return 0

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    runs = args.runs or (1 if quick else 3)
    groups = args.groups or (200 if quick else 2000)
    duration = args.duration or (15.0 if quick else 60.0)
    sections = {int(x) for x in args.sections.split(",") if x.strip()}
    regular_ms = 5000
    for s in args.set:
        if s.startswith("group.consumer.heartbeat.interval.ms="):
            regular_ms = int(s.split("=", 1)[1])
    spec = slipstream_spec(args.set)
    workdir = Path(tempfile.mkdtemp(prefix="slipstream-kip848-bench-"))
    began = time.perf_counter()
    herds: dict[str, dict[int, list[HerdRun]]] = {}
    joins: dict[str, list[JoinRun]] = {}
    caps: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    logs: dict[str, dict[str, Any]] = {}
    try:
        if sections & {1, 2}:
            log("starting the broker for (1) and (2)")
            with spec_broker(spec, workdir, "groups") as b:
                topics = {}
                if 1 in sections:
                    topics.update({f"herd-{k}-{n}-{r}": PARTITIONS for k in ORDER
                                   for n in (10, 50) for r in range(runs)})
                if 2 in sections:
                    topics.update({f"join-{k}-{r}": PARTITIONS for k in ORDER for r in range(runs)})
                create_topics(b.bootstrap, topics, 60)
                if 1 in sections:
                    for n in (10, 50):
                        for r in range(runs):
                            # Interleaved, so drift on the machine hits each protocol alike.
                            for k in ORDER:
                                t = time.perf_counter()
                                try:
                                    h = measure_herd(b.bootstrap, f"herd-{k}-{n}-{r}", k, n, 60, 3.0)
                                except Exception as exc:
                                    h = HerdRun(protocol=k, consumers=n, error=str(exc).splitlines()[0])
                                herds.setdefault(k, {}).setdefault(n, []).append(h)
                                log(f"(1) {k} x{n} run {r + 1}/{runs}: complete"
                                    f" {seconds(h.complete_after)}, settled {seconds(h.settled_after)},"
                                    f" cb {h.assigns}/{h.revokes}, double {h.violations},"
                                    f" balanced {h.balanced}, errors {len(h.client_errors)}"
                                    f"{', ' + h.error if h.error else ''}"
                                    f" ({time.perf_counter() - t:.0f} s)")
                if 2 in sections:
                    for r in range(runs):
                        for k in ORDER:
                            t = time.perf_counter()
                            try:
                                j = measure_join(b.bootstrap, f"join-{k}-{r}", k, args.rate,
                                                 2.0 if quick else 4.0, regular_ms / 1000 + 1.0,
                                                 45)
                            except Exception as exc:
                                j = JoinRun(protocol=k, error=str(exc).splitlines()[0])
                            joins.setdefault(k, []).append(j)
                            log(f"(2) {k} run {r + 1}/{runs}: first record {seconds(j.first_record)},"
                                f" balanced {seconds(j.balanced_after)}, kept {j.kept}, pause"
                                f" {seconds(j.kept_pause)} (gap {seconds(j.kept_max_gap)}, normal"
                                f" {seconds(j.normal_gap)}), moved gap {seconds(j.moved_max_gap)},"
                                f" cb {j.assigns}/{j.revokes}, double {j.violations}"
                                f"{', ' + j.error if j.error else ''}"
                                f" ({time.perf_counter() - t:.0f} s)")
                            log(f"(2) {k} longest kept gap: {j.kept_gap_where}; callbacks after"
                                f" the join (ms:consumer +assigned/-revoked count): {j.timeline}")
                logs["(1)+(2) broker"] = scan_log(b)
        if 3 in sections:
            join_timeout = 60.0 if quick else 120.0
            join_spread = args.join_spread if args.join_spread is not None else groups / 100
            kinds = ["consumer"] if args.no_classic_capacity else ["consumer", "classic"]
            for kind in kinds:
                log(f"(3) capacity, {kind}: {groups} groups x {MEMBERS_PER_GROUP} for {duration:.0f} s")
                try:
                    caps[kind] = measure_capacity(kind, spec, workdir, groups, duration,
                                                  join_timeout, regular_ms, join_spread)
                    logs[f"(3) {kind} broker"] = caps[kind].pop("log")
                    c = caps[kind]
                    log(f"(3) {kind}: joined {c['joined']}/{c['members']} in {c['join_s']:.1f} s,"
                        f" fenced {c['fenced']}, other {c['other_errors']}, p99"
                        f" {ms(pct(c['latencies'], 0.99))}, RSS {c['rss_peak'] / MB:.0f} MB,"
                        f" CPU {c['broker_cpu']:.0f} s in {c['wall']:.0f} s")
                    if kind == "consumer":
                        log(f"(3) consumer: acks p50/p99 {ms(pct(c['ack_latencies'], 0.5))}/"
                            f"{ms(pct(c['ack_latencies'], 0.99))} ({len(c['ack_latencies'])});"
                            " per second of the window (second: answers > 50 ms / worst"
                            " load-generator loop lag / slowest broker probe / broker CPU +"
                            " load generators' CPU):"
                            f" {c['per_second']}")
                except BenchError as exc:
                    caps[kind] = {"error": str(exc).splitlines()[0]}
                    errors.append(f"(3) {kind}: {exc}")
        print(report(args, spec, herds, joins, caps, errors, logs, time.perf_counter() - began,
                     groups, duration, args.rate))
        return 1 if errors else 0
    finally:
        kill_children()
        stop_all()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
