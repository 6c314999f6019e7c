"""Online migration between the classic and the consumer protocols: when, and carrying it out.

- A classic JoinGroup for an empty consumer group deletes it (its offsets stay) and
  joins a new classic group; for one with members, see consumer_classic_members.py.
- A ConsumerGroupHeartbeat (epoch 0) for an empty classic group deletes it and makes
  a consumer group; for a classic group of consumers with members, the online
  upgrade when the policy and the group allow it (Kafka's validateOnlineUpgrade);
  otherwise the group is not a consumer group.
- When the last consumer-protocol member leaves and classic members remain, the
  online downgrade (Kafka's convertToClassicGroup).

``migration.py`` builds the converted groups and their records; replaying those
records is what switches the group's type.
"""

from __future__ import annotations

import logging

from ..protocol.apis.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from ..protocol.apis.join_group import JoinGroupRequest
from ..protocol.apis.sync_group import SyncGroupResponse
from ..protocol.errors import ErrorCode
from . import consumer_records as crec
from . import records as rec
from .append_errors import append_error_for_group
from .classic_responses import join_response
from .config import CoordinatorConfig
from .consumer import ConsumerGroup, ConsumerGroupMember, PartitionOwnershipError
from .consumer_classic_members import ClassicMembers
from .consumer_group_manager import ConsumerGroupManager
from .consumer_responses import heartbeat_error
from .consumer_sessions import FENCE_RETRY_MS
from .effects import Effects
from .group import ClassicGroup
from .group_manager import GroupManager
from .history import RebalanceCause
from .migration import (
    ConversionError,
    classic_group_from_consumer,
    classic_group_record,
    consumer_group_from_classic,
    consumer_group_records,
)
from .ownership import PartitionOwnership
from .result import Completion, CoordinatorResult, RequestContext
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")


class ProtocolMigration:
    def __init__(
        self,
        config: CoordinatorConfig,
        ownership: PartitionOwnership,
        group_manager: GroupManager,
        consumer_groups: ConsumerGroupManager,
        classic_members: ClassicMembers,
    ) -> None:
        self.config = config
        self.ownership = ownership
        self.group_manager = group_manager
        self.consumer_groups = consumer_groups
        self.classic_members = classic_members

    def classic_join_to_empty_consumer_group(
        self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup
    ) -> CoordinatorResult:
        """The empty consumer group is deleted (its offsets stay) and the join goes to a new
        classic group, as Kafka 4 converts it."""
        version = ctx.api_version
        log.info("group %s: converting the empty consumer group to a classic group", group.group_id)
        records = crec.group_tombstones(self.ownership.partition_for(group.group_id), group)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                response = join_response(version, error=append_error_for_group(error), member_id=req.member_id)
                return CoordinatorResult(response=response)
            return self.group_manager.join_group(ctx, req, now)

        return CoordinatorResult(records=records, after_append=after_append)

    def consumer_heartbeat_to_classic_group(
        self, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest, classic: ClassicGroup, now_ms: int
    ) -> CoordinatorResult:
        """A ConsumerGroupHeartbeat for a live classic group: convert it, upgrade it, or refuse."""
        group_id = classic.group_id
        if req.member_epoch == 0 and classic.state is GroupState.EMPTY and not classic.pending_join_members:
            # An empty classic group becomes a consumer group; its committed offsets stay.
            log.info("group %s: converting the empty classic group to a consumer group", group_id)
            preceding = [rec.group_tombstone(self.ownership.partition_for(group_id), group_id)]
            return self.consumer_groups.heartbeat(ctx, req, now_ms, preceding)
        if req.member_epoch == 0 and self._upgrade_allowed(classic):
            return self._upgrade(ctx, req, classic, now_ms)
        # Kafka 4's answer when it does not convert a classic group with members.
        return CoordinatorResult(
            response=heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        )

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
            return CoordinatorResult(response=
                heartbeat_error(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                    "consumer protocol is malformed.",
                )
            )
        partition = self.ownership.partition_for(group_id)
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
            self.consumer_groups.sessions.schedule_session_timeout(group_id, m.member_id, m.classic.session_timeout_ms)
        return result

    def downgrade(
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
        partition = self.ownership.partition_for(group_id)
        records = [*crec.group_tombstones(partition, group), classic_group_record(partition, classic)]
        log.info(
            "group %s: downgrading the consumer group (epoch %d) to a classic group as its last "
            "consumer-protocol member %s leaves", group_id, group.group_epoch, leaving.member_id,
        )
        for member in group.members.values():
            self.classic_members.cancel_timers(group_id, member.member_id)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                self._downgrade_not_written(group_id, leaving.member_id)
                return CoordinatorResult()
            converted = self.group_manager.get(group_id)
            if converted is None:
                return CoordinatorResult()
            self.group_manager.on_loaded(converted)
            fx = Effects()
            self.group_manager.rebalance.prepare_rebalance(
                converted, fx, now, f"Downgrade group {group_id} from consumer to classic.",
                cause=RebalanceCause.MEMBER_LEFT,
            )
            return fx.result()

        return CoordinatorResult(records=records, after_append=after_append)

    def _downgrade_not_written(self, group_id: str, leaving_member_id: str) -> None:
        """The downgrade's records failed to append: the group goes on as a consumer group.
        Its members' timers, cancelled when the downgrade began (so none fires on a group
        being converted), run again, and the leaving member's fence is tried again soon, as
        a fence whose write failed is (a member that sent its leave is answered the error)."""
        group = self.consumer_groups.groups.get(group_id)
        if group is None:
            return
        sessions = self.consumer_groups.sessions
        sessions.on_loaded(group)
        if group.has_member(leaving_member_id):
            sessions.schedule_session_timeout(group_id, leaving_member_id, FENCE_RETRY_MS)
