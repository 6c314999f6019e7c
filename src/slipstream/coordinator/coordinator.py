"""The group coordinator: one object answering every group API, fed (request, now).

``GroupCoordinator`` is the façade the broker talks to. It checks what Kafka's
``GroupCoordinatorService`` checks before a request reaches a group (group id,
session timeout bounds, partitions still loading), routes the request to the
rebalance protocol (``GroupManager``) or the offset store (``OffsetManager``),
and shapes answers for the request's version. Every handler returns a
``CoordinatorResult``; see ``result.py`` for how to carry one out.

Durable state is rebuilt only through ``replay(key, value)``: at start the
broker calls ``begin_loading()``, replays the whole ``__consumer_offsets`` log,
then ``finish_loading(now)``; meanwhile group APIs answer
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Iterable

from ..protocol import consumer_protocol as cp
from ..protocol import group_records as gr
from ..protocol.apis.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from ..protocol.apis.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from ..protocol.apis.delete_groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteGroupsResponseDeletableGroupResult,
)
from ..protocol.apis.describe_groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
    DescribeGroupsResponseDescribedGroupMember,
)
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest
from ..protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupResponse
from ..protocol.apis.list_groups import (
    ListGroupsRequest,
    ListGroupsResponse,
    ListGroupsResponseListedGroup,
)
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
from . import consumer_records as crec
from . import records as rec
from .append_errors import append_error_for_group
from .classic_responses import join_response
from .config import CoordinatorConfig
from .consumer import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    PartitionOwnershipError,
)
from .consumer_classic_members import ClassicMembers
from .consumer_group_manager import (
    ConsumerGroupManager,
    ConsumerGroupTimeouts,
    heartbeat_error,
    validate_member_fetch,
)
from .effects import Effects
from .group import ClassicGroup
from .group_manager import GroupManager
from .history import GroupHistory, RebalanceCause
from .history_replay import ReplayNarrator
from .member import Member
from .migration import (
    ConversionError,
    classic_group_from_consumer,
    classic_group_record,
    consumer_group_from_classic,
    consumer_group_records,
)
from .offset_and_metadata import OffsetAndMetadata
from .offset_manager import (
    OffsetManager,
    PartitionExists,
    commit_error_response,
    txn_commit_error_response,
)
from .result import Completion, CoordinatorResult, Pending, Record, RequestContext
from .state import GroupState
from .timer import GuardedTimer, Timer
from .topics_image import EMPTY_TOPICS_IMAGE, TopicsImage

log = logging.getLogger("slipstream.coordinator")

GROUP_EXPIRATION_KEY = "expire-group-metadata"
DELETE_GROUPS_KEY = 42
# No authorizer: every operation a group supports is allowed (READ, DELETE, DESCRIBE).
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
_KNOWN_GROUP_TYPES = {"classic", "consumer", "share"}


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
        ``member_id_factory(client_id_or_instance_id)``: new member ids
        (default ``<prefix>-<uuid4>``, like Kafka).
        ``topics()``: the broker's topics now (ids, partition counts), for consumer groups.
        ``consumer_group_timeouts(group_id)``: a consumer group's session timeout and
        heartbeat interval (default: the config's, for every group).
        """
        self.config = config or CoordinatorConfig()
        self.timer = GuardedTimer(timer)
        self._pending_ids = itertools.count(1)
        self.group_manager = GroupManager(
            self.config, self.timer, self._new_pending, member_id_factory or _default_member_id
        )
        self.consumer_groups = ConsumerGroupManager(
            self.config,
            self.timer,
            topics or (lambda: EMPTY_TOPICS_IMAGE),
            self.partition_for,
            consumer_group_timeouts,
        )
        self.offset_manager = OffsetManager(
            self.config, self.group_manager, self._new_pending, partition_exists, self.consumer_groups
        )
        # Classic members of consumer groups (mixed groups), and the online downgrade.
        self.classic_members = ClassicMembers(self.consumer_groups)
        self.consumer_groups.downgrade = self._maybe_downgrade
        self._loading: set[int] = set()
        # Partitions another broker of a cluster owns: their groups answer NOT_COORDINATOR.
        self._foreign: set[int] = set()
        self._now_ms = 0
        # Rebalance history: filled by whoever carries results out (their ``events``), and
        # at load from the records (``replay``). Pure data, read by the broker's admin side.
        self.history = GroupHistory(self.config.group_history_max_events)
        self._narrator = ReplayNarrator(self.history)

    def _new_pending(self, api_key: int, api_version: int) -> Pending:
        return Pending(next(self._pending_ids), api_key, api_version)

    # ================================================================ partitions and loading

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id`` (Kafka's mapping)."""
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    def is_group_loading(self, group_id: str) -> bool:
        return bool(self._loading) and self.partition_for(group_id) in self._loading

    def group_unavailable(self, group_id: str) -> int:
        """Why this coordinator cannot serve the group now: NOT_COORDINATOR (another broker
        owns its partition), COORDINATOR_LOAD_IN_PROGRESS, or 0 (it can)."""
        if not self._loading and not self._foreign:
            return ErrorCode.NONE
        partition = self.partition_for(group_id)
        if partition in self._foreign:
            return ErrorCode.NOT_COORDINATOR
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def owns(self, partition: int) -> bool:
        return partition not in self._foreign

    def begin_loading(self, partitions: Iterable[int] | None = None) -> None:
        """Mark partitions (default: all) as loading; their groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        if partitions is None:
            partitions = range(self.config.offsets_topic_num_partitions)
        partitions = set(partitions)
        self._foreign -= partitions
        self._loading.update(partitions)

    def disown(self, partitions: Iterable[int], now_ms: int) -> list[str]:
        """Another broker owns these partitions now: forget their groups (timers stopped,
        offsets dropped) until they are loaded again; returns the group ids dropped."""
        gone = set(partitions)
        self._foreign |= gone
        self._loading -= gone
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
        done = set(self._loading if partitions is None else partitions)
        self._loading -= done
        if not self._loading:
            self._narrator.clear()
        for group in self.group_manager.groups.values():
            if self.partition_for(group.group_id) in done:
                self.group_manager.on_loaded(group)
        for consumer_group in self.consumer_groups.groups.values():
            if self.partition_for(consumer_group.group_id) in done:
                self.consumer_groups.on_loaded(consumer_group)
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
        record_ms = now if record_time_ms is None else record_time_ms
        try:
            k = gr.decode_key(key)
            if isinstance(k, gr.OffsetCommitKey):
                om = None if value is None else OffsetAndMetadata.from_value(gr.decode_offset_commit_value(value))
                if producer_id >= 0 and om is not None:
                    self.offset_manager.replay_txn_commit(producer_id, k.group, k.topic, k.partition, om, now)
                    self.offset_manager.replay_producer_epoch(producer_id, producer_epoch)
                else:
                    self.offset_manager.replay_commit(k.group, k.topic, k.partition, om, now)
            elif isinstance(k, gr.GroupMetadataKey):
                gv = None if value is None else gr.decode_group_metadata_value(value)
                if self.is_group_loading(k.group):
                    self._narrator.group_metadata(k.group, gv, record_ms)
                self._replay_group(k.group, gv, now)
                if gv is None and self.group_manager.get(k.group) is None:
                    self.history.forget(k.group)  # the group is gone: so is its history
            elif isinstance(k, gr.UnknownKey):
                log.debug("skipping __consumer_offsets record with key version %s", k.version)
            else:
                cv = None if value is None else gr.decode_consumer_group_value(k, value)
                classic = self.group_manager.get(k.group)
                if cv is not None and classic is not None:
                    # The group is a consumer group from now on: a simple group made to hold
                    # offsets (replayed before the consumer group's records after compaction)
                    # gives way, and so does a classic group with members converted by an
                    # online upgrade (its tombstone came first; see migration.py).
                    self.group_manager.remove_group(k.group, now)
                if isinstance(k, gr.ConsumerGroupMetadataKey) and value is None:
                    self.consumer_groups.forget(k.group)
                    self.history.forget(k.group)
                crec.replay_consumer_record(self.consumer_groups.groups, k, cv, now)
                if self.is_group_loading(k.group):
                    self._narrator.consumer_record(k, cv, record_ms)
        except gr.RecordFormatError as exc:
            log.warning("skipping malformed __consumer_offsets record: %s", exc)
        except PartitionOwnershipError as exc:
            # Records that contradict each other (a corrupt or hand-written log): the
            # broker keeps loading; the member's next heartbeat sorts its assignment out.
            log.error("skipping inconsistent __consumer_offsets record: %s", exc)

    def apply(self, record: Record, now_ms: int | None = None) -> None:
        """``replay(record.key, record.value, now_ms)`` for a record this coordinator emitted.

        Same effect; an offset commit it built skips decoding its own bytes.
        """
        commit = record.commit
        if record.producer is not None:
            self.replay(record.key, record.value, now_ms, *record.producer)
            return
        if commit is None:
            self.replay(record.key, record.value, now_ms)
            return
        group_id, topic, partition, om = commit
        self.offset_manager.replay_commit(group_id, topic, partition, om, self._now_ms if now_ms is None else now_ms)

    def replay_end_transaction(
        self, producer_id: int, commit: bool, now_ms: int | None = None, producer_epoch: int = -1
    ) -> None:
        """A transaction marker (control batch) in ``__consumer_offsets``: the producer's
        pending offsets become committed (COMMIT) or are dropped (ABORT)."""
        self.offset_manager.replay_end_transaction(producer_id, commit, self._now_ms if now_ms is None else now_ms)
        self.offset_manager.replay_producer_epoch(producer_id, producer_epoch)

    def txn_offset_commit(self, ctx: RequestContext, req: TxnOffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(txn_commit_error_response(req, ErrorCode.INVALID_GROUP_ID))
        if code := self.group_unavailable(req.group_id):
            return _answer(txn_commit_error_response(req, code))
        return self.offset_manager.txn_commit(ctx, req, now_ms)

    def _replay_group(self, group_id: str, value: gr.GroupMetadataValue | None, now_ms: int) -> None:
        groups = self.group_manager
        loading = self.is_group_loading(group_id)
        current = groups.get(group_id)
        if value is None:
            if current is None:
                return
            if loading or current.state in (GroupState.EMPTY, GroupState.DEAD):
                groups.remove_group(group_id, now_ms)
            return
        if current is not None and not loading:
            # Our own record of a live group: the in-memory group is already ahead of it.
            return
        groups.groups[group_id] = _group_from_record(group_id, value, now_ms)

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
        if code := self.group_unavailable(req.group_id):
            return _answer(join_response(version, error=code, member_id=req.member_id))
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self._join_consumer_group(ctx, req, consumer_group)
        return self.group_manager.join_group(ctx, req, now_ms)

    def _join_consumer_group(
        self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup
    ) -> CoordinatorResult:
        """A classic JoinGroup for a consumer group.

        An empty consumer group is deleted (its offsets stay) and the join goes to a new
        classic group, as Kafka 4 converts it. A consumer group with members takes the
        classic consumer in as a member speaking the classic protocol, as Kafka 4 does
        (consumer_classic_members.py).
        """
        version = ctx.api_version
        if group.members:
            # A mixed group: the classic consumer becomes a member speaking the classic protocol.
            return self.classic_members.join(ctx, req, group, self._now_ms)
        log.info("group %s: converting the empty consumer group to a classic group", group.group_id)
        records = crec.group_tombstones(self.partition_for(group.group_id), group)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                return _answer(join_response(version, error=append_error_for_group(error), member_id=req.member_id))
            return self.group_manager.join_group(ctx, req, now)

        return CoordinatorResult(records=records, after_append=after_append)

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if not req.group_id:
            return _answer(SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID))
        if code := self.group_unavailable(req.group_id):
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
        if code := self.group_unavailable(req.group_id):
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
        if code := self.group_unavailable(req.group_id):
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
        if group_id and (code := self.group_unavailable(group_id)):
            return _answer(heartbeat_error(code))
        preceding: list[Record] = []
        classic = self.group_manager.get(group_id)
        if classic is not None and classic.state is not GroupState.DEAD:
            if req.member_epoch == 0 and classic.state is GroupState.EMPTY and not classic.pending_join_members:
                # An empty classic group becomes a consumer group; its committed offsets stay.
                log.info("group %s: converting the empty classic group to a consumer group", group_id)
                preceding.append(rec.group_tombstone(self.partition_for(group_id), group_id))
            elif req.member_epoch == 0 and self._upgrade_allowed(classic):
                return self._upgrade(ctx, req, classic, now_ms)
            else:
                # Kafka 4's answer when it does not convert a classic group with members.
                return _answer(
                    heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
                )
        return self.consumer_groups.heartbeat(ctx, req, now_ms, preceding)

    # ================================================================ online migration

    def _upgrade_allowed(self, classic: ClassicGroup) -> bool:
        """Kafka's validateOnlineUpgrade."""
        why = None
        if not self.config.consumer_group_migration_policy.upgrade_enabled:
            why = "the online upgrade is disabled"
        elif not classic.uses_consumer_protocol() or not classic.members:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.config.consumer_group_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            log.info("group %s: cannot upgrade the classic group to a consumer group: %s", classic.group_id, why)
        return why is None

    def _upgrade(
        self, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest, classic: ClassicGroup, now_ms: int
    ) -> CoordinatorResult:
        """The first consumer-protocol member of a classic group with members: the group
        becomes a consumer group (its classic members keep working, see migration.py)."""
        group_id = classic.group_id
        image = self.consumer_groups.topics()
        try:
            converted = consumer_group_from_classic(classic, image)
        except (ConversionError, PartitionOwnershipError) as exc:
            log.warning("group %s: cannot upgrade the classic group: %s", group_id, exc)
            return _answer(
                heartbeat_error(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                    "consumer protocol is malformed.",
                )
            )
        partition = self.partition_for(group_id)
        names = {t for m in converted.members.values() for t in m.subscribed_topic_names}
        preceding = [rec.group_tombstone(partition, group_id)]
        preceding += consumer_group_records(partition, converted, image.metadata_hash(names), now_ms)
        result = self.consumer_groups.heartbeat(ctx, req, now_ms, preceding, converted)
        if not result.records:
            return result  # refused: the group stays classic
        log.info(
            "group %s: upgrading the classic group (generation %d) to a consumer group",
            group_id, classic.generation_id,
        )
        # Members waiting in a rebalance of the classic group rejoin the consumer group.
        for member in classic.members.values():
            if member.join_pending is not None:
                answer = join_response(
                    member.join_pending.api_version, error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id
                )
                result.completions.append(Completion(member.join_pending, answer))
                member.join_pending = None
            if member.sync_pending is not None:
                answer_sync = SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS, assignment=b"")
                result.completions.append(Completion(member.sync_pending, answer_sync))
                member.sync_pending = None
        for m in converted.members.values():
            assert m.classic is not None
            self.consumer_groups.schedule_session_timeout(group_id, m.member_id, m.classic.session_timeout_ms)
        return result

    def _maybe_downgrade(
        self, group: ConsumerGroup, leaving: ConsumerGroupMember, now_ms: int
    ) -> CoordinatorResult | None:
        """The last consumer-protocol member leaves (or is fenced) and classic members remain:
        the group becomes a classic group and rebalances (Kafka's convertToClassicGroup).
        None when it does not (the group stays a consumer group)."""
        group_id = group.group_id
        if not group.all_members_use_classic_protocol_except(leaving.member_id) or len(group.members) <= 1:
            return None
        if not self.config.consumer_group_migration_policy.downgrade_enabled:
            log.info("group %s: cannot downgrade to a classic group: the online downgrade is disabled", group_id)
            return None
        if len(group.members) - 1 > self.config.group_max_size:
            log.info("group %s: cannot downgrade to a classic group: it exceeds group.max.size", group_id)
            return None
        image = self.consumer_groups.topics()
        classic = classic_group_from_consumer(group, leaving.member_id, image, now_ms)
        partition = self.partition_for(group_id)
        records = [*crec.group_tombstones(partition, group), classic_group_record(partition, classic)]
        log.info(
            "group %s: downgrading the consumer group (epoch %d) to a classic group as its last "
            "consumer-protocol member %s leaves", group_id, group.group_epoch, leaving.member_id,
        )
        for member in group.members.values():
            self.classic_members.cancel_timers(group_id, member.member_id)

        def after_append(error: int, now: int) -> CoordinatorResult:
            converted = self.group_manager.get(group_id)
            if error or converted is None:
                return CoordinatorResult()
            self.group_manager.on_loaded(converted)
            fx = Effects()
            self.group_manager.rebalance.prepare_rebalance(
                converted, fx, now, f"Downgrade group {group_id} from consumer to classic.",
                cause=RebalanceCause.MEMBER_LEFT,
            )
            return fx.result()

        return CoordinatorResult(records=records, after_append=after_append)

    def consumer_group_describe(
        self, ctx: RequestContext, req: ConsumerGroupDescribeRequest, now_ms: int
    ) -> CoordinatorResult:
        self._now_ms = now_ms
        out = ConsumerGroupDescribeResponse()
        for group_id in req.group_ids:
            if code := self.group_unavailable(group_id):
                described = self.consumer_groups.describe(group_id, False, 0)
                described.error_code = code
                described.error_message = None
            elif self.group_manager.get(group_id) is not None and self.consumer_groups.get(group_id) is None:
                described = self.consumer_groups.describe(group_id, False, 0)
                described.error_message = f"Group {group_id} is not a consumer group."
            else:
                described = self.consumer_groups.describe(
                    group_id, req.include_authorized_operations, _GROUP_OPERATIONS
                )
            out.groups.append(described)
        return _answer(out)

    # ================================================================ offsets

    def offset_commit(self, ctx: RequestContext, req: OffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if code := self.group_unavailable(req.group_id):
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
        if code := self.group_unavailable(group_id):
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
        if code := self.group_unavailable(req.group_id):
            return _answer(OffsetDeleteResponse(error_code=code))
        return self.offset_manager.delete(ctx, req, now_ms)

    # ================================================================ admin: describe, list, delete

    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        include_ops = ctx.api_version >= 3 and req.include_authorized_operations
        out = DescribeGroupsResponse()
        for group_id in req.groups:
            described = self._describe(group_id)
            if ctx.api_version >= 6 and described.group_state == str(GroupState.DEAD) and not described.error_code:
                described.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                described.error_message = f"Group {group_id} not found."
            if include_ops and not described.error_code:
                described.authorized_operations = _GROUP_OPERATIONS
            out.groups.append(described)
        return _answer(out)

    def _describe(self, group_id: str) -> DescribeGroupsResponseDescribedGroup:
        if code := self.group_unavailable(group_id):
            return DescribeGroupsResponseDescribedGroup(error_code=code, group_id=group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self._describe_consumer_group(consumer_group)
        group = self.group_manager.get(group_id)
        if group is None:
            return DescribeGroupsResponseDescribedGroup(group_id=group_id, group_state=str(GroupState.DEAD))
        stable = group.state is GroupState.STABLE and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(
                DescribeGroupsResponseDescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                    member_assignment=m.assignment,
                )
            )
        return DescribeGroupsResponseDescribedGroup(
            group_id=group_id,
            group_state=str(group.state),
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    def _describe_consumer_group(self, group: ConsumerGroup) -> DescribeGroupsResponseDescribedGroup:
        """A consumer group in DescribeGroups' classic shape (as Kafka's ``asDescribedGroup``):
        protocol type "consumer", the assignor as protocol, subscriptions and assignments
        encoded with the classic consumer protocol."""
        image = self.consumer_groups.topics()
        members = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            topics = sorted(group.member_subscribed_topics(m))
            assigned = [
                cp.ConsumerProtocolTopicPartition(topic=name, partitions=sorted(parts))
                for topic_id, parts in sorted(m.assigned_partitions.items())
                if (name := image.name_of(topic_id)) is not None
            ]
            members.append(
                DescribeGroupsResponseDescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=cp.encode_subscription(cp.ConsumerProtocolSubscription(topics=topics), 0),
                    member_assignment=cp.encode_assignment(
                        cp.ConsumerProtocolAssignment(assigned_partitions=assigned), 0
                    ),
                )
            )
        return DescribeGroupsResponseDescribedGroup(
            group_id=group.group_id,
            group_state=group.state.value,
            protocol_type=CONSUMER_GROUP_TYPE,
            protocol_data=self.consumer_groups.assignor_name(group),
            members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        if self._loading:
            return _answer(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        version = ctx.api_version
        states = {s.strip().lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.strip().lower() for t in req.types_filter} if version >= 5 else set()
        out = ListGroupsResponse()
        for group in self.group_manager.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if states and group.state.lower_name not in states:
                continue
            if types and CLASSIC_GROUP_TYPE not in types:
                continue
            out.groups.append(
                ListGroupsResponseListedGroup(
                    group_id=group.group_id,
                    protocol_type=group.protocol_type or "",
                    group_state=str(group.state),
                    group_type=CLASSIC_GROUP_TYPE,
                )
            )
        if types and CONSUMER_GROUP_TYPE not in types:
            return _answer(out)
        for consumer_group in self.consumer_groups.groups.values():
            state = consumer_group.state
            if state is ConsumerGroupState.DEAD or (states and state.value.lower() not in states):
                continue
            out.groups.append(
                ListGroupsResponseListedGroup(
                    group_id=consumer_group.group_id,
                    protocol_type=CONSUMER_GROUP_TYPE,
                    group_state=state.value,
                    group_type=CONSUMER_GROUP_TYPE,
                )
            )
        return _answer(out)

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        results: list[DeleteGroupsResponseDeletableGroupResult] = []
        records: list[Record] = []
        for group_id in req.groups_names:
            error = self._delete_group_records(group_id, records)
            results.append(DeleteGroupsResponseDeletableGroupResult(group_id=group_id, error_code=error))
        response = DeleteGroupsResponse(results=results)
        if not records:
            return _answer(response)
        own = self._new_pending(DELETE_GROUPS_KEY, ctx.api_version)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                mapped = append_error_for_group(error)
                for r in results:
                    if not r.error_code:
                        r.error_code = mapped
            return CoordinatorResult(completions=[Completion(own, response)])

        return CoordinatorResult(pending=own, records=records, after_append=after_append)

    def _delete_group_records(self, group_id: str, records: list[Record]) -> int:
        if code := self.group_unavailable(group_id):
            return code
        partition = self.partition_for(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return ErrorCode.NON_EMPTY_GROUP
            self._offset_tombstones(group_id, records)
            records.extend(crec.group_tombstones(partition, consumer_group))
            log.info("deleting consumer group %s", group_id)
            return ErrorCode.NONE
        group = self.group_manager.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self._offset_tombstones(group_id, records)
        records.append(rec.group_tombstone(partition, group_id))
        log.info("deleting group %s", group_id)
        return ErrorCode.NONE

    def _offset_tombstones(self, group_id: str, records: list[Record]) -> None:
        partition = self.partition_for(group_id)
        for topic, by_partition in self.offset_manager.offsets.get(group_id, {}).items():
            for index in by_partition:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))

    # ================================================================ retention

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for offsets past ``offsets.retention``, and for Empty groups left with none."""
        self._now_ms = now_ms
        records: list[Record] = []
        for group in list(self.group_manager.groups.values()):
            group_id = group.group_id
            if self.is_group_loading(group_id) or group.state is GroupState.DEAD:
                continue
            expired, everything = self.offset_manager.expired_offsets(group, now_ms)
            partition = self.partition_for(group_id)
            for topic, index in expired:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))
            if everything and group.state is GroupState.EMPTY and not group.pending_join_members:
                records.append(rec.group_tombstone(partition, group_id))
        for consumer_group in list(self.consumer_groups.groups.values()):
            group_id = consumer_group.group_id
            if self.is_group_loading(group_id):
                continue
            expired, everything = self.offset_manager.expired_consumer_group_offsets(consumer_group, now_ms)
            partition = self.partition_for(group_id)
            for topic, index in expired:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))
            if everything and consumer_group.state is ConsumerGroupState.EMPTY:
                records.extend(crec.group_tombstones(partition, consumer_group))
        if records:
            log.info("offset retention: %s tombstones", len(records))
        return CoordinatorResult(records=records)

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


def _answer(response: Struct) -> CoordinatorResult:
    return CoordinatorResult(response=response)


def _group_from_record(group_id: str, value: gr.GroupMetadataValue, now_ms: int) -> ClassicGroup:
    """Rebuild a group from its latest GroupMetadataValue: Stable with members, else Empty."""
    group = ClassicGroup(
        group_id,
        now_ms,
        GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
    )
    group.current_state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp != -1 else None
    for m in value.members:
        group.add(
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", bytes(m.subscription))],
                assignment=bytes(m.assignment),
            )
        )
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
