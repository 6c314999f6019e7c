"""The asyncio adapter around the pure transaction coordinator.

Requests and timer callbacks run one at a time under a lock, each carried out to
the end (records appended to ``__transaction_state``, replayed, fsynced under the
fsync policy, then ``after_append``) before the next: the coordinator sees one
ordered stream. Marker jobs run outside the lock as tasks: data partitions through
``txn_markers.write_txn_markers``, the ``__consumer_offsets`` partition of a
transaction's offsets through the group coordinator (which replays its own
marker); what fails for a reason that may pass is retried with a backoff; once
every partition has its marker, ``job.on_written`` runs on the ordered path and
writes CompleteCommit/CompleteAbort.

``__transaction_state`` is created when the first transactional producer arrives
(as Kafka does); a broker that has one replays it at start, answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile, then writes again the markers of
transactions it finds prepared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..coordinator import OFFSETS_TOPIC, CoordinatorResult, ManualTimer, Record
from ..coordinator.transactions import (
    TRANSACTION_STATE_TOPIC,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnResult,
)
from ..protocol.errors import ErrorCode
from ..protocol.records import ProducerRecord, build_batch
from ..protocol.schema import Struct
from .coordinator_timers import CoordinatorTimerLoop
from .groups import GroupCoordinatorAdapter
from .offsets_replay import replay_transaction_log
from .state import BrokerState
from .txn_markers import TxnMarker, write_txn_markers

log = logging.getLogger(__name__)

MARKER_RETRY_S = 0.1
MARKER_RETRY_MAX_S = 2.0
# A marker refused for one of these will never be accepted: the partition is done.
# (A deleted topic; a newer producer epoch or coordinator already wrote past it.)
_MARKER_GIVE_UP = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)


class TransactionCoordinatorAdapter:
    def __init__(self, state: BrokerState, groups: GroupCoordinatorAdapter) -> None:
        self.state = state
        self.groups = groups
        c = state.config
        self.config = TxnConfig(
            transaction_max_timeout_ms=c.transaction_max_timeout_ms,
            transactional_id_expiration_ms=c.transactional_id_expiration_ms,
            transaction_state_num_partitions=c.transaction_state_log_num_partitions,
            offsets_topic_num_partitions=c.offsets_topic_partitions,
        )
        self.timer = ManualTimer(clock=state.clock)
        self.coordinator = TransactionCoordinator(
            self.config, timer=self.timer, allocate_producer_id=state.producer_ids.allocate
        )
        self._lock = asyncio.Lock()
        # The loop reads state.clock at each wake-up: it may be replaced (a manual clock).
        self._timers = CoordinatorTimerLoop(self.timer, lambda: self.state.clock(), self._run_due_timers)
        self._tasks: list[asyncio.Task[None]] = []
        self._marker_tasks: set[asyncio.Task[None]] = set()
        self._loaded = asyncio.Event()

    # ---------------------------------------------------------------- lifecycle

    async def start(self, *, load: bool = True) -> None:
        """``load=False``: the caller calls ``load`` later (a cluster member, once it
        holds its leases: only then are its partitions read from the database)."""
        loop = asyncio.get_running_loop()
        if self.state.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            self.coordinator.begin_loading()
            if load:
                self.load()
        else:
            self._loaded.set()
        self._tasks.append(loop.create_task(self._timers.run()))

    def load(self) -> None:
        """Replay ``__transaction_state`` in the background (once, after ``start(load=False)``)."""
        if self.coordinator.is_loading and not self._loaded.is_set():
            self._tasks.append(asyncio.get_running_loop().create_task(self._load()))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._marker_tasks]:
            task.cancel()
        for task in [*self._tasks, *self._marker_tasks]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._marker_tasks.clear()

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use (a transactional producer arrived)."""
        if self.state.topics.ensure(
            TRANSACTION_STATE_TOPIC,
            self.config.transaction_state_num_partitions,
            {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
        ):
            log.info("created %s", TRANSACTION_STATE_TOPIC)

    async def _load(self) -> None:
        topic = self.state.topics.get(TRANSACTION_STATE_TOPIC)
        assert topic is not None
        max_uncompressed = int(self.state.topics.effective_configs(topic)["max.message.bytes"])
        async with self._lock:
            replayed = await replay_transaction_log(
                self.coordinator, topic.partitions, max_uncompressed, self.state.clock()
            )
            # Group offsets must be loaded before their transactions' markers are replayed.
            await self.groups.loaded()
            await self._carry_out(self.coordinator.finish_loading(self.state.clock()))
        self._loaded.set()
        self._timers.poke()
        log.info("transaction coordinator loaded %d records from %s", replayed, TRANSACTION_STATE_TOPIC)

    # ---------------------------------------------------------------- the ordered path

    async def call(self, operation: Callable[[int], CoordinatorResult]) -> Struct | None:
        """Run one coordinator operation and carry its result out; returns its answer.

        While ``__transaction_state`` loads, requests are answered at once (the coordinator
        answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry) instead of queueing."""
        if self.coordinator.is_loading:
            early = operation(self.state.clock())
            if early.records or early.after_append is not None or (isinstance(early, TxnResult) and early.markers):
                # (Not what a request gets while loading; carried out in order all the same.)
                async with self._lock:
                    response = await self._carry_out(early)
                self._timers.poke()
                return response
            return early.response
        async with self._lock:
            response = await self._carry_out(operation(self.state.clock()))
        self._timers.poke()
        return response

    async def _carry_out(self, result: CoordinatorResult) -> Struct | None:
        response = result.response
        while True:
            if isinstance(result, TxnResult):
                for job in result.markers:
                    self._spawn_markers(job)
            error = ErrorCode.NONE
            if result.records:
                error = await self._append(result.records)
            if result.after_append is None:
                return response
            result = result.after_append(error, self.state.clock())
            if result.response is not None:
                response = result.response

    async def _append(self, records: list[Record]) -> int:
        self.ensure_topic()
        now = self.state.clock()
        by_partition: dict[int, list[Record]] = {}
        for record in records:
            by_partition.setdefault(record.partition, []).append(record)
        for partition, group in by_partition.items():
            plog = self.state.topics.partition(TRANSACTION_STATE_TOPIC, partition)
            if plog is None or self.state.not_leader(TRANSACTION_STATE_TOPIC, partition):
                return ErrorCode.NOT_COORDINATOR  # (a cluster: another broker coordinates it)
            try:
                batch = build_batch([ProducerRecord(r.key, r.value, timestamp_ms=now) for r in group])
                plog.append([bytearray(batch)], now_ms=now, log_append_time=False)
            except OSError as exc:
                log.error("writing %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            for record in group:
                self.coordinator.apply(record, now)
            if self.state.config.syncs_before_ack:
                try:
                    await self.state.committer.sync(plog)
                except OSError as exc:
                    log.error("syncing %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
                    return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    # ---------------------------------------------------------------- markers

    def _spawn_markers(self, job: MarkerJob) -> None:
        task = asyncio.get_running_loop().create_task(self._write_markers(job))
        self._marker_tasks.add(task)
        task.add_done_callback(self._marker_tasks.discard)

    async def _write_markers(self, job: MarkerJob) -> None:
        data = {tp for tp in job.partitions if tp[0] != OFFSETS_TOPIC}
        offsets = {p for t, p in job.partitions if t == OFFSETS_TOPIC}
        delay = MARKER_RETRY_S
        while data or offsets:
            if data:
                marker = TxnMarker(
                    job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch, tuple(sorted(data))
                )
                try:
                    errors = await write_txn_markers(self.state, marker)
                except Exception:
                    log.exception("writing transaction markers for %s failed", job.transactional_id)
                    errors = {}
                for tp, error in errors.items():
                    if error == ErrorCode.NONE:
                        data.discard(tp)
                    elif error in _MARKER_GIVE_UP:
                        log.warning(
                            "transaction %s: %s-%d refused its marker (error %s); skipping it",
                            job.transactional_id, tp[0], tp[1], error,
                        )
                        data.discard(tp)
            for partition in sorted(offsets):
                error = await self.groups.complete_transaction(
                    partition, job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch
                )
                if error == ErrorCode.NONE:
                    offsets.discard(partition)
            if data or offsets:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_MAX_S)
        await self.call(job.on_written)

    async def wait_for_markers(self) -> None:
        """Until every marker job under way is done (tests, orderly stops)."""
        while self._marker_tasks:
            await asyncio.gather(*list(self._marker_tasks), return_exceptions=True)

    # ---------------------------------------------------------------- timers

    async def _run_due_timers(self) -> None:
        async with self._lock:
            now = self.state.clock()
            while (expired := self.timer.pop_expired(now)) is not None:
                try:
                    await self._carry_out(expired.callback(now))
                except Exception:
                    log.exception("transaction coordinator timer %s failed", expired.key)
