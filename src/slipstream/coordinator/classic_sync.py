"""SyncGroup of the classic protocol: the leader's assignment, made durable, then handed out.

In CompletingRebalance every member's SyncGroup parks; the leader's carries the
assignment, which is written as the group's record and, once durable, answered
to every parked member (or, if the write failed, an error to all of them and a
new rebalance). In Stable a SyncGroup is answered at once from the stored
assignment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.errors import ErrorCode
from . import history as ev
from . import records as rec
from .append_errors import append_error_for_group
from .classic_rebalance import ClassicRebalance
from .effects import Effects
from .group import ClassicGroup
from .result import AfterAppend, CoordinatorResult, Pending, RequestContext
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")

SYNC_GROUP_KEY = 14


class ClassicSync:
    def __init__(self, rebalance: ClassicRebalance, new_pending: Callable[[int, int], Pending]) -> None:
        self.rebalance = rebalance
        self._new_pending = new_pending

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        rb = self.rebalance
        version = ctx.api_version
        group = rb.groups.get(req.group_id)
        if group is None or group.state is GroupState.EMPTY:
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        error = self._validate_sync(group, req)
        if error:
            response = SyncGroupResponse(error_code=error)
            if rb.is_fence(error, req.member_id):
                fenced = rb.fenced(
                    group, req.member_id, req.group_instance_id, "SyncGroup", error, req.generation_id, now_ms
                )
                return CoordinatorResult(response=response, events=(fenced,))
            return CoordinatorResult(response=response)
        if group.state is GroupState.PREPARING_REBALANCE:
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))

        fx = Effects()
        member = group.member(req.member_id)
        if group.state is GroupState.STABLE:
            rb.remove_pending_sync_member(group, member.member_id)
            return CoordinatorResult(
                response=SyncGroupResponse(
                    error_code=ErrorCode.NONE,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
            )

        # CompletingRebalance: park until the leader's assignment is durable.
        own = self._new_pending(SYNC_GROUP_KEY, version)
        if member.sync_pending is not None:
            old = member.sync_pending
            fx.complete(old, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_pending = own
        rb.remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
            missing = [m for m in group.members if m not in assignment]
            for member_id in missing:
                assignment[member_id] = b""
            if missing:
                log.warning(
                    "group %s: leader's assignment for generation %s leaves out %s; they get an empty one",
                    group.group_id, group.generation_id, missing,
                )
            log.info(
                "group %s: assignment received from leader %s for generation %s (%s members)",
                group.group_id, member.member_id, group.generation_id, group.num_members,
            )
            fx.records.append(rec.group_metadata_record(rb.partition_for(group.group_id), group, assignment))
            fx.after.append(self._assignment_written(group, req.generation_id, assignment))
        return fx.result(own)

    def _assignment_written(self, group: ClassicGroup, generation: int, assignment: dict[str, bytes]) -> AfterAppend:
        rb = self.rebalance

        def after_append(error: int, now: int) -> CoordinatorResult:
            out = Effects()
            # Something else may have happened meanwhile: act only on the same generation.
            if group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == generation:
                if error:
                    mapped = append_error_for_group(error)
                    rb.reset_and_propagate_assignment_error(group, mapped, out)
                    rb.maybe_prepare_rebalance_or_complete_join(
                        group, out, now, f"error {mapped} storing the group assignment",
                        cause=ev.RebalanceCause.ASSIGNMENT_WRITE_FAILED,
                    )
                else:
                    for m in group.members.values():
                        m.assignment = assignment.get(m.member_id, b"")
                    rb.propagate_assignment(group, ErrorCode.NONE, out)
                    group.transition_to(GroupState.STABLE, now)
                    rb.assignment_events(group, out, now, assignment)
            return out.result()

        return after_append

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> int:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.rebalance.validate_member(group, req.member_id, req.group_instance_id, "sync-group")
        if error:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
