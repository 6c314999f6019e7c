"""ConsumerGroupDescribe (key 69), versions 0-1; flexible from v0 (KIP-848).

Describes consumer-protocol groups: the group epoch, the target assignment epoch,
the assignor, and per member its epoch, subscription, current assignment and
target assignment (topic id and name per topic). v1 adds each member's
member_type (-1 unknown, 0 classic, 1 consumer: KIP-1099, for groups upgraded
from the classic protocol).
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Struct, field

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class ConsumerGroupDescribeRequest(Struct):
    group_ids: list[str] = field(Array(STRING))
    include_authorized_operations: bool = field(BOOL)


class ConsumerGroupDescribeResponseTopicPartitions(Struct):
    topic_id: uuid.UUID = field(UUID)
    topic_name: str = field(STRING)
    partitions: list[int] = field(Array(INT32))


class ConsumerGroupDescribeResponseAssignment(Struct):
    topic_partitions: list[ConsumerGroupDescribeResponseTopicPartitions] = field(
        Array(ConsumerGroupDescribeResponseTopicPartitions)
    )


class ConsumerGroupDescribeResponseMember(Struct):
    member_id: str = field(STRING)
    instance_id: str | None = field(STRING, nullable="0+", default=None)
    rack_id: str | None = field(STRING, nullable="0+", default=None)
    member_epoch: int = field(INT32)
    client_id: str = field(STRING)
    client_host: str = field(STRING)
    subscribed_topic_names: list[str] = field(Array(STRING))
    subscribed_topic_regex: str | None = field(STRING, nullable="0+", default=None)
    assignment: ConsumerGroupDescribeResponseAssignment = field(ConsumerGroupDescribeResponseAssignment)
    target_assignment: ConsumerGroupDescribeResponseAssignment = field(ConsumerGroupDescribeResponseAssignment)
    member_type: int = field(INT8, v="1+", default=-1)


class ConsumerGroupDescribeResponseGroup(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+", default=None)
    group_id: str = field(STRING)
    group_state: str = field(STRING)
    group_epoch: int = field(INT32)
    assignment_epoch: int = field(INT32)
    assignor_name: str = field(STRING)
    members: list[ConsumerGroupDescribeResponseMember] = field(Array(ConsumerGroupDescribeResponseMember))
    authorized_operations: int = field(INT32, default=AUTHORIZED_OPERATIONS_OMITTED)


class ConsumerGroupDescribeResponse(Struct):
    throttle_time_ms: int = field(INT32)
    groups: list[ConsumerGroupDescribeResponseGroup] = field(Array(ConsumerGroupDescribeResponseGroup))


SPEC = register(
    ApiSpec(69, "ConsumerGroupDescribe", ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1, 0)
)
