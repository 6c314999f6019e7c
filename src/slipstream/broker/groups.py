"""The asyncio adapter around the pure group coordinator (Kafka's purgatory + runtime).

All coordinator work - requests and timer callbacks - goes through one lock, so
the state machine sees one ordered stream (one writer). A parked JoinGroup or
SyncGroup is a future, completed when a later result carries its completion.
Records the coordinator emits are appended to ``__consumer_offsets`` and replayed
into it before the next operation runs; responses that depend on them are
delivered only after the append (and, with the fsync policy, the fsync).
At start the offsets topic is replayed in the background; until it is done the
coordinator answers COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..coordinator import (
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorResult,
    GroupCoordinator,
    ManualTimer,
    Pending,
    Record,
)
from ..coordinator.result import RequestContext as CoordinatorContext
from ..log.api import OffsetOutOfRange
from ..protocol.errors import ErrorCode
from ..protocol.records import ProducerRecord, build_batch, iter_records
from ..protocol.schema import Struct
from .state import BrokerState

log = logging.getLogger(__name__)

_LOAD_READ_BYTES = 1 << 20


class GroupCoordinatorAdapter:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        c = state.config
        self.config = CoordinatorConfig(
            group_min_session_timeout_ms=c.group_min_session_timeout_ms,
            group_max_session_timeout_ms=c.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            group_max_size=c.group_max_size,
            offsets_retention_ms=c.offsets_retention_minutes * 60_000,
            offset_metadata_max_bytes=c.offset_metadata_max_bytes,
            offsets_topic_num_partitions=c.offsets_topic_partitions,
        )
        self.timer = ManualTimer(clock=state.clock)
        self.coordinator = GroupCoordinator(
            self.config, timer=self.timer, partition_exists=self._partition_exists
        )
        self._lock = asyncio.Lock()
        self._parked: dict[Pending, asyncio.Future[Struct]] = {}
        self._timer_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _partition_exists(self, topic: str, partition: int) -> bool:
        return self.state.topics.partition(topic, partition) is not None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        topics = self.state.topics
        if topics.get(OFFSETS_TOPIC) is None:
            topics.create(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
            )
        self.coordinator.begin_loading()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._load()))
        self._tasks.append(loop.create_task(self._timer_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for fut in self._parked.values():
            if not fut.done():
                fut.cancel()
        self._parked.clear()

    async def _load(self) -> None:
        topic = self.state.topics.get(OFFSETS_TOPIC)
        assert topic is not None
        replayed = 0
        async with self._lock:
            now = self.state.clock()
            for plog in topic.partitions:
                offset = plog.log_start_offset
                while offset < plog.log_end_offset:
                    try:
                        result = plog.read(offset, _LOAD_READ_BYTES)
                    except OffsetOutOfRange:
                        break
                    if not result.size:
                        break
                    for chunk in result.chunks:
                        for record in iter_records(chunk):
                            if record.offset < offset or record.key is None:
                                continue
                            self.coordinator.replay(record.key, record.value, now)
                            replayed += 1
                            offset = record.offset + 1
                    await asyncio.sleep(0)  # let other connections be served while we load
            self.coordinator.finish_loading(self.state.clock())
        self._timer_changed.set()
        log.info("group coordinator loaded %d records from %s", replayed, OFFSETS_TOPIC)

    # ---------------------------------------------------------------- requests

    async def handle(self, api_key: int, ctx: CoordinatorContext, request: Struct) -> Struct:
        return await self.call(lambda now: self.coordinator.handle(api_key, ctx, request, now))

    async def call(self, operation: Callable[[int], CoordinatorResult]) -> Struct:
        async with self._lock:
            result = operation(self.state.clock())
            waiter = await self._carry_out(result)
        self._timer_changed.set()
        if isinstance(waiter, asyncio.Future):
            return await waiter
        return waiter

    async def _carry_out(self, result: CoordinatorResult) -> Any:
        """Carry out one result (see coordinator/result.py); returns the response or its future."""
        own: Any = result.response
        while True:
            if result.pending is not None:
                fut: asyncio.Future[Struct] = asyncio.get_running_loop().create_future()
                self._parked[result.pending] = fut
                if own is None:
                    own = fut
            error = ErrorCode.NONE
            if result.records:
                error = await self._append(result.records)
            self._deliver(result)
            if result.after_append is None:
                return own
            result = result.after_append(error, self.state.clock())

    def _deliver(self, result: CoordinatorResult) -> None:
        for completion in result.completions:
            fut = self._parked.pop(completion.pending, None)
            if fut is not None and not fut.done():
                fut.set_result(completion.response)

    async def _append(self, records: list[Record]) -> int:
        """Append to the offsets topic and replay what was written; returns an error code."""
        by_partition: defaultdict[int, list[Record]] = defaultdict(list)
        for record in records:
            by_partition[record.partition].append(record)
        now = self.state.clock()
        try:
            for partition, group in by_partition.items():
                plog = self.state.topics.partition(OFFSETS_TOPIC, partition)
                if plog is None:
                    return ErrorCode.NOT_COORDINATOR
                batch = build_batch(
                    [ProducerRecord(r.key, r.value, timestamp_ms=now) for r in group]
                )
                plog.append([bytearray(batch)], now_ms=now, log_append_time=False)
                for record in group:
                    self.coordinator.replay(record.key, record.value, now)
                if self.state.config.durability == "fsync":
                    await self.state.committer.sync(plog)
                self.state.notifier.notify((OFFSETS_TOPIC, partition))
        except OSError as exc:
            log.error("writing %s failed: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    # ---------------------------------------------------------------- timers

    async def _timer_loop(self) -> None:
        while True:
            deadline = self.timer.next_deadline()
            self._timer_changed.clear()
            if deadline is None:
                await self._timer_changed.wait()
                continue
            delay = (deadline - self.state.clock()) / 1000
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._timer_changed.wait(), delay)
                continue
            async with self._lock:
                now = self.state.clock()
                while (expired := self.timer.pop_expired(now)) is not None:
                    try:
                        await self._carry_out(expired.callback(now))
                    except Exception:
                        log.exception("group coordinator timer %s failed", expired.key)
