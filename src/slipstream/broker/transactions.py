"""The asyncio adapter around the pure transaction coordinator.

Requests and timer callbacks run one at a time under a lock, each carried out to
the end (records appended to ``__transaction_state``, replayed, fsynced under the
fsync policy, then ``after_append``) before the next: the coordinator sees one
ordered stream. Marker jobs run outside the lock as tasks
(``txn_marker_sender.send_markers``): each partition's marker goes to its current
leader - written here (data partitions through ``txn_markers``, the
``__consumer_offsets`` partition of a transaction's offsets through the group
coordinator, which replays its own marker) or sent to the leader's broker as
WriteTxnMarkers - and what fails for a reason that may pass is retried with a
backoff, routed anew; once every partition has its marker, ``job.on_written`` runs
on the ordered path and writes CompleteCommit/CompleteAbort.

``__transaction_state`` is created when the first transactional producer arrives
(as Kafka does); a broker that has one replays it at start, answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile, then writes again the markers of
transactions it finds prepared. In a cluster that happens per partition, when this
broker gains the partition's lease (``load_partitions``, from the cluster member;
the lease epoch is the coordinator epoch of its markers); losing the lease
(``unload_partitions``) drops its transactions: their ids answer NOT_COORDINATOR and
their marker jobs stop, the new owner sends the markers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..coordinator import CoordinatorResult, ManualTimer, Record
from ..coordinator.transactions import (
    TRANSACTION_STATE_TOPIC,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnResult,
)
from ..log.api import LogFenced
from ..protocol.errors import ErrorCode
from ..protocol.records import ProducerRecord, build_batch
from ..protocol.schema import Struct
from .coordinator_timers import CoordinatorTimerLoop
from .groups import GroupCoordinatorAdapter
from .offsets_replay import replay_transaction_log
from .peer_connections import PeerConnections
from .state import BrokerState
from .txn_marker_sender import send_markers
from .txn_markers import BrokerMarkerTransport, TxnMarker

log = logging.getLogger(__name__)


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
        self.peers = PeerConnections(state)
        self.marker_transport = BrokerMarkerTransport(state, groups, self.peers)

    # ---------------------------------------------------------------- lifecycle

    async def start(self, *, load: bool = True) -> None:
        """``load=False``: the caller calls ``load`` later. A cluster member serves no
        partition until it holds its lease (``load_partitions``)."""
        loop = asyncio.get_running_loop()
        if self.state.cluster is not None:
            self.coordinator.disown(range(self.config.transaction_state_num_partitions))
            self._loaded.set()
        elif self.state.topics.get(TRANSACTION_STATE_TOPIC) is not None:
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
        await self.peers.close()

    async def load_partitions(self, epochs: dict[int, int]) -> None:
        """This broker now leads these ``__transaction_state`` partitions (partition ->
        lease epoch): replay them, answering COORDINATOR_LOAD_IN_PROGRESS for their ids
        meanwhile, then finish what they left prepared and time out what ran too long."""
        topic = self.state.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not epochs:
            return
        partitions = sorted(epochs)
        max_uncompressed = int(self.state.topics.effective_configs(topic)["max.message.bytes"])
        async with self._lock:
            self.coordinator.begin_loading(partitions, epochs)
            plogs = [topic.partitions[p] for p in partitions if p < len(topic.partitions)]
            replayed = await replay_transaction_log(self.coordinator, plogs, max_uncompressed, self.state.clock())
            await self._carry_out(self.coordinator.finish_loading(self.state.clock(), partitions))
        self._timers.poke()
        log.info(
            "transaction coordinator loaded %d records of %s partitions %s",
            replayed, TRANSACTION_STATE_TOPIC, partitions,
        )

    def stop_coordinating(self, partitions: list[int]) -> None:
        """This broker's leases on these ``__transaction_state`` partitions are gone: their
        transactional ids answer NOT_COORDINATOR from now on, while ``unload_partitions``
        waits its turn to drop them."""
        self.coordinator.ownership.disown(partitions)

    async def unload_partitions(self, partitions: list[int]) -> None:
        """Another broker leads these ``__transaction_state`` partitions now: drop their
        transactions here (their marker jobs stop at their next round)."""
        async with self._lock:
            dropped = self.coordinator.disown(partitions)
        if dropped:
            log.info(
                "transaction coordinator unloaded %d transactional ids of %s partitions %s",
                len(dropped), TRANSACTION_STATE_TOPIC, partitions,
            )

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
        answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry) instead of queueing. In
        a cluster one partition may load while others serve: a write for an id of those
        is computed at once (its id is in flight from then on, so nothing else changes it)
        and carried out in order under the lock."""
        if self.coordinator.is_loading:
            early = operation(self.state.clock())
            if early.records or early.after_append is not None or (isinstance(early, TxnResult) and early.markers):
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
            if (
                plog is None
                or self.state.not_leader(TRANSACTION_STATE_TOPIC, partition)
                or not self.coordinator.ownership.owns(partition)
            ):
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
                except LogFenced as exc:  # the lease moved on: the new coordinator answers
                    log.info("writing %s-%d was refused: %s", TRANSACTION_STATE_TOPIC, partition, exc)
                    return ErrorCode.NOT_COORDINATOR
                except Exception as exc:  # (postgres: the database's own errors too)
                    log.error("syncing %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
                    return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    # ---------------------------------------------------------------- markers

    def _spawn_markers(self, job: MarkerJob) -> None:
        task = asyncio.get_running_loop().create_task(self._write_markers(job))
        self._marker_tasks.add(task)
        task.add_done_callback(self._marker_tasks.discard)

    async def _write_markers(self, job: MarkerJob) -> None:
        marker = TxnMarker(
            job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch, tuple(sorted(job.partitions))
        )
        outcome = await send_markers(
            marker,
            self.marker_transport,
            local_node=self.state.config.node_id,
            is_current=lambda: self.coordinator.is_current(job),
            label=job.transactional_id,
        )
        if outcome is not None:
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
