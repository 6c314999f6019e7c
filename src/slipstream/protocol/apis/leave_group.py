"""LeaveGroup (key 13), versions 0-5; flexible from v4.

v0-2 remove one member by ``member_id`` and answer with a top-level error
only (v1 adds throttle_time_ms); v3 turns the request into a batch of
``members`` (member id and/or group instance id, so an operator can remove
static members by instance id) with a per-member result; v4 is the first
flexible version; v5 adds a per-member reason (KIP-800).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, Array, Struct, field


class LeaveGroupRequestMemberIdentity(Struct):
    member_id: str = field(STRING, v="3+")
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+", default=None)
    reason: str | None = field(STRING, v="5+", nullable="5+", default=None)


class LeaveGroupRequest(Struct):
    group_id: str = field(STRING)
    member_id: str = field(STRING, v="0-2")
    members: list[LeaveGroupRequestMemberIdentity] = field(Array(LeaveGroupRequestMemberIdentity), v="3+")


class LeaveGroupResponseMemberResponse(Struct):
    member_id: str = field(STRING, v="3+")
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+")
    error_code: int = field(INT16, v="3+")


class LeaveGroupResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16)
    members: list[LeaveGroupResponseMemberResponse] = field(Array(LeaveGroupResponseMemberResponse), v="3+")


SPEC = register(ApiSpec(13, "LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, 0, 5, 4))
