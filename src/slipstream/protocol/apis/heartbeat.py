"""Heartbeat (key 12), versions 0-4; flexible from v4.

v1 adds throttle_time_ms to the response; v2 is the same as v1; v3 adds
group_instance_id (static membership, KIP-345); v4 is the first flexible
version. REBALANCE_IN_PROGRESS in the response tells the member to rejoin.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, Struct, field


class HeartbeatRequest(Struct):
    group_id: str = field(STRING)
    generation_id: int = field(INT32)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+", default=None)


class HeartbeatResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16)


SPEC = register(ApiSpec(12, "Heartbeat", HeartbeatRequest, HeartbeatResponse, 0, 4, 4))
