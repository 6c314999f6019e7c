"""FindCoordinator (key 10), versions 0-6; flexible from v3.

v1 adds key_type (0 = group, 1 = transaction) and the throttle time / error
message in the response; v2 is the same as v1; v3 is the first flexible
version; v4 batches lookups: ``coordinator_keys`` replaces ``key`` and the
response answers with one ``coordinators`` entry per key (the single-key
fields stop at v3); v5 may return TRANSACTION_ABORTABLE (KIP-890); v6 adds
share groups (key_type 2, KIP-932).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, field


class FindCoordinatorRequest(Struct):
    key: str = field(STRING, v="0-3")
    key_type: int = field(INT8, v="1+")
    coordinator_keys: list[str] = field(Array(STRING), v="4+")


class FindCoordinatorResponseCoordinator(Struct):
    key: str = field(STRING, v="4+")
    node_id: int = field(INT32, v="4+")
    host: str = field(STRING, v="4+")
    port: int = field(INT32, v="4+")
    error_code: int = field(INT16, v="4+")
    error_message: str | None = field(STRING, v="4+", nullable="4+")


class FindCoordinatorResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16, v="0-3")
    error_message: str | None = field(STRING, v="1-3", nullable="1-3")
    node_id: int = field(INT32, v="0-3")
    host: str = field(STRING, v="0-3")
    port: int = field(INT32, v="0-3")
    coordinators: list[FindCoordinatorResponseCoordinator] = field(
        Array(FindCoordinatorResponseCoordinator), v="4+"
    )


SPEC = register(ApiSpec(10, "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, 0, 6, 3))
