"""DescribeGroups (key 15), versions 0-6; flexible from v5.

v1 adds throttle_time_ms; v2 is the same as v1; v3 adds
include_authorized_operations and the groups' authorized_operations; v4 adds
the members' group_instance_id; v5 is the first flexible version; v6 adds each
group's error_message and answers a group that does not exist with
GROUP_ID_NOT_FOUND (KIP-1043). Before v6 a group the coordinator does not know
is described as state "Dead" with no error;
protocol_data (the protocol name) and member metadata are filled only for a
Stable group.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Struct, field

# "Authorized operations not requested" sentinel (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class DescribeGroupsRequest(Struct):
    groups: list[str] = field(Array(STRING))
    include_authorized_operations: bool = field(BOOL, v="3+")


class DescribeGroupsResponseDescribedGroupMember(Struct):
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="4+", nullable="4+", default=None)
    client_id: str = field(STRING)
    client_host: str = field(STRING)
    member_metadata: bytes = field(BYTES)
    member_assignment: bytes = field(BYTES)


class DescribeGroupsResponseDescribedGroup(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, v="6+", nullable="6+", default=None)
    group_id: str = field(STRING)
    group_state: str = field(STRING)
    protocol_type: str = field(STRING)
    protocol_data: str = field(STRING)
    members: list[DescribeGroupsResponseDescribedGroupMember] = field(
        Array(DescribeGroupsResponseDescribedGroupMember)
    )
    authorized_operations: int = field(INT32, v="3+", default=AUTHORIZED_OPERATIONS_OMITTED)


class DescribeGroupsResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    groups: list[DescribeGroupsResponseDescribedGroup] = field(Array(DescribeGroupsResponseDescribedGroup))


SPEC = register(ApiSpec(15, "DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, 0, 6, 5))
