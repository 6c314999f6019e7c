"""The group coordinator: one object answering every group API, fed (request, now).

``GroupCoordinator`` is the façade the broker talks to. It checks what Kafka's
``GroupCoordinatorService`` checks before a request reaches a group (group id,
session timeout bounds, partitions still loading or owned elsewhere), routes the
request to the classic protocol (``GroupManager``), the consumer protocol
(``ConsumerGroupManager``, and ``ClassicMembers`` for classic members of consumer
groups), the offset store (``OffsetManager``) or the admin views (``GroupAdmin``),
and shapes answers for the request's version. Every handler returns a
``CoordinatorResult``; see ``result.py`` for how to carry one out.

Durable state is rebuilt only through ``replay(key, value)`` (``group_replay.py``):
at start the broker calls ``begin_loading()``, replays the whole
``__consumer_offsets`` log, then ``finish_loading(now)``; meanwhile group APIs
answer COORDINATOR_LOAD_IN_PROGRESS (``ownership.py``). Retention runs on a timer
(``offset_retention.py``); protocol changes are ``protocol_migration.py``'s.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable

from ..protocol.apis.consumer_group_describe import ConsumerGroupDescribeRequest
from ..protocol.apis.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from ..protocol.apis.delete_groups import DeleteGroupsRequest
from ..protocol.apis.describe_groups import DescribeGroupsRequest
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest
from ..protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupResponse
from ..protocol.apis.list_groups import ListGroupsRequest
from ..protocol.apis.offset_commit import OffsetCommitRequest
from ..protocol.apis.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from ..protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.apis.txn_offset_commit import TxnOffsetCommitRequest
from ..protocol.errors import ErrorCode
from ..protocol.schema import Struct
from .classic_responses import join_response
from .config import ConsumerGroupTimeouts, CoordinatorConfig
from .consumer import ConsumerGroup
from .consumer_classic_members import ClassicMembers
from .consumer_group_manager import ConsumerGroupManager, validate_member_fetch
from .consumer_responses import heartbeat_error
from .group import ClassicGroup
from .group_admin import GroupAdmin
from .group_manager import GroupManager
from .group_replay import GroupRecordReplay
from .history import GroupHistory
from .offset_and_metadata import OffsetAndMetadata
from .offset_manager import (
    OffsetManager,
    PartitionExists,
    commit_error_response,
    txn_commit_error_response,
)
from .offset_retention import GROUP_EXPIRATION_KEY, OffsetRetention
from .ownership import PartitionOwnership
from .protocol_migration import ProtocolMigration
from .result import CoordinatorResult, Pending, Record, RequestContext
from .state import GroupState
from .timer import GuardedTimer, Timer
from .topics_image import EMPTY_TOPICS_IMAGE, TopicsImage


def _default_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class GroupCoordinator:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        timer: Timer,
        partition_exists: PartitionExists | None = None,
        member_id_factory: Callable[[str], str] | None = None,
        topics: Callable[[], TopicsImage] | None = None,
        consumer_group_timeouts: Callable[[str], ConsumerGroupTimeouts] | None = None,
    ) -> None:
        """``timer``: where the coordinator schedules its work (see ``timer.py``).
        ``partition_exists(topic, partition)``: OffsetCommit/OffsetDelete answer
        UNKNOWN_TOPIC_OR_PARTITION when False (default: everything exists).
        ``member_id_factory(client_id_or_instance_id)``: new member ids (default, like
        Kafka: ``<prefix>-<uuid4>`` in classic groups, a random Uuid string in consumer
        groups, ``protocol/uuid_strings.py``).
        ``topics()``: the broker's topics now (ids, partition counts), for consumer groups.
        ``consumer_group_timeouts(group_id)``: a consumer group's session timeout and
        heartbeat interval (default: the config's, for every group).
        """
        self.config = config or CoordinatorConfig()
        self.timer = GuardedTimer(timer)
        self._pending_ids = itertools.count(1)
        self.ownership = PartitionOwnership(self.config.offsets_topic_num_partitions)
        self.group_manager = GroupManager(
            self.config, self.timer, self._new_pending, member_id_factory or _default_member_id
        )
        self.consumer_groups = ConsumerGroupManager(
            self.config,
            self.timer,
            topics or (lambda: EMPTY_TOPICS_IMAGE),
            self.partition_for,
            consumer_group_timeouts,
            member_id_factory,
        )
        self.offset_manager = OffsetManager(
            self.config, self.group_manager, self._new_pending, partition_exists, self.consumer_groups
        )
        # Classic members of consumer groups (mixed groups), and the online migrations.
        self.classic_members = ClassicMembers(self.consumer_groups, member_id_factory)
        self.migration = ProtocolMigration(
            self.config, self.ownership, self.group_manager, self.consumer_groups, self.classic_members
        )
        self.consumer_groups.sessions.downgrade = self.migration.downgrade
        self.admin = GroupAdmin(
            self.config, self.ownership, self.group_manager, self.consumer_groups, self.offset_manager,
            self._new_pending,
        )
        self.retention = OffsetRetention(
            self.config, self.ownership, self.group_manager, self.consumer_groups, self.offset_manager
        )
        self._now_ms = 0
        # Rebalance history: filled by whoever carries results out (their ``events``), and
        # at load from the records (``replay``). Pure data, read by the broker's admin side.
        self.history = GroupHistory(self.config.group_history_max_events)
        self.record_replay = GroupRecordReplay(
            self.ownership, self.group_manager, self.consumer_groups, self.offset_manager, self.history
        )

    def _new_pending(self, api_key: int, api_version: int) -> Pending:
        return Pending(next(self._pending_ids), api_key, api_version)

    # ================================================================ partitions and loading

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id`` (Kafka's mapping)."""
        return self.ownership.partition_for(group_id)

    @property
    def is_loading(self) -> bool:
        return self.ownership.is_loading

    def is_group_loading(self, group_id: str) -> bool:
        return self.ownership.is_group_loading(group_id)

    def owns(self, partition: int) -> bool:
        return self.ownership.owns(partition)

    def begin_loading(self, partitions: Iterable[int] | None = None) -> None:
        """Mark partitions (default: all) as loading; their groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        self.ownership.begin_loading(partitions)

    def disown(self, partitions: Iterable[int], now_ms: int) -> list[str]:
        """Another broker owns these partitions now: forget their groups (timers stopped,
        offsets dropped) until they are loaded again; returns the group ids dropped."""
        gone = self.ownership.disown(partitions)
        dropped = []
        for group_id in [g for g in self.group_manager.groups if self.partition_for(g) in gone]:
            self.group_manager.remove_group(group_id, now_ms)
            dropped.append(group_id)
        for group_id in [g for g in self.consumer_groups.groups if self.partition_for(g) in gone]:
            self.consumer_groups.unload(group_id)
            dropped.append(group_id)
        for group_id in [g for g in self.offset_manager.offsets if self.partition_for(g) in gone]:
            self.offset_manager.drop_group(group_id)
        return dropped

    def finish_loading(self, now_ms: int, partitions: Iterable[int] | None = None) -> None:
        """Serve the loaded partitions' groups: arm member sessions and the retention job."""
        self._now_ms = max(self._now_ms, now_ms)
        done = self.ownership.finish_loading(partitions)
        if not self.ownership.is_loading:
            self.record_replay.narrator.clear()
        for group in self.group_manager.groups.values():
            if self.partition_for(group.group_id) in done:
                self.group_manager.on_loaded(group)
        for consumer_group in self.consumer_groups.groups.values():
            if self.partition_for(consumer_group.group_id) in done:
                self.consumer_groups.sessions.on_loaded(consumer_group)
        self._schedule_expiration()

    def load(self, records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int) -> None:
        """Replay a whole ``__consumer_offsets`` log (all partitions), then serve."""
        self.begin_loading()
        for key, value in records:
            if key is not None:
                self.replay(key, value, now_ms)
        self.finish_loading(now_ms)

    # ================================================================ replay

    def replay(
        self,
        key: bytes | memoryview,
        value: bytes | memoryview | None,
        now_ms: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        *,
        record_time_ms: int | None = None,
    ) -> None:
        """Apply one ``__consumer_offsets`` record: the only way durable state changes.

        ``producer_id`` / ``producer_epoch``: the producer of the transactional batch
        holding the record (-1 for the coordinator's own batches): its offset commits
        stay pending until ``replay_end_transaction``. Malformed records and record types we do not use
        are logged and skipped. ``record_time_ms``: the record's timestamp, for the history
        rebuilt while loading.
        """
        now = self._now_ms if now_ms is None else now_ms
        self.record_replay.replay(key, value, now, producer_id, producer_epoch, record_time_ms)

    def apply(self, record: Record, now_ms: int | None = None) -> None:
        """``replay(record.key, record.value, now_ms)`` for a record this coordinator emitted.

        Same effect; an offset commit it built skips decoding its own bytes.
        """
        self.record_replay.apply(record, self._now_ms if now_ms is None else now_ms)

    def replay_end_transaction(
        self, producer_id: int, commit: bool, now_ms: int | None = None, producer_epoch: int = -1
    ) -> None:
        """A transaction marker (control batch) in ``__consumer_offsets``: the producer's
        pending offsets become committed (COMMIT) or are dropped (ABORT)."""
        now = self._now_ms if now_ms is None else now_ms
        self.record_replay.replay_end_transaction(producer_id, commit, now, producer_epoch)

    # ================================================================ JoinGroup / SyncGroup / Heartbeat / LeaveGroup

    def note_coordinator_lookup(self, group_ids: Iterable[str], connection: str, now_ms: int) -> None:
        """FindCoordinator on ``connection`` named these groups: members may be on their way."""
        for group_id in group_ids:
            self.group_manager.note_coordinator_lookup(group_id, connection, now_ms)

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        version = ctx.api_version
        if not req.group_id:
            return _answer(join_response(version, error=ErrorCode.INVALID_GROUP_ID, member_id=req.member_id))
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return _answer(join_response(version, error=ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id))
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(join_response(version, error=code, member_id=req.member_id))
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is None:
            return self.group_manager.join_group(ctx, req, now_ms)
        if consumer_group.members:
            # A mixed group: the classic consumer becomes a member speaking the classic
            # protocol, as Kafka 4 does (consumer_classic_members.py).
            return self.classic_members.join(ctx, req, consumer_group, now_ms)
        return self.migration.classic_join_to_empty_consumer_group(ctx, req, consumer_group)

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID))
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(SyncGroupResponse(error_code=code))
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.members:
                return _answer(SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            return self.classic_members.sync(req, consumer_group, now_ms)
        return self.group_manager.sync_group(ctx, req, now_ms)

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID))
        if code := self.ownership.group_unavailable(req.group_id):
            # Like Kafka: members of a group still loading are told all is well.
            loading = code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return _answer(HeartbeatResponse(error_code=ErrorCode.NONE if loading else code))
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(req, consumer_group, now_ms)
        return self.group_manager.heartbeat(ctx, req, now_ms)

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID))
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(LeaveGroupResponse(error_code=code))
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self.classic_members.leave(ctx, req, consumer_group, now_ms)
        return self.group_manager.leave_group(ctx, req, now_ms)

    # ================================================================ consumer (KIP-848) groups

    def consumer_group_heartbeat(
        self, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult:
        self._now_ms = now_ms
        group_id = req.group_id
        if group_id and (code := self.ownership.group_unavailable(group_id)):
            return _answer(heartbeat_error(code))
        classic = self.group_manager.get(group_id)
        if classic is not None and classic.state is not GroupState.DEAD:
            return self.migration.consumer_heartbeat_to_classic_group(ctx, req, classic, now_ms)
        return self.consumer_groups.heartbeat(ctx, req, now_ms)

    # ================================================================ offsets

    def offset_commit(self, ctx: RequestContext, req: OffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(commit_error_response(req, code))
        return self.offset_manager.commit(ctx, req, now_ms)

    def offset_fetch(self, ctx: RequestContext, req: OffsetFetchRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        version = ctx.api_version
        require_stable = version >= 7 and req.require_stable
        if version >= 8:
            groups = [
                self._fetch_group(g.group_id, g.topics, require_stable, g.member_id, g.member_epoch)
                for g in req.groups
            ]
            return _answer(OffsetFetchResponse(groups=groups))
        topics = None
        if req.topics is not None:
            topics = [OffsetFetchRequestTopics(name=t.name, partition_indexes=t.partition_indexes) for t in req.topics]
        group = self._fetch_group(req.group_id, topics, require_stable)
        response = OffsetFetchResponse(error_code=group.error_code)
        for t in group.topics:
            old_topic = OffsetFetchResponseTopic(name=t.name)
            for p in t.partitions:
                old_topic.partitions.append(
                    OffsetFetchResponsePartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        error_code=p.error_code,
                    )
                )
            response.topics.append(old_topic)
        if group.error_code and version < 2 and topics is not None:
            # No top-level error before v2: every requested partition carries it.
            response.topics = [
                OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetFetchResponsePartition(
                            partition_index=i, committed_offset=-1, metadata="", error_code=group.error_code
                        )
                        for i in t.partition_indexes
                    ],
                )
                for t in topics
            ]
        return _answer(response)

    def _fetch_group(
        self,
        group_id: str,
        topics: list[OffsetFetchRequestTopics] | None,
        require_stable: bool,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResponseGroup:
        if code := self.ownership.group_unavailable(group_id):
            return OffsetFetchResponseGroup(group_id=group_id, error_code=code)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = validate_member_fetch(consumer_group, member_id, member_epoch)
            if error:
                return OffsetFetchResponseGroup(group_id=group_id, error_code=error)
        return self.offset_manager.fetch(group_id, topics, require_stable)

    def offset_delete(self, ctx: RequestContext, req: OffsetDeleteRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID))
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(OffsetDeleteResponse(error_code=code))
        return self.offset_manager.delete(ctx, req, now_ms)

    def txn_offset_commit(self, ctx: RequestContext, req: TxnOffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(txn_commit_error_response(req, ErrorCode.INVALID_GROUP_ID))
        if code := self.ownership.group_unavailable(req.group_id):
            return _answer(txn_commit_error_response(req, code))
        return self.offset_manager.txn_commit(ctx, req, now_ms)

    # ================================================================ admin: describe, list, delete (group_admin.py)

    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        return self.admin.describe_groups(ctx, req)

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        return self.admin.list_groups(ctx, req)

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        return self.admin.delete_groups(ctx, req)

    def consumer_group_describe(
        self, ctx: RequestContext, req: ConsumerGroupDescribeRequest, now_ms: int
    ) -> CoordinatorResult:
        self._now_ms = now_ms
        return self.admin.consumer_group_describe(ctx, req)

    # ================================================================ retention (offset_retention.py)

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for offsets past ``offsets.retention``, and for Empty groups left with none."""
        self._now_ms = now_ms
        return CoordinatorResult(records=self.retention.tombstones(now_ms))

    def _schedule_expiration(self) -> None:
        def run(now_ms: int) -> CoordinatorResult:
            result = self.expire_offsets(now_ms)
            self._schedule_expiration()
            return result

        self.timer.schedule(GROUP_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms, run)

    # ================================================================ inspection

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.group_manager.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self.group_manager.groups) + list(self.consumer_groups.groups)

    def history_of(self, group_id: str, since: int = 0) -> list[dict[str, object]]:
        """The group's rebalance history as JSON-able dicts (each with its ``seq``), oldest first."""
        return self.history.as_json(group_id, since)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer_groups.get(group_id)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return {
            (topic, index): om
            for topic, by_partition in self.offset_manager.offsets.get(group_id, {}).items()
            for index, om in by_partition.items()
        }

    def committed_group_ids(self) -> list[str]:
        """The groups with committed offsets (an emptied group's entry is removed)."""
        return list(self.offset_manager.offsets)



def _answer(response: Struct) -> CoordinatorResult:
    return CoordinatorResult(response=response)
