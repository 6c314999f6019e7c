"""CreatePartitions (key 37), versions 0-3; flexible from v2.

Raises a topic's partition count to ``count`` (never lowers it:
INVALID_PARTITIONS); ``assignments`` is null to let the broker place the new
partitions, else one replica list per new partition. v1 has v0's layout
(throttling after answering); v2 is the first flexible version; v3 may answer
THROTTLING_QUOTA_EXCEEDED (KIP-599).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, STRING, Array, Struct, field


class CreatePartitionsRequestAssignment(Struct):
    broker_ids: list[int] = field(Array(INT32))


class CreatePartitionsRequestTopic(Struct):
    name: str = field(STRING)
    count: int = field(INT32)
    assignments: list[CreatePartitionsRequestAssignment] | None = field(
        Array(CreatePartitionsRequestAssignment), nullable="0+"
    )


class CreatePartitionsRequest(Struct):
    topics: list[CreatePartitionsRequestTopic] = field(Array(CreatePartitionsRequestTopic))
    timeout_ms: int = field(INT32)
    validate_only: bool = field(BOOL)


class CreatePartitionsResponseTopic(Struct):
    name: str = field(STRING)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+", default=None)


class CreatePartitionsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    results: list[CreatePartitionsResponseTopic] = field(Array(CreatePartitionsResponseTopic))


SPEC = register(
    ApiSpec(37, "CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, 0, 3, 2)
)
