"""Consumer statistics: per-partition lag, fetch rate and rebalance count.

``Consumer.statistics()`` / ``AIOConsumer.statistics()`` / ``ConsumerGroup.statistics()``
return a snapshot; with ``statistics_callback=fn`` (and ``statistics_interval_ms``,
default 5 s) the consumer also calls ``fn(snapshot)`` from ``poll`` / ``getmany`` when
an interval has passed, on the application's thread (as librdkafka's ``stats_cb`` is
served from poll); a ``ConsumerGroup`` calls it from a claim's ``messages()`` as records
arrive, and counts the records handed to its claims.

The tracker is sans-I/O: it counts what the facades hand out and is given ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .assignors import TopicPartition


@dataclass(frozen=True)
class PartitionStatistics:
    position: int | None
    """The offset of the next record poll hands out (None before the offset is known)."""
    high_watermark: int | None
    """The partition's log end as of the last fetch (None before the first)."""
    lag: int | None
    """high_watermark - position (None while either is unknown)."""


@dataclass(frozen=True)
class ConsumerStatistics:
    client_id: str
    group_id: str | None
    partitions: dict[TopicPartition, PartitionStatistics] = field(default_factory=dict)
    records_consumed: int = 0
    """Records handed to the application since the consumer was made."""
    fetch_rate: float = 0.0
    """Records handed out per second since the previous snapshot (or the start)."""
    rebalances: int = 0
    """Completed rebalances (assignments received) since the consumer was made."""

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions.values() if p.lag is not None)


StatisticsCallback = Callable[[ConsumerStatistics], None]


class StatisticsTracker:
    def __init__(self, client_id: str, group_id: str | None, now: float, interval_s: float) -> None:
        self.client_id = client_id
        self.group_id = group_id
        self.records_consumed = 0
        self.rebalances = 0
        self.interval_s = interval_s
        self._last_at = now
        self._last_records = 0
        self._next_report = now + interval_s

    def consumed(self, count: int) -> None:
        self.records_consumed += count

    def rebalanced(self) -> None:
        self.rebalances += 1

    def report_due(self, now: float) -> bool:
        return now >= self._next_report

    def snapshot(
        self,
        now: float,
        partitions: Iterable[TopicPartition],
        position: Callable[[TopicPartition], int | None],
        high_watermark: Callable[[TopicPartition], int | None],
    ) -> ConsumerStatistics:
        per_partition = {}
        for tp in sorted(partitions):
            pos, hw = position(tp), high_watermark(tp)
            lag = max(0, hw - pos) if pos is not None and hw is not None else None
            per_partition[tp] = PartitionStatistics(pos, hw, lag)
        elapsed = now - self._last_at
        rate = (self.records_consumed - self._last_records) / elapsed if elapsed > 0 else 0.0
        self._last_at, self._last_records = now, self.records_consumed
        self._next_report = now + self.interval_s
        return ConsumerStatistics(
            client_id=self.client_id,
            group_id=self.group_id,
            partitions=per_partition,
            records_consumed=self.records_consumed,
            fetch_rate=rate,
            rebalances=self.rebalances,
        )
