"""SyncGroup (key 14), versions 0-5; flexible from v4.

v1 adds throttle_time_ms to the response; v2 is the same as v1; v3 adds
group_instance_id (static membership, KIP-345); v4 is the first flexible
version; v5 carries protocol_type and protocol_name both ways (KIP-559): the
broker answers INCONSISTENT_GROUP_PROTOCOL when the request's differ from the
group's, and echoes the group's in the response.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BYTES, INT16, INT32, STRING, Array, Struct, field


class SyncGroupRequestAssignment(Struct):
    member_id: str = field(STRING)
    assignment: bytes = field(BYTES)


class SyncGroupRequest(Struct):
    group_id: str = field(STRING)
    generation_id: int = field(INT32)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+", default=None)
    protocol_type: str | None = field(STRING, v="5+", nullable="5+", default=None)
    protocol_name: str | None = field(STRING, v="5+", nullable="5+", default=None)
    assignments: list[SyncGroupRequestAssignment] = field(Array(SyncGroupRequestAssignment))


class SyncGroupResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16)
    protocol_type: str | None = field(STRING, v="5+", nullable="5+", default=None)
    protocol_name: str | None = field(STRING, v="5+", nullable="5+", default=None)
    assignment: bytes = field(BYTES)


SPEC = register(ApiSpec(14, "SyncGroup", SyncGroupRequest, SyncGroupResponse, 0, 5, 4))
