"""Shaping classic-protocol responses for the version that asked."""

from __future__ import annotations

import logging

from ..protocol.apis.join_group import JoinGroupResponse, JoinGroupResponseMember
from ..protocol.apis.leave_group import LeaveGroupResponse, LeaveGroupResponseMemberResponse
from ..protocol.errors import ErrorCode
from .result import AfterAppend, CoordinatorResult

log = logging.getLogger("slipstream.coordinator")

UNKNOWN_MEMBER_ID = ""


def join_response(
    version: int,
    *,
    error: int = ErrorCode.NONE,
    member_id: str = UNKNOWN_MEMBER_ID,
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = None,
    members: list[JoinGroupResponseMember] | None = None,
    skip_assignment: bool = False,
) -> JoinGroupResponse:
    # Before v7 the protocol name is not nullable: "" stands for none (and v7+ sends null for "").
    if version < 7:
        protocol_name = protocol_name or ""
    elif protocol_name == "":
        protocol_name = None
    return JoinGroupResponse(
        error_code=error,
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        leader=leader or "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=members or [],
    )


def leave_response(
    version: int, error: int, members: list[LeaveGroupResponseMemberResponse]
) -> LeaveGroupResponse:
    if version >= 3:
        return LeaveGroupResponse(error_code=error, members=members)
    # v0-2 carry one member and no per-member results: its error becomes the top-level error.
    if not error and members:
        error = members[0].error_code
    return LeaveGroupResponse(error_code=error)


def log_append_failure(group_id: str, what: str) -> AfterAppend:
    """An after-append callback that only logs a failed write (nobody waits for it)."""

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            log.warning("group %s: failed to write %s: error %s", group_id, what, error)
        return CoordinatorResult()

    return after_append
