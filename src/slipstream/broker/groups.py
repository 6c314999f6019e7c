"""The asyncio adapter around the pure group coordinator (Kafka's purgatory + runtime).

All coordinator work - requests and timer callbacks - runs on the event loop
without awaiting in between, so the state machine sees one ordered stream (one
writer); a lock keeps requests out while the offsets topic loads, and around
results that must wait for an fsync before the next operation. A parked
JoinGroup or SyncGroup is a future, completed when a later result carries its
completion. Records the coordinator emits are appended to ``__consumer_offsets``
and replayed into it before the next operation runs; responses that depend on
them are delivered only after the append (and, with the fsync policy, the fsync).

OffsetCommit is group-committed (offset_commit_queue.py): the records of every
commit handled in the same event-loop turn go to the log as one batch per offsets
partition, replayed, and (fsync policy) synced, before those commits are answered,
in order; until the sync, OffsetFetch shows the offsets as of the last one
(unsynced_offsets.py). Any other operation first writes out the queue, so it always
sees every earlier commit replayed. A commit takes the lock-free path only when nobody holds or
waits for the lock; otherwise it queues for the lock behind them (FIFO), so commits
pipelined on one connection apply in arrival order.
At start the offsets topic is replayed in the background (offsets_replay.py); until
it is done the coordinator answers COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from ..coordinator import (
    OFFSETS_TOPIC,
    CoordinatorConfig,
    CoordinatorResult,
    GroupCoordinator,
    ManualTimer,
    Pending,
    Record,
)
from ..coordinator.config import (
    DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS,
    ConsumerGroupTimeouts,
    MigrationPolicy,
)
from ..coordinator.offset_and_metadata import OffsetAndMetadata
from ..coordinator.result import RequestContext as CoordinatorContext
from ..log.api import LogFenced, PartitionLog
from ..protocol.apis.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from ..protocol.apis.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from ..protocol.apis.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest, JoinGroupResponse
from ..protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupResponse
from ..protocol.apis.list_groups import ListGroupsRequest, ListGroupsResponse
from ..protocol.apis.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from ..protocol.apis.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from ..protocol.apis.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.apis.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from ..protocol.errors import ErrorCode
from ..protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_control_batch,
)
from ..protocol.schema import Struct
from .coordinator_timers import CoordinatorTimerLoop
from .group_configs import HEARTBEAT_INTERVAL
from .offset_commit_queue import OffsetCommitQueue, commits_by_partition
from .offsets_batches import RecordTooLarge, batches_by_producer
from .offsets_replay import replay_group_log
from .ordered_lock import OrderedLock
from .state import BrokerState
from .unsynced_offsets import UnsyncedOffsets

log = logging.getLogger(__name__)


class GroupCoordinatorAdapter:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        # The offsets topic's max.message.bytes (set at start): no write goes past it.
        self._max_batch_bytes = state.config.message_max_bytes
        c = state.config
        self.config = CoordinatorConfig(
            group_min_session_timeout_ms=c.group_min_session_timeout_ms,
            group_max_session_timeout_ms=c.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            group_max_size=c.group_max_size,
            offsets_retention_ms=c.offsets_retention_minutes * 60_000,
            offset_metadata_max_bytes=c.offset_metadata_max_bytes,
            offsets_topic_num_partitions=c.offsets_topic_partitions,
            consumer_group_session_timeout_ms=c.group_consumer_session_timeout_ms,
            consumer_group_heartbeat_interval_ms=c.group_consumer_heartbeat_interval_ms,
            consumer_group_reconciling_heartbeat_interval_ms=min(
                DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS, c.group_consumer_heartbeat_interval_ms
            ),
            consumer_group_max_size=c.group_consumer_max_size,
            consumer_group_heartbeat_budget_per_s=c.group_consumer_heartbeat_budget_per_sec,
            consumer_group_reconciling_heartbeat_budget_per_s=c.group_consumer_reconciling_heartbeat_budget_per_sec,
            consumer_group_assignors=c.consumer_group_assignors(),
            consumer_group_migration_policy=MigrationPolicy.parse(c.group_consumer_migration_policy),
            group_history_max_events=c.group_history_max_events,
        )
        self.timer = ManualTimer(clock=state.clock)
        self.coordinator = GroupCoordinator(
            self.config,
            timer=self.timer,
            partition_exists=self._partition_exists,
            topics=state.topics.image,
            consumer_group_timeouts=self._consumer_group_timeouts,
        )
        self._lock = OrderedLock()
        self._parked: dict[Pending, asyncio.Future[Struct]] = {}
        # The loop reads state.clock at each wake-up: it may be replaced (a manual clock).
        self._timers = CoordinatorTimerLoop(self.timer, lambda: self.state.clock(), self._run_due_timers)
        self._tasks: list[asyncio.Task[None]] = []
        # Offsets written but not yet synced (syncs_before_ack): OffsetFetch shows their durable value.
        self._unsynced = UnsyncedOffsets()
        # Group commit: commits handled but not yet written or answered.
        self._commits = OffsetCommitQueue(
            state, flush=self._flush, deliver=self._deliver, carry_out_later=self._carry_out_later, sync=self._sync
        )
        # Results carried out later on the ordered path (see _carry_out_later).
        self._later: set[asyncio.Task[None]] = set()
        # Appends to __consumer_offsets so far (one per partition per write): tests and metrics.
        self.appends = 0
        self._loaded = asyncio.Event()
        self._topic_ready: asyncio.Future[None] | None = None

    def _consumer_group_timeouts(self, group_id: str) -> ConsumerGroupTimeouts:
        configs = self.state.group_configs
        return ConsumerGroupTimeouts(
            configs.session_timeout_ms(group_id),
            configs.heartbeat_interval_ms(group_id),
            interval_is_group_config=configs.overrides_setting(group_id, HEARTBEAT_INTERVAL),
        )

    def _partition_exists(self, topic: str, partition: int) -> bool:
        return self.state.topics.partition(topic, partition) is not None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Group APIs answer COORDINATOR_LOAD_IN_PROGRESS (or queue for the lock) from now
        until ``__consumer_offsets`` is made if missing and replayed, in the background;
        ``offsets_topic_ready`` waits for the topic to exist."""
        self.coordinator.begin_loading()
        loop = asyncio.get_running_loop()
        self._topic_ready = loop.create_future()
        self._tasks.append(loop.create_task(self._load()))

    async def offsets_topic_ready(self) -> None:
        """Until ``__consumer_offsets`` exists; raises what making it raised."""
        assert self._topic_ready is not None, "start() first"
        await asyncio.shield(self._topic_ready)

    async def _make_offsets_topic(self) -> None:
        topics = self.state.topics
        if topics.get(OFFSETS_TOPIC) is None:
            await topics.open_deferred_in_worker_thread(OFFSETS_TOPIC)  # saved: Broker.start deferred it
        if topics.get(OFFSETS_TOPIC) is None:
            configs = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
            partitions = self.config.offsets_topic_num_partitions
            if self.state.config.storage == "disk":
                await topics.create_in_worker_thread(OFFSETS_TOPIC, partitions, configs)
            else:  # memory: nothing slow; postgres: its store is not shared across threads
                # (ensure: brokers of a cluster starting together make it once)
                topics.ensure(OFFSETS_TOPIC, partitions, configs)
        self._max_batch_bytes = int(topics.effective_configs(topics.topics[OFFSETS_TOPIC])["max.message.bytes"])

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._commits.stop()
        for task in list(self._later):
            task.cancel()
        for fut in self._parked.values():
            if not fut.done():
                fut.cancel()
        self._parked.clear()

    async def _load(self) -> None:
        replayed = 0
        ready = self._topic_ready
        assert ready is not None, "start() first"
        async with self._lock:
            try:
                await self._make_offsets_topic()
            except asyncio.CancelledError:
                ready.cancel()
                raise
            except Exception as exc:  # e.g. OSError: start() raises it, via offsets_topic_ready
                ready.set_exception(exc)
                return
            ready.set_result(None)
            self._tasks.append(asyncio.get_running_loop().create_task(self._timers.run()))
            if self.state.cluster is not None:
                # A cluster broker owns no offsets partition until it holds its lease
                # (load_partitions); until then their groups answer NOT_COORDINATOR.
                self.coordinator.disown(range(self.config.offsets_topic_num_partitions), self.state.clock())
                self._loaded.set()
                return
            replayed = await self._replay(None)
            self.coordinator.finish_loading(self.state.clock())
        self._loaded.set()
        self._timers.wake()
        log.info("group coordinator loaded %d records from %s", replayed, OFFSETS_TOPIC)

    async def load_partitions(self, partitions: list[int]) -> None:
        """This broker now owns these offsets partitions (cluster): replay them, answering
        COORDINATOR_LOAD_IN_PROGRESS for their groups meanwhile."""
        async with self._lock:
            self.coordinator.begin_loading(partitions)
            self._flush()
            self._unsynced.forget(partitions)
            replayed = await self._replay(partitions)
            self.coordinator.finish_loading(self.state.clock(), partitions)
        self._timers.wake()
        log.info("group coordinator loaded %d records of %s partitions %s", replayed, OFFSETS_TOPIC, partitions)

    def stop_coordinating(self, partitions: list[int]) -> None:
        """This broker's leases on these offsets partitions are gone (another broker may
        lead them already): their groups answer NOT_COORDINATOR from now on, and commits
        still queued for them fail, while ``unload_partitions`` waits its turn to drop them."""
        self.coordinator.ownership.disown(partitions)

    async def unload_partitions(self, partitions: list[int]) -> None:
        """Another broker owns these offsets partitions now: drop their groups here."""
        async with self._lock:
            self._flush()
            dropped = self.coordinator.disown(partitions, self.state.clock())
            self._unsynced.forget(partitions)
        if dropped:
            log.info("group coordinator unloaded %d groups of %s partitions %s", len(dropped), OFFSETS_TOPIC, partitions)

    async def _replay(self, partitions: list[int] | None) -> int:
        """Replay the offsets partitions (all when None) into the coordinator; records applied."""
        topic = self.state.topics.get(OFFSETS_TOPIC)
        assert topic is not None
        max_uncompressed = int(self.state.topics.effective_configs(topic)["max.message.bytes"])
        indexes = range(len(topic.partitions)) if partitions is None else partitions
        plogs = [topic.partitions[index] for index in indexes]
        return await replay_group_log(self.coordinator, plogs, max_uncompressed, self.state.clock())

    # ---------------------------------------------------------------- requests

    # One method per group API: each runs its coordinator handler on the one ordered path.

    async def offset_commit(self, ctx: CoordinatorContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
        if not self._lock.busy():
            return cast(OffsetCommitResponse, await self._commit(ctx, request))
        return cast(
            OffsetCommitResponse, await self.call(lambda now: self.coordinator.offset_commit(ctx, request, now))
        )

    async def loaded(self) -> None:
        """Until ``__consumer_offsets`` has been replayed."""
        await self._loaded.wait()

    async def txn_offset_commit(
        self, ctx: CoordinatorContext, request: TxnOffsetCommitRequest
    ) -> TxnOffsetCommitResponse:
        return cast(
            TxnOffsetCommitResponse, await self.call(lambda now: self.coordinator.txn_offset_commit(ctx, request, now))
        )

    async def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> int:
        """Write a transaction marker into an offsets partition and replay it; an error code.

        Called for the transaction coordinator (here, or through WriteTxnMarkers) for
        transactions that committed offsets (AddOffsetsToTxn put the group's partition
        in them). In a cluster only the partition's leader writes it: elsewhere
        NOT_LEADER_OR_FOLLOWER, and the coordinator asks the leader it finds next."""
        await self._loaded.wait()
        async with self._lock:
            self._flush()
            plog = self.state.topics.partition(OFFSETS_TOPIC, partition)
            if plog is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if self.state.not_leader(OFFSETS_TOPIC, partition) or not self.coordinator.owns(partition):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            now = self.state.clock()
            batch = build_control_batch(
                CONTROL_COMMIT if commit else CONTROL_ABORT,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                timestamp_ms=now,
                coordinator_epoch=coordinator_epoch,
            )
            try:
                plog.append([bytearray(batch)], now_ms=now, log_append_time=False)
            except OSError as exc:
                log.error("writing a transaction marker to %s failed: %s", OFFSETS_TOPIC, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            if commit and self.state.config.syncs_before_ack:
                offsets = self.coordinator.offset_manager
                pending = offsets.pending_txn.get(producer_id, {})
                self._unsynced.transaction_committed(plog, partition, pending, offsets.committed)
            self.coordinator.replay_end_transaction(producer_id, commit, now, producer_epoch)
            self.state.notifier.notify((OFFSETS_TOPIC, partition))
            if self.state.config.syncs_before_ack:
                try:
                    await self._sync(plog)
                except LogFenced as exc:  # the lease moved on: the new leader gets it
                    log.info("a transaction marker to %s-%d was refused: %s", OFFSETS_TOPIC, partition, exc)
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                except Exception as exc:  # (postgres: the database's own errors too)
                    log.error("syncing %s failed: %s", OFFSETS_TOPIC, exc)
                    return ErrorCode.KAFKA_STORAGE_ERROR
        self._timers.poke()
        return ErrorCode.NONE

    async def join_group(self, ctx: CoordinatorContext, request: JoinGroupRequest) -> JoinGroupResponse:
        return cast(JoinGroupResponse, await self.call(lambda now: self.coordinator.join_group(ctx, request, now)))

    async def sync_group(self, ctx: CoordinatorContext, request: SyncGroupRequest) -> SyncGroupResponse:
        return cast(SyncGroupResponse, await self.call(lambda now: self.coordinator.sync_group(ctx, request, now)))

    async def heartbeat(self, ctx: CoordinatorContext, request: HeartbeatRequest) -> HeartbeatResponse:
        return cast(HeartbeatResponse, await self.call(lambda now: self.coordinator.heartbeat(ctx, request, now)))

    async def leave_group(self, ctx: CoordinatorContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
        return cast(LeaveGroupResponse, await self.call(lambda now: self.coordinator.leave_group(ctx, request, now)))

    async def offset_fetch(self, ctx: CoordinatorContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
        return cast(OffsetFetchResponse, await self.call(lambda now: self._offset_fetch(ctx, request, now)))

    def _offset_fetch(self, ctx: CoordinatorContext, request: OffsetFetchRequest, now: int) -> CoordinatorResult:
        result = self.coordinator.offset_fetch(ctx, request, now)
        if self._unsynced and isinstance(result.response, OffsetFetchResponse):
            self._unsynced.show_durable(ctx.api_version, request, result.response)
        return result

    async def offset_delete(self, ctx: CoordinatorContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        return cast(OffsetDeleteResponse, await self.call(lambda now: self.coordinator.offset_delete(ctx, request, now)))

    async def describe_groups(self, ctx: CoordinatorContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        return cast(DescribeGroupsResponse, await self.call(lambda now: self.coordinator.describe_groups(ctx, request, now)))

    async def list_groups(self, ctx: CoordinatorContext, request: ListGroupsRequest) -> ListGroupsResponse:
        return cast(ListGroupsResponse, await self.call(lambda now: self.coordinator.list_groups(ctx, request, now)))

    async def delete_groups(self, ctx: CoordinatorContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        return cast(DeleteGroupsResponse, await self.call(lambda now: self.coordinator.delete_groups(ctx, request, now)))

    async def consumer_group_heartbeat(
        self, ctx: CoordinatorContext, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        return cast(
            ConsumerGroupHeartbeatResponse,
            await self.call(lambda now: self.coordinator.consumer_group_heartbeat(ctx, request, now)),
        )

    async def consumer_group_describe(
        self, ctx: CoordinatorContext, request: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        return cast(
            ConsumerGroupDescribeResponse,
            await self.call(lambda now: self.coordinator.consumer_group_describe(ctx, request, now)),
        )

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        """The group's committed offsets as an OffsetFetch of every partition answers them
        (only durable ones, unsynced_offsets.py): what the admin listener shows."""
        applied = self.coordinator.committed_offsets(group_id)
        return self._unsynced.durable_offsets(group_id, applied) if self._unsynced else applied

    def groups_with_committed_offsets(self) -> set[str]:
        """The groups with committed offsets as OffsetFetch answers them: a group whose
        deletion is not yet durable still has them, one whose first commit is not, none."""
        applied = self.coordinator.committed_group_ids()
        if not self._unsynced:
            return set(applied)
        return self._unsynced.groups_with_offsets(applied, self.coordinator.committed_offsets)

    def history_for(self, group_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The group's rebalance history, oldest first, as JSON-able dicts numbered by ``seq``
        (events after ``since`` only). Read without the lock: it only reads a finished list."""
        return self.coordinator.history_of(group_id, since)

    def note_coordinator_lookup(self, group_ids: list[str], connection: str) -> None:
        # Only a hint for groups in their initial delay: no record, response or timer change.
        self.coordinator.note_coordinator_lookup(group_ids, connection, self.state.clock())

    async def call(self, operation: Callable[[int], CoordinatorResult]) -> Struct:
        async with self._lock:
            self._flush()
            result = operation(self.state.clock())
            waiter = await self._carry_out(result)
        self._timers.poke()
        if isinstance(waiter, asyncio.Future):
            return await waiter
        return waiter

    async def _commit(self, ctx: CoordinatorContext, request: OffsetCommitRequest) -> Struct:
        """OffsetCommit, group-committed: queue the records, answer after their batch is durable."""
        result = self.coordinator.offset_commit(ctx, request, self.state.clock())
        self._timers.poke()
        if result.response is not None and result.pending is None and not result.records and (
            not result.completions and result.after_append is None
        ):
            if result.events:  # e.g. a commit of a stale generation, for the history
                self.coordinator.history.record(result.events)
            return result.response  # answered without a write (e.g. a validation error)
        if not result.records or result.pending is None or result.response is not None:
            # A shape we do not batch: carried out the ordinary way.
            async with self._lock:
                self._flush()
                waiter = await self._carry_out(result)
            self._timers.poke()
            return await waiter if isinstance(waiter, asyncio.Future) else waiter
        return await self._commits.add(result)

    def _flush(self) -> None:
        """Write out the queued commits: one append per offsets partition, then replay.

        Synchronous, so whoever calls it next sees every queued commit replayed.
        Answers go out now, or (fsync policy) once the batch is synced.
        """
        queued = self._commits.take()
        if not queued:
            return
        now = self.state.clock()
        written = []
        for partition, items in commits_by_partition(queued).items():
            records = [r for item in items for r in item.result.records if r.partition == partition]
            error, plog = self._write(partition, records, now)
            if error:
                for item in items:
                    item.error = item.error or error
            elif plog is not None:
                written.append((plog, items))
        if self.state.config.syncs_before_ack and written:
            self._commits.answer_once_synced(queued, written)
        else:
            self._commits.answer(queued)

    async def _carry_out_locked(self, result: CoordinatorResult) -> None:
        async with self._lock:
            self._flush()
            await self._carry_out(result)
        self._timers.poke()

    def _carry_out_later(self, result: CoordinatorResult) -> None:
        task = asyncio.get_running_loop().create_task(self._carry_out_locked(result))
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _carry_out(self, result: CoordinatorResult) -> Any:
        """Carry out one result (see coordinator/result.py); returns the response or its future."""
        own: Any = result.response
        while True:
            if result.pending is not None:
                fut: asyncio.Future[Struct] = asyncio.get_running_loop().create_future()
                self._parked[result.pending] = fut
                if own is None:
                    own = fut
            elif own is None and result.response is not None:
                # A result whose answer comes from its after_append (e.g. a JoinGroup that
                # first deleted an empty consumer group).
                own = result.response
            error = ErrorCode.NONE
            if result.records:
                error = await self._append(result.records)
            self._deliver(result)
            if result.after_append is None:
                return own
            result = result.after_append(error, self.state.clock())

    def _deliver(self, result: CoordinatorResult) -> None:
        if result.events:
            self.coordinator.history.record(result.events)
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
        for partition, group in by_partition.items():
            error, plog = self._write(partition, group, now)
            if error:
                return error
            if plog is not None and self.state.config.syncs_before_ack:
                try:
                    await self._sync(plog)
                except OSError as exc:
                    log.error("syncing %s failed: %s", OFFSETS_TOPIC, exc)
                    return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def _write(self, partition: int, records: list[Record], now: int) -> tuple[int, PartitionLog | None]:
        """Append ``records`` to one offsets partition as one batch and replay them.

        Returns (error code, the partition's log); nothing is replayed on error.
        """
        plog = self.state.topics.partition(OFFSETS_TOPIC, partition)
        if plog is None or not self.coordinator.owns(partition):
            return ErrorCode.NOT_COORDINATOR, None
        try:
            batches = batches_by_producer(records, now, self._max_batch_bytes)
        except RecordTooLarge as exc:
            log.warning("not writing to %s: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.MESSAGE_TOO_LARGE, None
        try:
            plog.append(batches, now_ms=now, log_append_time=False)
        except OSError as exc:
            log.error("writing %s failed: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        self.appends += 1
        if self.state.config.syncs_before_ack:
            self._unsynced.written(plog, partition, records, self.coordinator.offset_manager.committed)
        apply = self.coordinator.apply
        for record in records:
            apply(record, now)
        self.state.notifier.notify((OFFSETS_TOPIC, partition))
        return ErrorCode.NONE, plog

    async def _sync(self, plog: PartitionLog) -> None:
        """The durability barrier for an offsets partition; what it covered is durable now."""
        mark = self._unsynced.sync_mark()
        await self.state.committer.sync(plog)
        self._unsynced.synced(plog, mark)

    # ---------------------------------------------------------------- timers

    async def _run_due_timers(self) -> None:
        async with self._lock:
            self._flush()
            now = self.state.clock()
            while (expired := self.timer.pop_expired(now)) is not None:
                try:
                    await self._carry_out(expired.callback(now))
                except Exception:
                    log.exception("group coordinator timer %s failed", expired.key)

