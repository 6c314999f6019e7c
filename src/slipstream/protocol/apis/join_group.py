"""JoinGroup (key 11), versions 0-9; flexible from v6.

v1 adds rebalance_timeout_ms (v0 members use the session timeout for both);
v2 adds throttle_time_ms to the response; v3 is the same as v2; from v4 a
member joining without a member id is answered MEMBER_ID_REQUIRED with an
assigned id and must join again with it (KIP-394); v5 adds group_instance_id
for static membership (KIP-345); v6 is the first flexible version; v7 returns
protocol_type and makes protocol_name nullable (KIP-559); v8 adds the
request's reason (KIP-800); v9 adds skip_assignment to the response (a static
leader rejoining a stable group must not run the assignor).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Struct, field


class JoinGroupRequestProtocol(Struct):
    name: str = field(STRING)
    metadata: bytes = field(BYTES)


class JoinGroupRequest(Struct):
    group_id: str = field(STRING)
    session_timeout_ms: int = field(INT32)
    rebalance_timeout_ms: int = field(INT32, v="1+", default=-1)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="5+", nullable="5+", default=None)
    protocol_type: str = field(STRING)
    protocols: list[JoinGroupRequestProtocol] = field(Array(JoinGroupRequestProtocol))
    reason: str | None = field(STRING, v="8+", nullable="8+", default=None)


class JoinGroupResponseMember(Struct):
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="5+", nullable="5+", default=None)
    metadata: bytes = field(BYTES)


class JoinGroupResponse(Struct):
    throttle_time_ms: int = field(INT32, v="2+")
    error_code: int = field(INT16)
    generation_id: int = field(INT32, default=-1)
    protocol_type: str | None = field(STRING, v="7+", nullable="7+", default=None)
    protocol_name: str | None = field(STRING, nullable="7+")
    leader: str = field(STRING)
    skip_assignment: bool = field(BOOL, v="9+")
    member_id: str = field(STRING)
    members: list[JoinGroupResponseMember] = field(Array(JoinGroupResponseMember))


SPEC = register(ApiSpec(11, "JoinGroup", JoinGroupRequest, JoinGroupResponse, 0, 9, 6))
