"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Follows Apache Kafka's classic group coordinator (``GroupMetadataManager``'s
classic-group half): a group moves Empty -> PreparingRebalance (members join)
-> CompletingRebalance (the leader assigns) -> Stable, and back to
PreparingRebalance whenever membership or metadata changes.

Membership is live, in-memory state mutated here; what must survive a restart
(the group's generation, protocol, leader, members and assignments after each
rebalance, and the group's disappearance) is written as records.

Where things are:
- classic_rebalance.py: the groups and the machinery every API shares (preparing
  and completing a rebalance, the initial delay, the sync deadline, removing
  members, session expiry);
- classic_join.py: JoinGroup; classic_sync.py: SyncGroup;
- classic_sessions.py: the members' session timers;
- this module: Heartbeat and LeaveGroup, and the face the coordinator uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest
from ..protocol.apis.leave_group import (
    LeaveGroupRequest,
    LeaveGroupRequestMemberIdentity,
    LeaveGroupResponseMemberResponse,
)
from ..protocol.apis.sync_group import SyncGroupRequest
from ..protocol.errors import ErrorCode
from . import history as ev
from .classic_join import ClassicJoin
from .classic_rebalance import ClassicRebalance
from .classic_responses import UNKNOWN_MEMBER_ID, leave_response
from .classic_sessions import SessionTimers
from .classic_sync import ClassicSync
from .config import CoordinatorConfig
from .effects import Effects
from .group import ClassicGroup
from .history_moves import owners_of
from .member import Member
from .result import CoordinatorResult, Pending, RequestContext
from .state import GroupState
from .timer import GuardedTimer

log = logging.getLogger("slipstream.coordinator")


class GroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        timer: GuardedTimer,
        new_pending: Callable[[int, int], Pending],
        new_member_id: Callable[[str], str],
    ) -> None:
        self.config = config
        self.timer = timer
        self.rebalance = ClassicRebalance(config, timer)
        self._join = ClassicJoin(self.rebalance, new_pending, new_member_id)
        self._sync = ClassicSync(self.rebalance, new_pending)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.rebalance.groups

    @property
    def sessions(self) -> SessionTimers:
        return self.rebalance.sessions

    def partition_for(self, group_id: str) -> int:
        return self.rebalance.partition_for(group_id)

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.rebalance.groups.get(group_id)

    def get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        return self.rebalance.get_or_create(group_id, now_ms)

    def remove_group(self, group_id: str, now_ms: int) -> None:
        """Forget a group (after its tombstone): it becomes Dead and its timers stop."""
        self.rebalance.remove_group(group_id, now_ms)

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None, operation: str) -> int:
        """Kafka's validateMember: 0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        return self.rebalance.validate_member(group, member_id, instance_id, operation)

    def fenced_events(
        self, group_id: str, member_id: str, instance_id: str | None, api: str, error: int, generation: int,
        now_ms: int,
    ) -> tuple[ev.GroupEvent, ...]:
        """The history's note of a request that fences its sender (see ClassicRebalance.is_fence), else none."""
        group = self.rebalance.groups.get(group_id)
        if group is None or not self.rebalance.is_fence(error, member_id):
            return ()
        return (self.rebalance.fenced(group, member_id, instance_id, api, error, generation, now_ms),)

    def note_coordinator_lookup(self, group_id: str, connection: str, now_ms: int) -> None:
        self.rebalance.note_coordinator_lookup(group_id, connection, now_ms)

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, now_ms: int | None = None) -> None:
        """Push the member's session end to ``now_ms`` + its session timeout (see classic_sessions)."""
        self.rebalance.sessions.extend(group.group_id, member.member_id, member.session_timeout_ms, now_ms)

    def on_loaded(self, group: ClassicGroup) -> None:
        """Arm session timers for a group rebuilt from the log; note its leader and owners for the history."""
        group.generation_leader = group.leader_id if group.members else None
        if group.uses_consumer_protocol():
            group.partition_owners = owners_of(group.assignment_map())
        for member in group.members.values():
            self.reschedule_heartbeat(group, member)

    # ================================================================ the four APIs

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, now_ms: int) -> CoordinatorResult:
        return self._join.join_group(ctx, req, now_ms)

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        return self._sync.sync_group(ctx, req, now_ms)

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest, now_ms: int) -> CoordinatorResult:
        group = self.rebalance.groups.get(req.group_id)
        if group is None:
            return CoordinatorResult(response=HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.DEAD:
            return CoordinatorResult(response=HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self.rebalance.validate_member(group, req.member_id, req.group_instance_id, "heartbeat")
        if not error and req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            response = HeartbeatResponse(error_code=error)
            if self.rebalance.is_fence(error, req.member_id):
                fenced = self.rebalance.fenced(
                    group, req.member_id, req.group_instance_id, "Heartbeat", error, req.generation_id, now_ms
                )
                return CoordinatorResult(response=response, events=(fenced,))
            return CoordinatorResult(response=response)
        member = group.member(req.member_id)
        member.last_heartbeat_ms = now_ms
        if group.state is GroupState.EMPTY:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            # CompletingRebalance too: members heartbeat between JoinGroup and SyncGroup.
            self.reschedule_heartbeat(group, member, now_ms)
            if group.state is GroupState.PREPARING_REBALANCE:
                error = ErrorCode.REBALANCE_IN_PROGRESS
        return CoordinatorResult(response=HeartbeatResponse(error_code=error))

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, now_ms: int) -> CoordinatorResult:
        rb = self.rebalance
        version = ctx.api_version
        identities = (
            [LeaveGroupRequestMemberIdentity(member_id=req.member_id)] if version <= 2 else list(req.members)
        )
        group = rb.groups.get(req.group_id)
        if group is None:
            return CoordinatorResult(
                response=leave_response(
                    version,
                    ErrorCode.NONE,
                    [
                        LeaveGroupResponseMemberResponse(
                            member_id=i.member_id,
                            group_instance_id=i.group_instance_id,
                            error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                        )
                        for i in identities
                    ],
                )
            )
        if group.state is GroupState.DEAD:
            return CoordinatorResult(response=leave_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, []))

        fx = Effects()
        answers: list[LeaveGroupResponseMemberResponse] = []
        removed: list[str] = []
        for ident in identities:
            reason = ident.reason or "not provided"
            error = ErrorCode.NONE
            if ident.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by group.instance.id.
                target = group.static_member_id(ident.group_instance_id) if ident.group_instance_id else None
                if target is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._leave(group, target, ident.group_instance_id, ident.reason, fx, now_ms)
                    removed.append(target)
            elif group.is_pending_member(ident.member_id):
                group.remove(ident.member_id)
                rb.sessions.cancel(group.group_id, ident.member_id)
                log.info("group %s: pending member %s left (reason: %s)", group.group_id, ident.member_id, reason)
                removed.append(ident.member_id)
            else:
                error = rb.validate_member(group, ident.member_id, ident.group_instance_id, "leave-group")
                if not error:
                    self._leave(group, ident.member_id, ident.group_instance_id, ident.reason, fx, now_ms)
                    removed.append(ident.member_id)
                elif rb.is_fence(error, ident.member_id):
                    fx.event(
                        rb.fenced(group, ident.member_id, ident.group_instance_id, "LeaveGroup", error, None, now_ms)
                    )
            answers.append(
                LeaveGroupResponseMemberResponse(
                    member_id=ident.member_id, group_instance_id=ident.group_instance_id, error_code=error
                )
            )
        if removed:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                rb.maybe_prepare_rebalance_or_complete_join(
                    group, fx, now_ms, f"members {removed} left the group", cause=ev.RebalanceCause.MEMBER_LEFT
                )
            elif group.state is GroupState.PREPARING_REBALANCE:
                rb.maybe_complete_join_phase(group, fx, now_ms)
        return fx.result(None, leave_response(version, ErrorCode.NONE, answers))

    def _leave(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, reason: str | None, fx: Effects, now_ms: int
    ) -> None:
        log.info("group %s: member %s left (reason: %s)", group.group_id, member_id, reason or "not provided")
        fx.event(
            ev.MemberLeft(group_id=group.group_id, at_ms=now_ms, member_id=member_id, instance_id=instance_id, reason=reason)
        )
        self.rebalance.remove_member(group, group.member(member_id), fx)
