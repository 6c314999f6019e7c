"""The confluent-kafka consumers of consumer_protocol.py under each group protocol: the
protocols compared, their settings, and partition ownership tracked from the rebalance
callbacks (to time a rebalance and to catch a partition owned by two consumers at once)."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from confluent_kafka import Consumer

PARTITIONS = 60

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


class FencingNotes(logging.Handler):
    """Keeps librdkafka's log lines that mention fencing or a lost membership."""

    PATTERN = re.compile(r"fenc|UNKNOWN_MEMBER|lost|FENCED|STALE", re.IGNORECASE)

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.PATTERN.search(text) and len(self.lines) < 200:
            self.lines.append(text)


def client_logger(notes: FencingNotes) -> logging.Logger:
    logger = logging.Logger(f"rdkafka-{id(notes)}", logging.DEBUG)
    logger.addHandler(notes)
    logger.propagate = False
    return logger


def consumer_config(bootstrap: str, group: str, protocol: str, notes: FencingNotes,
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
